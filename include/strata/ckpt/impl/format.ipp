#pragma once
// The checkpoint file format's non-template code: compiled in every translation unit when
// strata is header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <system_error>
#include <type_traits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "strata/ckpt/format.hpp"

namespace strata::ckpt {

STRATA_DECL std::uint32_t crc32_of(std::span<const std::byte> bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

STRATA_DECL file_builder::file_builder() {
  append(std::as_bytes(std::span(file_magic)));
  put(format_version);
  put(std::uint32_t{0});  // record count, patched by finish()
}

STRATA_DECL void file_builder::add(const record& r) {
  if (r.name.size() > max_name_bytes)
    throw usage_error(text::cat("a checkpoint record's name has ", r.name.size(), " bytes, over the limit of ",
                                max_name_bytes, ": \"", text::excerpt(r.name, 64), "\""));
  if (r.shape.size() > max_dims)
    throw usage_error(text::cat("\"", text::excerpt(r.name, 64), "\" has ", r.shape.size(),
                                " dimensions; a checkpoint holds at most ", max_dims));
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

STRATA_DECL std::vector<std::byte> file_builder::finish() && {
  std::memcpy(bytes_.data() + file_magic.size() + sizeof(std::uint32_t), &records_, sizeof(records_));
  put(crc32_of(bytes_));
  return std::move(bytes_);
}

namespace detail {

/// Bytes of a file image in memory, as the parser reads them.
struct memory_bytes {
  std::span<const std::byte> bytes;
  std::uint64_t size() const { return bytes.size(); }
  std::span<const std::byte> read(std::uint64_t at, std::uint64_t n) {
    return bytes.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n));
  }
  std::uint32_t crc_of_first(std::uint64_t n) { return crc32_of(read(0, n)); }
};

/// Parses the records of a file image from `source` (memory_bytes, file_reader); throws
/// checkpoint_error naming `what` (the file) on any defect. Payloads are located, not read:
/// `locate(record, offset, bytes)` records where each lies.
template <class Source, class Locate>
std::vector<record> parse_records(Source& source, std::string_view what, Locate&& locate) {
  auto fail = [&](std::string_view why) -> checkpoint_error {
    return checkpoint_error(text::cat("checkpoint file ", what, " is unusable: ", why));
  };
  const std::uint64_t size = source.size();
  constexpr std::size_t header = file_magic.size() + 2 * sizeof(std::uint32_t);
  if (size < header + sizeof(std::uint32_t))
    throw fail(text::cat("it has ", size, " bytes, fewer than an empty checkpoint file (truncated?)"));
  if (std::memcmp(source.read(0, file_magic.size()).data(), file_magic.data(), file_magic.size()) != 0)
    throw fail("it does not start with \"STRATACK\" (not a strata checkpoint)");

  const std::uint64_t end = size - sizeof(std::uint32_t);  // where the CRC-32 starts
  std::uint64_t at = file_magic.size();
  auto take = [&]<class T>(std::type_identity<T>, std::string_view field) {
    if (end - at < sizeof(T)) throw fail(text::cat("it ends inside the ", field, " at byte ", at, " (truncated)"));
    T value;
    std::memcpy(&value, source.read(at, sizeof(T)).data(), sizeof(T));
    at += sizeof(T);
    return value;
  };
  auto skip = [&](std::uint64_t n, std::string_view field) {
    if (end - at < n) throw fail(text::cat("its ", field, " of ", n, " bytes at byte ", at, " runs past the end (truncated)"));
    const std::uint64_t from = at;
    at += n;
    return from;
  };
  using u8 = std::type_identity<std::uint8_t>;
  using u16 = std::type_identity<std::uint16_t>;
  using u32 = std::type_identity<std::uint32_t>;
  using u64 = std::type_identity<std::uint64_t>;

  const std::uint32_t version = take(u32{}, "format version");
  if (version != format_version)
    throw fail(text::cat("format version ", version, ", but this strata reads version ", format_version));
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, source.read(end, sizeof(stored_crc)).data(), sizeof(stored_crc));
  if (source.crc_of_first(end) != stored_crc) throw fail("its CRC-32 does not match its contents (corrupted or truncated)");

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
    const auto name = source.read(skip(name_bytes, "name"), name_bytes);
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
    locate(r, skip(payload_bytes, "payload"), payload_bytes);
    records.push_back(std::move(r));
  }
  if (at != end) throw fail(text::cat(end - at, " bytes follow the last record"));
  return records;
}

STRATA_DECL void file_descriptor::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

STRATA_DECL file_descriptor open_regular(const std::string& path, struct stat& st, std::string& why) {
  file_descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.open()) {
    why = text::cat("it is not a regular file that can be read (", std::strerror(errno), ")");
  } else if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "it is not a regular file (a folder?)";
    fd.reset();
  }
  return fd;
}

