#pragma once
// The safetensors format, the one the rest of the ecosystem reads and writes (PyTorch, JAX,
// Hugging Face, llama.cpp's converters):
//
//   u64 N (little-endian)   the header's length
//   N bytes                 a JSON object: per tensor {"dtype", "shape", "data_offsets": [b, e]},
//                           optionally "__metadata__": {string: string}; padded with spaces
//   the data                each tensor's bytes at [b, e) of it, row-major, little-endian
//
// The reader checks what the reference implementation checks, and names the tensor or the
// byte offset it refuses: a header over 100,000,000 bytes or past the file's end, JSON that
// does not parse (with the byte), a name given twice, an unknown dtype, a shape whose size
// overflows, offsets that do not match the shape, that overlap, leave gaps or run past the
// data. Tensors are read in pieces (pread), converted to float32 as asked: a file is never
// held whole in memory. The writer lays out the header first, then streams each tensor's
// values in pieces, converted to its dtype, into a temporary file renamed into place: a
// failed write leaves nothing under the final name.
//
// Host code only (nlohmann_json, in impl/safetensors.ipp): the nvcc-compiled headers do not
// include it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/ckpt/format.hpp"
#include "strata/config.hpp"
#include "strata/detail/text.hpp"

namespace strata::ckpt::safetensors {

/// A safetensors file that cannot be used: the message names the file and the tensor or the
/// byte offset at fault. A checkpoint_error, so programs end with exit status 65.
class format_error : public checkpoint_error {
 public:
  using checkpoint_error::checkpoint_error;
};

/// The element types strata converts from and to float32.
enum class dtype { f64, f32, f16, bf16 };

inline constexpr std::uint64_t max_header_bytes = 100'000'000;  // the reference implementation's limit

/// What strata knows of each dtype: the format's name ("BF16"), the word strata's model
/// descriptions use ("bfloat16"), a short name for command lines ("bf16"), the bytes.
struct dtype_names {
  dtype type;
  std::string_view format, word, short_name;
  std::size_t bytes;
};
inline constexpr std::array<dtype_names, 4> dtypes = {{{dtype::f64, "F64", "float64", "f64", 8},
                                                        {dtype::f32, "F32", "float32", "f32", 4},
                                                        {dtype::f16, "F16", "float16", "f16", 2},
                                                        {dtype::bf16, "BF16", "bfloat16", "bf16", 2}}};

static_assert(dtypes[static_cast<std::size_t>(dtype::bf16)].type == dtype::bf16, "dtypes is in the enum's order");

inline const dtype_names& names_of(dtype t) { return dtypes[static_cast<std::size_t>(t)]; }
inline std::string_view name_of(dtype t) { return names_of(t).format; }
inline std::string_view word_of(dtype t) { return names_of(t).word; }
inline std::size_t size_of(dtype t) { return names_of(t).bytes; }

/// The dtype called `name` by any of its names ("BF16", "bfloat16", "bf16"), or nullopt.
inline std::optional<dtype> dtype_named(std::string_view name) {
  for (const dtype_names& d : dtypes)
    if (name == d.format || name == d.word || name == d.short_name) return d.type;
  return std::nullopt;
}

/// Bytes per element of every dtype the format defines (to check offsets of tensors strata
/// will not convert, and to name them when refused).
STRATA_DECL std::optional<std::size_t> format_element_bytes(std::string_view name);

/// One tensor of a file: its dtype as the file names it (converted only where `type` is
/// set), its shape, and where its bytes lie in the data section.
struct tensor_info {
  std::string name;
  std::string dtype_name;
  std::optional<dtype> type;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< data_offsets, relative to the data section

  std::uint64_t elements() const {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
  }
};

namespace detail {

/// Elements converted per piece when streaming: 4 MiB of float32.
inline constexpr std::size_t piece_elements = 1 << 20;

}  // namespace detail

/// A safetensors file opened for reading: its header parsed and checked whole at opening,
/// its tensors read in pieces on demand; also a source of checkpoint records, one whole
/// tensor each, so that a model is filled from it as from a checkpoint.
class reader final : public payload_source {
 public:
  STRATA_DECL explicit reader(std::string path);
  reader(const reader&) = delete;
  reader& operator=(const reader&) = delete;

  const std::string& path() const { return path_; }
  /// The tensors in the order of their bytes in the file.
  const std::vector<tensor_info>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const tensor_info* find(std::string_view name) const {
    const auto it = std::find_if(tensors_.begin(), tensors_.end(), [&](const tensor_info& t) { return t.name == name; });
    return it == tensors_.end() ? nullptr : &*it;
  }

  /// Each tensor as a checkpoint record: one slice covering it, read through this reader
  /// (which must outlive them). A dtype strata does not convert is refused naming the tensor.
  STRATA_DECL std::vector<record> records() const;
  const tensor_info& tensor_of(const record& r) const { return tensors_[static_cast<std::size_t>(r.payload_at)]; }
  void read_floats(const record& r, std::uint64_t first, std::span<float> out) const override {
    read_floats(tensor_of(r), first, out);
  }

  /// Elements [first, first + out.size()) of `t`, converted to float32. A dtype strata does
  /// not convert (integers, fp8) is refused naming the tensor.
  STRATA_DECL void read_floats(const tensor_info& t, std::uint64_t first, std::span<float> out) const;

 private:
  void require_convertible(const tensor_info& t) const {
    if (!t.type)
      throw fail(text::cat("tensor \"", t.name, "\" has dtype ", t.dtype_name,
                           "; strata's variables take F64, F32, F16 or BF16"));
  }

  format_error fail(std::string_view why) const {
    return format_error(text::cat("safetensors file ", path_, " is unusable: ", why));
  }

  void read_bytes(std::uint64_t at, std::span<std::byte> out) const {
    if (const std::string why = strata::ckpt::detail::pread_all(fd_.get(), at, out); !why.empty()) throw fail(why);
  }

  STRATA_DECL void parse_header(const std::string& header);

  std::string path_;
  strata::ckpt::detail::file_descriptor fd_;
  std::uint64_t data_at_ = 0, data_bytes_ = 0;
  std::vector<tensor_info> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A tensor to write: its name, the dtype to store it in, its shape.
struct tensor_to_write {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::uint64_t> shape;

  std::uint64_t elements() const {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
  }
};

/// Fills `out` with elements [first, first + out.size()) of tensor `k` (float32).
using tensor_source = std::function<void(std::size_t k, std::uint64_t first, std::span<float> out)>;

/// Writes `tensors` to `path` in the order given, asking `source` for their values a piece at
/// a time (at most 4 MiB of float32 are held). Through a temporary file renamed into place:
/// on any error nothing is left under `path` (checkpoint_write_error when the file system
/// refuses; the source's own exception otherwise).
STRATA_DECL void write(const std::filesystem::path& path, const std::vector<tensor_to_write>& tensors,
                       const std::map<std::string, std::string>& metadata, const tensor_source& source);

}  // namespace strata::ckpt::safetensors

#if defined(STRATA_HEADER_ONLY)
#include "strata/ckpt/impl/safetensors.ipp"
#endif
