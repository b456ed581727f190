#pragma once
// The checkpoint file format: a header, a list of records, and a CRC-32 of everything
// before it. Each rank writes one file per checkpoint; a record is one of
//
//   slice       elements [begin, begin + count) of a logical float32 tensor of `shape`
//               (replicated tensors are written as one slice per rank, in parallel);
//   rank_local  a whole float32 tensor that belongs to the writing rank alone (error-
//               feedback residuals), tagged with that rank;
//   blob        bytes: step, data position, random state, user metadata.
//
// Layout (little-endian):
//   "STRATACK" u32 version u32 records
//   per record: u8 kind, u16 name length, name, u8 dims, u64 dims..., u64 begin, u64 count,
//               u32 source rank, u64 payload bytes, payload
//   u32 crc32 (zlib) of all bytes before it
//
// The reader checks every length against what is left before it trusts it: a truncated,
// corrupted or foreign file is refused with checkpoint_error, never read past its end. It
// parses an image in memory (parse_file) or a file in place (file_reader: the record headers
// are read, the payloads stay on disk until a range of them is asked for), with one parser.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <utility>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>

#include "strata/config.hpp"
#include "strata/detail/text.hpp"
#include "strata/error.hpp"

namespace strata::ckpt {

namespace text = strata::detail;  // messages without fmt: this header is compiled by nvcc too

static_assert(std::endian::native == std::endian::little, "checkpoint files are little-endian; add byte swapping");

/// A checkpoint cannot be written, or a file is missing, truncated, corrupted or of another
/// format version. The message names the file and what is wrong with it.
class checkpoint_error : public error {
 public:
  using error::error;
};

/// A checkpoint file cannot be written (a full disk, a read-only file system, no permission):
/// nothing was committed, and a restart would fail at the same save.
class checkpoint_write_error : public checkpoint_error {
 public:
  using checkpoint_error::checkpoint_error;
};

inline constexpr std::uint32_t format_version = 1;
inline constexpr std::string_view file_magic = "STRATACK";

enum class record_kind : std::uint8_t { slice = 0, rank_local = 1, blob = 2 };

/// Limits that keep a hostile file from asking for absurd allocations.
inline constexpr std::size_t max_name_bytes = 4096;
inline constexpr std::size_t max_dims = 8;

struct record;

/// Where the payloads of records read in place come from: a checkpoint file (file_reader), or
/// a file of another format whose tensors are read as records (safetensors::reader).
class payload_source {
 public:
  /// Elements [first, first + out.size()) of `r`'s payload, as float32.
  virtual void read_floats(const record& r, std::uint64_t first, std::span<float> out) const = 0;

 protected:
  ~payload_source() = default;
};

/// One record, pointing into the bytes it was parsed from (or will be written from), or, when
/// parsed from a file in place, to where its payload lies in that file.
struct record {
  record_kind kind = record_kind::blob;
  std::string name;
  std::vector<std::uint64_t> shape;  // logical tensor; empty for blobs
  std::uint64_t begin = 0;           // first element of the slice (slice records)
  std::uint64_t count = 0;           // elements (tensors) or bytes (blobs)
  std::uint32_t source_rank = 0;     // the rank that wrote it
  const payload_source* file = nullptr;  ///< read in place: the payload is read from here
  std::uint64_t payload_at = 0;          ///< where the payload lies in its source
  std::string blob_text{};            ///< parsed in place: a blob's bytes (small: read at once)
  std::span<const std::byte> payload;  ///< parsed in memory, or to be written

  std::uint64_t logical_elements() const {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
  }
  /// Tensor values [first, first + out.size()) of this record, copied out: inside a file
  /// they need not be aligned for float.
  void read_floats(std::uint64_t first, std::span<float> out) const;
  std::vector<float> floats() const {
    std::vector<float> values(static_cast<std::size_t>(kind == record_kind::blob ? 0 : count));
    read_floats(0, values);
    return values;
  }
  std::string_view text() const {
    if (file) return blob_text;
    return {reinterpret_cast<const char*>(payload.data()), payload.size()};
  }
};

STRATA_DECL std::uint32_t crc32_of(std::span<const std::byte> bytes);

/// Serializes records into one file image, checksum included.
class file_builder {
 public:
  STRATA_DECL file_builder();

  /// Adds `r`; usage_error for a name or a rank the format cannot hold (which the reader
  /// would refuse), where a cast would have cut it silently.
  STRATA_DECL void add(const record& r);

  /// The finished image: record count patched in, CRC-32 appended.
  STRATA_DECL std::vector<std::byte> finish() &&;

 private:
  template <class T>
  void put(T value) {
    append(std::as_bytes(std::span<const T>(&value, 1)));
  }
  void append(std::span<const std::byte> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }

