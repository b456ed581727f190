#pragma once
// Segments of POSIX shared memory, one per rank of a group of processes on one machine, and
// reads of another process's memory (Linux cross-memory attach): how a process backend (MPI)
// models SharedMemory and PeerReads (comm/communicator.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"

namespace strata {

/// One mapping of a shared-memory object, unmapped with its owner.
class shared_mapping {
 public:
  shared_mapping(void* base, std::size_t bytes) : base_(base), bytes_(bytes) {}
  shared_mapping(shared_mapping&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  shared_mapping& operator=(shared_mapping other) noexcept {
    std::swap(base_, other.base_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~shared_mapping() {
    if (base_) munmap(base_, bytes_);
  }
  std::byte* base() const { return static_cast<std::byte*>(base_); }

 private:
  void* base_;
  std::size_t bytes_;
};

/// The segments of one group of processes (`Group`: rank, size, spans_machines, allgather).
/// Each rank makes its own segment and maps the others' by name; every name is removed
/// once all ranks have mapped it, so nothing is left in /dev/shm, even after a crash.
/// Where the ranks do not all share a machine (spans_machines), a rank cannot make its
/// segment (a full /dev/shm: said once on standard error) or cannot map another's (separate
/// /dev/shm in containers), `get` returns nothing from then on and the caller sends
/// messages instead.
class process_segments {
 public:
  template <class Group>
  std::span<std::byte* const> get(Group& group, std::size_t bytes) {
    if (unusable_) return {};
    if (!bases_.empty() && bytes <= bytes_) return bases_;
    if (bases_.empty() && group.spans_machines()) return give_up();
    const long page = sysconf(_SC_PAGESIZE);
    bytes = (bytes + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page) * static_cast<std::size_t>(page);
    // Replaced segments stay mapped until every rank is here, done with them.
    shared_mapping old_own = std::move(own_);
    std::vector<shared_mapping> old_mappings = std::move(mappings_);
    mappings_.clear();
    bases_.clear();
    bytes_ = 0;

    entry mine{};
    const std::string name = fmt::format("/strata-{}-{}-{:08x}", getpid(), segment_number(), std::random_device{}());
    std::ranges::copy(name, mine.name);
    mine.error = create(name, bytes);
    std::vector<entry> all(static_cast<std::size_t>(group.size()));
    group.allgather(std::span<const entry>(&mine, 1), std::span<entry>(all));
    for (std::size_t r = 0; r < all.size(); ++r)
      if (all[r].error != 0) {
        if (mine.error == 0) shm_unlink(name.c_str());
        if (group.rank() == 0)
          fmt::print(stderr, "strata: rank {} could not make {} bytes of shared memory ({}: {}); rings send messages\n",
                     r, bytes, all[r].name, std::strerror(all[r].error));
        return give_up();
      }
    int failed = 0;  // errno of this rank's first failed mapping of another's segment
    for (int r = 0; r < group.size(); ++r) {
      if (r == group.rank()) {
        bases_.push_back(own_.base());
        continue;
      }
      const int error = open_and_map(all[static_cast<std::size_t>(r)].name, bytes);
      if (error != 0 && failed == 0) failed = error;
      bases_.push_back(error == 0 ? mappings_.back().base() : nullptr);
    }
    int failures[1] = {failed};
    std::vector<int> every(static_cast<std::size_t>(group.size()));
    group.allgather(std::span<const int>(failures), std::span<int>(every));  // also: every rank has mapped
    shm_unlink(name.c_str());
    if (std::ranges::any_of(every, [](int e) { return e != 0; })) return give_up();
    bytes_ = bytes;
    return bases_;
  }

 private:
  std::span<std::byte* const> give_up() {
    unusable_ = true;
    mappings_.clear();
    bases_.clear();
    own_ = shared_mapping(nullptr, 0);
    return {};
  }

  struct entry {
    char name[48];
    int error;  // errno of making this rank's segment, or 0
  };

  int create(const std::string& name, std::size_t bytes) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return errno;
    // Reserved now, so that a full /dev/shm is an error here, not a SIGBUS at first touch.
    int error = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : errno;
    void* base = error == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (error == 0 && base == MAP_FAILED) error = errno;
    close(fd);
    if (error != 0) {
      shm_unlink(name.c_str());
      return error;
    }
    own_ = shared_mapping(base, bytes);
    return 0;
  }

  int open_and_map(const char* name, std::size_t bytes) {
    const int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0) return errno;
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int error = base == MAP_FAILED ? errno : 0;
    close(fd);
    if (error == 0) mappings_.emplace_back(base, bytes);
    return error;
  }

  // Tells apart the segments of one process.
  static std::uint64_t segment_number() {
    static std::atomic<std::uint64_t> next{0};
    return next++;
  }

  shared_mapping own_{nullptr, 0};
  std::vector<shared_mapping> mappings_;  // the other ranks' segments
  std::vector<std::byte*> bases_;         // every rank's segment, this rank's own included
  std::size_t bytes_ = 0;
  bool unusable_ = false;
};

/// Reads of the memory of the other processes of a group on one machine (PeerReads), by
/// process_vm_readv: the kernel copies from the other's pages straight into this process's,
/// and the other process does nothing. Usable once every rank has read a known word of
/// every other's memory; where the group spans machines, or the kernel refuses (ptrace
/// rules), it is not, and the caller sends messages.
class process_reads {
 public:
  template <class Group>
  bool ready(Group& group) {
    if (state_ != unknown) return state_ == usable;
    state_ = unusable;
    const entry mine{getpid(), reinterpret_cast<std::uintptr_t>(&probe_word)};
    std::vector<entry> all(static_cast<std::size_t>(group.size()));
    group.allgather(std::span<const entry>(&mine, 1), std::span<entry>(all));
    int readable = group.spans_machines() ? 0 : 1;
    for (int r = 0; r < group.size() && readable; ++r) {
      if (r == group.rank()) continue;
      std::uint64_t word = 0;
      iovec into{&word, sizeof word};
      iovec from{reinterpret_cast<void*>(all[static_cast<std::size_t>(r)].probe), sizeof word};
      readable = process_vm_readv(all[static_cast<std::size_t>(r)].pid, &into, 1, &from, 1, 0) ==
                         static_cast<ssize_t>(sizeof word) &&
                     word == probe_word;
    }
    std::vector<int> every(static_cast<std::size_t>(group.size()));
    group.allgather(std::span<const int>(&readable, 1), std::span<int>(every));
    if (std::ranges::any_of(every, [](int ok) { return ok == 0; })) return false;
    for (const entry& e : all) pids_.push_back(e.pid);
    state_ = usable;
    return true;
  }

