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
// Host code only (nlohmann_json): the nvcc-compiled headers do not include it.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "strata/ckpt/format.hpp"
#include "strata/detail/text.hpp"
#include "strata/numeric/float16.hpp"

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
inline std::optional<std::size_t> format_element_bytes(std::string_view name) {
  static const std::map<std::string_view, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},    {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
      {"C64", 8}};
  const auto it = sizes.find(name);
  return it == sizes.end() ? std::nullopt : std::optional(it->second);
}

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

inline void decode(dtype t, const std::byte* in, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (t == dtype::f32) {
      std::memcpy(&out[i], in + 4 * i, 4);
    } else if (t == dtype::f64) {
      double d;
      std::memcpy(&d, in + 8 * i, 8);
      out[i] = static_cast<float>(d);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, in + 2 * i, 2);
      out[i] = t == dtype::f16 ? strata::detail::half_bits_to_float(bits) : strata::detail::bfloat16_bits_to_float(bits);
    }
  }
}

inline void encode(dtype t, std::span<const float> in, std::byte* out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (t == dtype::f32) {
      std::memcpy(out + 4 * i, &in[i], 4);
    } else if (t == dtype::f64) {
      const double d = in[i];
      std::memcpy(out + 8 * i, &d, 8);
    } else {
      const std::uint16_t bits =
          t == dtype::f16 ? strata::detail::float_to_half_bits(in[i]) : strata::detail::float_to_bfloat16_bits(in[i]);
      std::memcpy(out + 2 * i, &bits, 2);
    }
  }
}

/// Elements converted per piece when streaming: 4 MiB of float32.
inline constexpr std::size_t piece_elements = 1 << 20;

}  // namespace detail

