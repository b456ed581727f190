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
// corrupted or foreign file is refused with checkpoint_error, never read past its end.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <zlib.h>

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

/// One record, pointing into the bytes it was parsed from (or will be written from).
struct record {
  record_kind kind = record_kind::blob;
  std::string name;
  std::vector<std::uint64_t> shape;  // logical tensor; empty for blobs
  std::uint64_t begin = 0;           // first element of the slice (slice records)
  std::uint64_t count = 0;           // elements (tensors) or bytes (blobs)
  std::uint32_t source_rank = 0;     // the rank that wrote it
  std::span<const std::byte> payload;

  std::uint64_t logical_elements() const {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
  }
  /// The tensor values, copied out: inside a file they need not be aligned for float.
  std::vector<float> floats() const {
    std::vector<float> values(payload.size() / sizeof(float));
    std::memcpy(values.data(), payload.data(), values.size() * sizeof(float));
    return values;
  }
  std::string_view text() const { return {reinterpret_cast<const char*>(payload.data()), payload.size()}; }
};

inline std::uint32_t crc32_of(std::span<const std::byte> bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

/// Serializes records into one file image, checksum included.
class file_builder {
 public:
  file_builder() {
    append(std::as_bytes(std::span(file_magic)));
    put(format_version);
    put(std::uint32_t{0});  // record count, patched by finish()
  }

  void add(const record& r) {
    put(static_cast<std::uint8_t>(r.kind));
    put(static_cast<std::uint16_t>(r.name.size()));
    append(std::as_bytes(std::span(r.name)));
    put(static_cast<std::uint8_t>(r.shape.size()));
    for (std::uint64_t d : r.shape) put(d);
    put(r.begin);
    put(r.count);
    put(r.source_rank);
    put(static_cast<std::uint64_t>(r.payload.size()));
    append(r.payload);
    ++records_;
  }

  /// The finished image: record count patched in, CRC-32 appended.
  std::vector<std::byte> finish() && {
    std::memcpy(bytes_.data() + file_magic.size() + sizeof(std::uint32_t), &records_, sizeof(records_));
    put(crc32_of(bytes_));
    return std::move(bytes_);
  }

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
inline std::vector<record> parse_file(std::span<const std::byte> bytes, std::string_view what) {
  auto fail = [&](std::string_view why) -> checkpoint_error {
    return checkpoint_error(text::cat("checkpoint file ", what, " is unusable: ", why));
  };
  constexpr std::size_t header = file_magic.size() + 2 * sizeof(std::uint32_t);
  if (bytes.size() < header + sizeof(std::uint32_t))
    throw fail(text::cat("it has ", bytes.size(), " bytes, fewer than an empty checkpoint file (truncated?)"));
  if (std::memcmp(bytes.data(), file_magic.data(), file_magic.size()) != 0)
    throw fail("it does not start with \"STRATACK\" (not a strata checkpoint)");

  std::size_t at = file_magic.size();
  auto take = [&]<class T>(std::type_identity<T>, std::string_view field) {
    if (bytes.size() - sizeof(std::uint32_t) - at < sizeof(T))
      throw fail(text::cat("it ends inside the ", field, " at byte ", at, " (truncated)"));
    T value;
    std::memcpy(&value, bytes.data() + at, sizeof(T));
    at += sizeof(T);
    return value;
  };
  auto take_bytes = [&](std::uint64_t n, std::string_view field) {
    if (bytes.size() - sizeof(std::uint32_t) - at < n)
      throw fail(text::cat("its ", field, " of ", n, " bytes at byte ", at, " runs past the end (truncated)"));
    const auto span = bytes.subspan(at, static_cast<std::size_t>(n));
    at += static_cast<std::size_t>(n);
    return span;
  };
  using u8 = std::type_identity<std::uint8_t>;
  using u16 = std::type_identity<std::uint16_t>;
  using u32 = std::type_identity<std::uint32_t>;
  using u64 = std::type_identity<std::uint64_t>;

  const std::uint32_t version = take(u32{}, "format version");
  if (version != format_version)
    throw fail(text::cat("format version ", version, ", but this strata reads version ", format_version));
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - sizeof(stored_crc), sizeof(stored_crc));
  if (crc32_of(bytes.first(bytes.size() - sizeof(stored_crc))) != stored_crc)
    throw fail("its CRC-32 does not match its contents (corrupted or truncated)");

  const std::uint32_t count = take(u32{}, "record count");
  std::vector<record> records;
  for (std::uint32_t i = 0; i < count; ++i) {
    record r;
    const std::uint8_t kind = take(u8{}, "record kind");
    if (kind > static_cast<std::uint8_t>(record_kind::blob))
      throw fail(text::cat("record ", i, " has unknown kind ", kind));
    r.kind = static_cast<record_kind>(kind);
    const std::uint16_t name_bytes = take(u16{}, "name length");
    if (name_bytes > max_name_bytes) throw fail(text::cat("record ", i, " has a name of ", name_bytes, " bytes"));
    const auto name = take_bytes(name_bytes, "name");
    r.name.assign(reinterpret_cast<const char*>(name.data()), name.size());
    const std::uint8_t dims = take(u8{}, "dimension count");
    if (dims > max_dims) throw fail(text::cat("record \"", r.name, "\" has ", dims, " dimensions"));
    std::uint64_t elements = 1;
    for (std::uint8_t d = 0; d < dims; ++d) {
      const std::uint64_t extent = take(u64{}, "shape");
      if (extent != 0 && elements > std::numeric_limits<std::uint64_t>::max() / extent)
        throw fail(text::cat("record \"", r.name, "\" has a shape whose size overflows"));
      elements *= extent;
      r.shape.push_back(extent);
    }
    r.begin = take(u64{}, "slice begin");
    r.count = take(u64{}, "slice count");
    r.source_rank = take(u32{}, "source rank");
    const std::uint64_t payload_bytes = take(u64{}, "payload length");
    if (r.kind == record_kind::blob) {
      if (payload_bytes != r.count)
        throw fail(text::cat("blob \"", r.name, "\" says ", r.count, " bytes but carries ", payload_bytes));
    } else {
      if (r.begin > elements || r.count > elements - r.begin)
        throw fail(text::cat("slice [", r.begin, ", +", r.count, ") of \"", r.name, "\" lies outside its ", elements,
                             " elements"));
      if (r.kind == record_kind::rank_local && (r.begin != 0 || r.count != elements))
        throw fail(text::cat("rank-local record \"", r.name, "\" is not a whole tensor"));
      if (r.count > std::numeric_limits<std::uint64_t>::max() / sizeof(float) || payload_bytes != r.count * sizeof(float))
        throw fail(text::cat("tensor record \"", r.name, "\" has ", r.count, " elements but ", payload_bytes,
                             " payload bytes"));
    }
    r.payload = take_bytes(payload_bytes, "payload");
    records.push_back(std::move(r));
  }
  if (at != bytes.size() - sizeof(std::uint32_t))
    throw fail(text::cat(bytes.size() - sizeof(std::uint32_t) - at, " bytes follow the last record"));
  return records;
}

/// The bytes of a file, or checkpoint_error naming it.
inline std::vector<std::byte> read_file_bytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw checkpoint_error(
        text::cat("checkpoint file ", path, " is not a regular file",
                  ec ? text::cat(" (", ec.message(), ")") : std::string(" (a folder, or missing?)")));
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw checkpoint_error(text::cat("checkpoint file ", path, " cannot be opened"));
  const auto size = static_cast<std::size_t>(in.tellg());
  std::vector<std::byte> bytes(size);
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    throw checkpoint_error(text::cat("checkpoint file ", path, " cannot be read"));
  return bytes;
}

}  // namespace strata::ckpt