  std::vector<std::byte> bytes_;
  std::uint32_t records_ = 0;
};

/// Parses a file image; throws checkpoint_error naming `what` (the file) on any defect.
/// The records point into `bytes`, which must outlive them.
STRATA_DECL std::vector<record> parse_file(std::span<const std::byte> bytes, std::string_view what);

namespace detail {

/// A file descriptor that closes itself.
class file_descriptor {
 public:
  file_descriptor() = default;
  explicit file_descriptor(int fd) : fd_(fd) {}
  file_descriptor(file_descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  file_descriptor& operator=(file_descriptor&& other) noexcept {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }
  ~file_descriptor() { reset(); }
  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  STRATA_DECL void reset();

 private:
  int fd_ = -1;
};

/// `path` opened for reading, `st` filled; or why it is not a regular file that can be read.
STRATA_DECL file_descriptor open_regular(const std::string& path, struct stat& st, std::string& why);

/// The CRC-32 a finished file image carries in its last four bytes: the digest of its
/// contents. (The CRC-32 of a whole image is the same constant for every image.)
inline std::uint32_t stored_crc(std::span<const std::byte> image) {
  std::uint32_t crc = 0;
  if (image.size() >= sizeof(crc)) std::memcpy(&crc, image.data() + image.size() - sizeof(crc), sizeof(crc));
  return crc;
}

/// Receives a file's contents, a piece at a time.
using byte_sink = std::function<void(std::span<const std::byte>)>;

/// What a refusal to write says where the disk is full, for checkpoints.
inline constexpr std::string_view checkpoint_full_disk =
    " (the disk is full: free space or choose another checkpoint directory; nothing of this checkpoint was committed)";

/// Writes the file at `path` atomically with what `fill(put)` puts: a temporary file, fsync,
/// rename, fsync of the folder. On any failure the temporary file is removed, so a full disk
/// is not filled further by every retry. The file system's refusals are
/// checkpoint_write_error ("cannot write <what><path>: write failed: ..."); `fill`'s own
/// exceptions pass through unchanged.
STRATA_DECL void write_atomically(const std::filesystem::path& path, const std::function<void(const byte_sink&)>& fill,
                                  std::string_view what = "checkpoint file ",
                                  std::string_view when_full = checkpoint_full_disk);

/// Writes `bytes` to `path` atomically (above).
inline void write_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes,
                             std::string_view what = "checkpoint file ",
                             std::string_view when_full = checkpoint_full_disk) {
  write_atomically(path, [&](const byte_sink& put) { put(bytes); }, what, when_full);
}

/// Reads bytes [at, at + out.size()) of `fd` into `out`; "" or why it could not.
STRATA_DECL std::string pread_all(int fd, std::uint64_t at, std::span<std::byte> out);

}  // namespace detail

/// A checkpoint file read in place: its CRC-32 checked and its records parsed by reading the
/// file in pieces, the payloads left on disk until a range of them is read. What restores and
/// exports use, so that memory holds what is being copied, not every file at once. The file
/// stays open only while it is parsed: a checkpoint of a thousand ranks must not hold a
/// thousand descriptors on every rank; a payload read opens it again and refuses a file that
/// is no longer the one checked.
class file_reader final : public payload_source {
 public:
  /// Opens `path`; throws checkpoint_error naming it when it is no regular file or cannot be
  /// read.
  STRATA_DECL explicit file_reader(std::string path);

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  /// The file's records; their payloads are read through this reader, which must outlive them.
  STRATA_DECL std::vector<record> records();

  /// The CRC-32 the file carries in its last four bytes.
  std::uint32_t stored_crc() { return size_ < sizeof(std::uint32_t) ? 0 : detail::stored_crc(read(size_ - 4, 4)); }

  void read_floats(const record& r, std::uint64_t first, std::span<float> out) const override {
    read_into(r.payload_at + first * sizeof(float), std::as_writable_bytes(out));
  }

  /// Reads bytes [at, at + out.size()) of the file into `out`.
  STRATA_DECL void read_into(std::uint64_t at, std::span<std::byte> out) const;

  // The parser's source: small reads through a window of the file (a record's fields are a
  // few bytes each; a read each would cost a system call each), the checksum in pieces.
  STRATA_DECL std::span<const std::byte> read(std::uint64_t at, std::uint64_t n);
  STRATA_DECL std::uint32_t crc_of_first(std::uint64_t n);

 private:
  void fail_unless(const std::string& why) const {
    if (!why.empty()) throw checkpoint_error(text::cat("checkpoint file ", path_, " ", why));
  }

  std::string path_;
  detail::file_descriptor fd_;  ///< open while the file is checked and parsed
  struct stat identity_ {};
  std::uint64_t size_ = 0;
  std::vector<std::byte> window_;
  std::uint64_t window_at_ = 0;
};

inline void record::read_floats(std::uint64_t first, std::span<float> out) const {
  if (file) return file->read_floats(*this, first, out);
  std::memcpy(out.data(), payload.data() + first * sizeof(float), out.size_bytes());
}

}  // namespace strata::ckpt

#if defined(STRATA_HEADER_ONLY)
#include "strata/ckpt/impl/format.ipp"
#endif