/// A safetensors file opened for reading: its header parsed and checked whole at opening,
/// its tensors read in pieces on demand; also a source of checkpoint records, one whole
/// tensor each, so that a model is filled from it as from a checkpoint.
class reader final : public payload_source {
 public:
  explicit reader(std::string path) : path_(std::move(path)) {
    struct stat st {};
    std::string why;
    fd_ = strata::ckpt::detail::open_regular(path_, st, why);
    if (!fd_.open()) throw fail(why);
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size < 8) throw fail(text::cat("it has ", size, " bytes, fewer than the 8 of the header's length (truncated)"));
    std::uint64_t header_bytes = 0;
    read_bytes(0, std::as_writable_bytes(std::span(&header_bytes, 1)));
    if (header_bytes > max_header_bytes)
      throw fail(text::cat("its header length at byte 0 says ", header_bytes, " bytes, over the limit of ",
                           max_header_bytes));
    if (header_bytes > size - 8)
      throw fail(text::cat("its header of ", header_bytes, " bytes runs past the end of the file at byte ", size,
                           " (truncated)"));
    data_at_ = 8 + header_bytes;
    data_bytes_ = size - data_at_;
    std::string header(static_cast<std::size_t>(header_bytes), '\0');
    read_bytes(8, std::as_writable_bytes(std::span(header)));
    if (!header.starts_with('{')) throw fail("its header at byte 8 does not start with '{'");
    parse_header(header);
  }
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
  std::vector<record> records() const {
    std::vector<record> out;
    for (std::size_t k = 0; k < tensors_.size(); ++k) {
      const tensor_info& t = tensors_[k];
      require_convertible(t);
      record r;
      r.kind = record_kind::slice;
      r.name = t.name;
      r.shape = t.shape;
      r.count = t.elements();
      r.file = this;
      r.payload_at = k;
      out.push_back(std::move(r));
    }
    return out;
  }
  const tensor_info& tensor_of(const record& r) const { return tensors_[static_cast<std::size_t>(r.payload_at)]; }
  void read_floats(const record& r, std::uint64_t first, std::span<float> out) const override {
    read_floats(tensor_of(r), first, out);
  }

  /// Elements [first, first + out.size()) of `t`, converted to float32. A dtype strata does
  /// not convert (integers, fp8) is refused naming the tensor.
  void read_floats(const tensor_info& t, std::uint64_t first, std::span<float> out) const {
    require_convertible(t);
    const std::size_t bytes = size_of(*t.type);
    std::vector<std::byte> piece(std::min(out.size(), detail::piece_elements) * bytes);
    for (std::size_t done = 0; done < out.size();) {
      const std::size_t n = std::min(out.size() - done, detail::piece_elements);
      read_bytes(data_at_ + t.begin + (first + done) * bytes, std::span(piece.data(), n * bytes));
      detail::decode(*t.type, piece.data(), out.subspan(done, n));
      done += n;
    }
  }

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

  void parse_header(const std::string& header) {
    // nlohmann_json keeps the last of two equal keys: the callback sees every key of the top
    // object, so that a name given twice is refused instead.
    std::vector<std::string> keys;
    const nlohmann::json::parser_callback_t note_keys = [&](int depth, nlohmann::json::parse_event_t event,
                                                            nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key && depth == 1) keys.push_back(parsed.get<std::string>());
      return true;
    };
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(header, note_keys);
    } catch (const nlohmann::json::parse_error& e) {
      throw fail(text::cat("its header is not valid JSON at byte ", 8 + e.byte - (e.byte > 0 ? 1 : 0), " of the file: ",
                           text::excerpt(e.what(), 160)));
    }
    std::sort(keys.begin(), keys.end());
    if (const auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end())
      throw fail(text::cat("its header names tensor \"", text::excerpt(*twice, 96), "\" twice"));
    for (const auto& [name, entry] : json.items()) {
      if (name == "__metadata__") {
        if (entry.is_null()) continue;
        if (!entry.is_object()) throw fail("its \"__metadata__\" is not an object of strings");
        for (const auto& [key, value] : entry.items()) {
          if (!value.is_string())
            throw fail(text::cat("its \"__metadata__\" entry \"", text::excerpt(key, 96), "\" is not a string"));
          metadata_.emplace(key, value.get<std::string>());
        }
        continue;
      }
      tensors_.push_back(parse_tensor(name, entry));
    }
    std::sort(tensors_.begin(), tensors_.end(), [](const tensor_info& a, const tensor_info& b) {
      return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
    });
    // The reference implementation's rule: the tensors tile the data section exactly.
    std::uint64_t at = 0;
    for (const tensor_info& t : tensors_) {
      if (t.begin != at)
        throw fail(text::cat("tensor \"", t.name, "\" starts at byte ", data_at_ + t.begin, ", but the tensor before it ",
                             t.begin < at ? "overlaps it up to byte " : "ends at byte ", data_at_ + at,
                             t.begin < at ? "" : " (a gap)"));
      at = t.end;
    }
    if (at != data_bytes_)
      throw fail(text::cat("its tensors end at byte ", data_at_ + at, ", but the file ",
                           at > data_bytes_ ? "ends at byte " : "goes on to byte ", data_at_ + data_bytes_,
                           at > data_bytes_ ? " (truncated)" : " (bytes that no tensor owns)"));
  }

  tensor_info parse_tensor(const std::string& name, const nlohmann::json& entry) const {
    const std::string quoted = text::cat("tensor \"", text::excerpt(name, 96), "\"");
    if (!entry.is_object()) throw fail(text::cat(quoted, " is not described by an object"));
    tensor_info t;
    t.name = name;
    const auto dtype_field = entry.find("dtype");
    if (dtype_field == entry.end() || !dtype_field->is_string()) throw fail(text::cat(quoted, " has no dtype"));
    t.dtype_name = dtype_field->get<std::string>();
    const auto element_bytes = format_element_bytes(t.dtype_name);
    if (!element_bytes) throw fail(text::cat(quoted, " has unknown dtype \"", text::excerpt(t.dtype_name, 32), "\""));
    if (const auto converted = dtype_named(t.dtype_name); converted && name_of(*converted) == t.dtype_name) t.type = converted;
    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) throw fail(text::cat(quoted, " has no shape"));
    std::uint64_t elements = 1;
    for (const auto& extent : *shape) {
      if (!extent.is_number_unsigned()) throw fail(text::cat(quoted, " has a shape of other than whole numbers"));
      const std::uint64_t d = extent.get<std::uint64_t>();
      if (d != 0 && elements > std::numeric_limits<std::uint64_t>::max() / d)
        throw fail(text::cat(quoted, " has a shape whose size overflows"));
      elements *= d;
      t.shape.push_back(d);
    }
    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      throw fail(text::cat(quoted, " has no data_offsets [begin, end]"));
    t.begin = (*offsets)[0].get<std::uint64_t>();
    t.end = (*offsets)[1].get<std::uint64_t>();
    if (t.begin > t.end) throw fail(text::cat(quoted, " has data_offsets [", t.begin, ", ", t.end, "] that end before they begin"));
    if (t.end > data_bytes_)
      throw fail(text::cat(quoted, " ends at byte ", data_at_ + t.end, ", past the end of the file at byte ",
                           data_at_ + data_bytes_, " (truncated?)"));
    if (elements > std::numeric_limits<std::uint64_t>::max() / *element_bytes || t.end - t.begin != elements * *element_bytes)
      throw fail(text::cat(quoted, " has shape [", text::join(t.shape, ","), "] of ", t.dtype_name, ", ",
                           elements * *element_bytes, " bytes, but its data_offsets hold ", t.end - t.begin));
    return t;
  }

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
inline void write(const std::filesystem::path& path, const std::vector<tensor_to_write>& tensors,
                  const std::map<std::string, std::string>& metadata, const tensor_source& source) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t at = 0;
  for (const tensor_to_write& t : tensors) {
    const std::uint64_t bytes = t.elements() * size_of(t.type);
    header[t.name] = {{"dtype", name_of(t.type)}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text_header = header.dump();
  text_header.append((8 - text_header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const std::uint64_t header_bytes = text_header.size();

  strata::ckpt::detail::write_atomically(
      path,
      [&](const strata::ckpt::detail::byte_sink& put) {
        put(std::as_bytes(std::span(&header_bytes, 1)));
        put(std::as_bytes(std::span(text_header)));
        std::vector<float> values;
        std::vector<std::byte> encoded;
        for (std::size_t k = 0; k < tensors.size(); ++k) {
          const tensor_to_write& t = tensors[k];
          for (std::uint64_t first = 0; first < t.elements(); first += detail::piece_elements) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(detail::piece_elements, t.elements() - first));
            values.resize(n);
            source(k, first, values);
            encoded.resize(n * size_of(t.type));
            detail::encode(t.type, values, encoded.data());
            put(encoded);
          }
        }
      },
      "", " (the disk is full)");
}

}  // namespace strata::ckpt::safetensors