STRATA_DECL void write_atomically(const std::filesystem::path& path, const std::function<void(const byte_sink&)>& fill,
                                  std::string_view what, std::string_view when_full) {
  const std::filesystem::path temporary = path.string() + text::cat(".tmp.", ::getpid());
  auto refused = [&](std::string_view call) {
    const int code = errno;
    return checkpoint_write_error(text::cat("cannot write ", what, path.string(), ": ", call, " failed: ",
                                            std::generic_category().message(code),
                                            code == ENOSPC || code == EDQUOT ? when_full : std::string_view()));
  };
  file_descriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.open()) throw refused("open");
  try {
    fill([&](std::span<const std::byte> bytes) {
      for (std::size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw refused("write");
        done += static_cast<std::size_t>(n);
      }
    });
    if (::fsync(fd.get()) != 0) throw refused("fsync");
    if (::close(fd.release()) != 0) throw refused("close");
    if (std::rename(temporary.c_str(), path.c_str()) != 0) throw refused("rename");
  } catch (...) {
    fd.reset();
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  if (const int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);  // make the rename itself durable
    ::close(dir);
  }
}

STRATA_DECL std::string pread_all(int fd, std::uint64_t at, std::span<std::byte> out) {
  for (std::size_t done = 0; done < out.size();) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return text::cat("it cannot be read at byte ", at + done,
                       n < 0 ? text::cat(": ", std::strerror(errno)) : std::string(" (it shrank)"));
    done += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace detail

STRATA_DECL std::vector<record> parse_file(std::span<const std::byte> bytes, std::string_view what) {
  detail::memory_bytes source{bytes};
  return detail::parse_records(source, what, [&](record& r, std::uint64_t at, std::uint64_t n) {
    r.payload = source.read(at, n);
    r.payload_at = at;
  });
}

STRATA_DECL file_reader::file_reader(std::string path) : path_(std::move(path)) {
  std::string why;
  fd_ = detail::open_regular(path_, identity_, why);
  if (!fd_.open()) throw checkpoint_error(text::cat("checkpoint file ", path_, " ", why));
  size_ = static_cast<std::uint64_t>(identity_.st_size);
}

STRATA_DECL std::vector<record> file_reader::records() {
  std::vector<record> parsed = detail::parse_records(*this, path_, [&](record& r, std::uint64_t at, std::uint64_t n) {
    r.file = this;
    r.payload_at = at;
    if (r.kind == record_kind::blob) {
      const auto bytes = read(at, n);
      r.blob_text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
  });
  fd_.reset();
  window_ = {};
  return parsed;
}

STRATA_DECL void file_reader::read_into(std::uint64_t at, std::span<std::byte> out) const {
  if (fd_.open()) return fail_unless(detail::pread_all(fd_.get(), at, out));
  struct stat now {};
  std::string why;
  const detail::file_descriptor fd = detail::open_regular(path_, now, why);
  fail_unless(why);
  if (now.st_dev != identity_.st_dev || now.st_ino != identity_.st_ino || now.st_size != identity_.st_size ||
      now.st_mtim.tv_sec != identity_.st_mtim.tv_sec || now.st_mtim.tv_nsec != identity_.st_mtim.tv_nsec)
    throw checkpoint_error(text::cat("checkpoint file ", path_, " changed after it was checked (replaced or written to)"));
  fail_unless(detail::pread_all(fd.get(), at, out));
}

STRATA_DECL std::span<const std::byte> file_reader::read(std::uint64_t at, std::uint64_t n) {
  if (at < window_at_ || at + n > window_at_ + window_.size()) {
    constexpr std::uint64_t ahead = 64 << 10;
    window_.resize(static_cast<std::size_t>(std::max(n, std::min(ahead, size_ - std::min(at, size_)))));
    window_at_ = at;
    read_into(at, window_);
  }
  return std::span<const std::byte>(window_).subspan(static_cast<std::size_t>(at - window_at_), static_cast<std::size_t>(n));
}

STRATA_DECL std::uint32_t file_reader::crc_of_first(std::uint64_t n) {
  constexpr std::uint64_t piece = 1 << 20;
  std::vector<std::byte> chunk(static_cast<std::size_t>(std::min(n, piece)));
  uLong crc = crc32_z(0L, Z_NULL, 0);
  for (std::uint64_t at = 0; at < n; at += piece) {
    const std::span<std::byte> part(chunk.data(), static_cast<std::size_t>(std::min(piece, n - at)));
    read_into(at, part);
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(part.data()), part.size());
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace strata::ckpt