  /// Copies `from` of rank `rank`'s memory into `into`; throws comm_error where the kernel
  /// cannot (the process has exited).
  void read(int rank, std::span<const peer_range> from, std::span<std::byte> into) const {
    constexpr std::size_t most = 512;  // ranges per call, under the kernel's IOV_MAX
    std::size_t at = 0;
    for (std::size_t first = 0; first < from.size(); first += most) {
      iovec remote[most];
      std::size_t bytes = 0, count = std::min(most, from.size() - first);
      for (std::size_t k = 0; k < count; ++k) {
        remote[k] = {reinterpret_cast<void*>(from[first + k].address), from[first + k].bytes};
        bytes += from[first + k].bytes;
      }
      if (at + bytes > into.size())
        throw usage_error(
            fmt::format("internal: {} bytes of rank {}'s memory read into {}", at + bytes, rank, into.size()));
      iovec local{into.data() + at, bytes};
      const ssize_t got = process_vm_readv(pids_[static_cast<std::size_t>(rank)], &local, 1, remote, count, 0);
      if (got != static_cast<ssize_t>(bytes))
        throw comm_error(fmt::format("could not read {} bytes of rank {}'s memory (process {}): {}", bytes, rank,
                                     pids_[static_cast<std::size_t>(rank)],
                                     got < 0 ? std::strerror(errno) : "it read fewer"));
      at += bytes;
    }
  }

  /// Where `address` of rank `rank`'s node memory `region` lies mapped here, read-only; the
  /// region is mapped on first sight (its file duplicated from the owner by pidfd_getfd,
  /// which asks what process_vm_readv does of the kernel). nullptr where it is not node
  /// memory or cannot be mapped: read it instead. Up to 64 regions stay mapped, the least
  /// recently seen unmapped first: until then a region its owner has freed holds its pages.
  const std::byte* view(int rank, const shared_region& region, std::uintptr_t address) {
    if (region.id == 0 || state_ != usable) return nullptr;  // no views before ready() says reads are allowed
    const std::lock_guard lock(mapping_);  // copies of a communicator share this
    if (refused_) return nullptr;
    ++uses_;
    for (mapped_region& m : mapped_)
      if (m.rank == rank && m.id == region.id) {
        m.last_use = uses_;
        return m.at + (address - region.begin);
      }
    const std::byte* at = map(rank, region);
    if (at == nullptr) return nullptr;
    if (mapped_.size() == most_mapped) {  // the least recently used goes: its owner may have freed it
      auto oldest = std::ranges::min_element(mapped_, {}, &mapped_region::last_use);
      ::munmap(const_cast<std::byte*>(oldest->at), oldest->bytes);
      mapped_.erase(oldest);
    }
    mapped_.push_back({rank, region.id, at, region.bytes, uses_});
    return at + (address - region.begin);
  }

  process_reads() = default;
  process_reads(const process_reads&) = delete;
  process_reads& operator=(const process_reads&) = delete;
  ~process_reads() {
    for (const mapped_region& m : mapped_) ::munmap(const_cast<std::byte*>(m.at), m.bytes);
    for (const int fd : pidfds_)
      if (fd >= 0) ::close(fd);
  }

 private:
  struct mapped_region {
    int rank;
    std::uint64_t id;
    const std::byte* at;
    std::size_t bytes;
    std::uint64_t last_use;
  };
  static constexpr std::size_t most_mapped = 64;

  /// Maps `region` of rank `rank` read-only; nullptr, and no further tries, where the kernel
  /// refuses (no pidfd_getfd before Linux 5.6, or a sandbox that forbids it).
  const std::byte* map(int rank, const shared_region& region) {
    if (pidfds_.empty()) pidfds_.assign(pids_.size(), -1);
    int& pidfd = pidfds_[static_cast<std::size_t>(rank)];
    if (pidfd < 0) pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pids_[static_cast<std::size_t>(rank)], 0));
    const int fd =
        pidfd < 0 ? -1 : static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, static_cast<int>(region.handle), 0));
    void* at = fd < 0 ? MAP_FAILED : ::mmap(nullptr, region.bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (fd >= 0) ::close(fd);
    if (at == MAP_FAILED) {
      refused_ = true;
      return nullptr;
    }
    return static_cast<const std::byte*>(at);
  }

  enum { unknown, usable, unusable } state_ = unknown;
  struct entry {
    pid_t pid;
    std::uintptr_t probe;  // where this process keeps probe_word
  };
  static constexpr std::uint64_t probe_word = 0x7374726174612121;  // "strata!!", at an address the others read
  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;  // per rank, opened on the first view of its memory
  std::vector<mapped_region> mapped_;
  std::mutex mapping_;
  std::uint64_t uses_ = 0;
  bool refused_ = false;
};

}  // namespace strata
