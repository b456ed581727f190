#pragma once
// Host memory that the other ranks of a machine may map into their own address space: each
// allocation is a memory file (memfd) mapped shared, which a rank that may read this
// process's memory (PeerReads) duplicates (pidfd_getfd) and maps read-only. A hierarchical
// all-reduce over such buffers then adds a partner's values and copies its finished sums by
// plain loads from the partner's pages, where cross-memory attach copies each chunk through
// the kernel, which pins the partner's pages one by one, into a scratch buffer first (a
// chunk summed 1.9x and copied 1.6x faster on an AMD EPYC). MPI's MPI_Win_allocate_shared
// and NCCL's ncclMemAlloc offer the same bargain: allocate through the library, and ranks
// on one machine reach the memory directly.
//
// Its pages are shared memory, which lies on huge pages only where the kernel gives them to
// shared memory (/sys/kernel/mm/transparent_hugepage/shmem_enabled: always, within_size or
// advise). On 4 KiB pages a buffer of 4-64 MiB moved through a ring on one machine at half
// the speed of one on huge pages (the TLB's misses), so where shared memory may not take
// huge pages, an allocation of a huge page or more is host_vector's memory instead: read by
// the others, not seen (node_region_of says so). Each shared allocation keeps a file
// descriptor open while it lives.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/model/huge_pages.hpp"

namespace strata {

namespace detail {

/// Every live node-memory allocation of this process, by first address.
class node_regions {
 public:
  static node_regions& instance() {
    static node_regions regions;
    return regions;
  }

  void* allocate(std::size_t bytes) {
    if (bytes >= huge_page_bytes && !shared_huge_pages()) return map_huge_aligned(bytes);
    const std::size_t unit =
        bytes >= huge_page_bytes ? huge_page_bytes : static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t length = (bytes + unit - 1) / unit * unit;
    const int fd = ::memfd_create("strata-node-memory", MFD_CLOEXEC);
    if (fd < 0) throw std::bad_alloc();
    void* p = ::ftruncate(fd, static_cast<off_t>(length)) == 0
                  ? ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
      ::close(fd);
      throw std::bad_alloc();
    }
#ifdef MADV_HUGEPAGE
    ::madvise(p, length, MADV_HUGEPAGE);  // advice: honoured where shared memory may take huge pages
#endif
    const std::lock_guard lock(mutex_);
    regions_[reinterpret_cast<std::uintptr_t>(p)] = {next_id_++, fd, reinterpret_cast<std::uintptr_t>(p), length};
    return p;
  }

  void free(void* p, std::size_t bytes) noexcept {
    shared_region region{};
    {
      const std::lock_guard lock(mutex_);
      const auto it = regions_.find(reinterpret_cast<std::uintptr_t>(p));
      if (it == regions_.end()) {  // host_vector's memory (see above)
        ::munmap(p, whole_pages(bytes));
        return;
      }
      region = it->second;
      regions_.erase(it);
    }
    ::munmap(p, region.bytes);
    ::close(static_cast<int>(region.handle));
  }

  /// The allocation that holds `address`, or a region with id 0.
  shared_region find(std::uintptr_t address) const {
    const std::lock_guard lock(mutex_);
    auto it = regions_.upper_bound(address);
    if (it == regions_.begin()) return {};
    const shared_region& region = std::prev(it)->second;
    return address < region.begin + region.bytes ? region : shared_region{};
  }

 private:
  /// Whether the kernel may put shared memory on huge pages where advised.
  static bool shared_huge_pages() {
    static const bool allowed = [] {
      std::ifstream file("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
      std::string modes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
      return modes.find("[always]") != std::string::npos || modes.find("[within_size]") != std::string::npos ||
             modes.find("[advise]") != std::string::npos || modes.find("[force]") != std::string::npos;
    }();
    return allowed;
  }

  mutable std::mutex mutex_;
  std::map<std::uintptr_t, shared_region> regions_;
  std::uint64_t next_id_ = 1;  // never reused: a partner's mapping of a freed allocation is never taken for a new one
};

}  // namespace detail

/// A standard allocator of node memory (see above).
template <class T>
struct node_memory_allocator {
  using value_type = T;

  node_memory_allocator() = default;
  template <class U>
  node_memory_allocator(const node_memory_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::node_regions::instance().allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::node_regions::instance().free(p, n * sizeof(T)); }

  template <class U>
  bool operator==(const node_memory_allocator<U>&) const noexcept {
    return true;
  }
};

/// A vector in node memory: for gradients that a hierarchical all-reduce sums within a
/// machine by loads from each other's pages.
template <class T>
using node_vector = std::vector<T, node_memory_allocator<T>>;

/// Where `address` lies in node memory of this process (id 0: it does not).
inline shared_region node_region_of(const void* address) {
  return detail::node_regions::instance().find(reinterpret_cast<std::uintptr_t>(address));
}

}  // namespace strata
