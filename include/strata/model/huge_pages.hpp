#pragma once
// Host memory on huge pages, for the buffers that synchronization moves. Within a machine
// MPI moves a large message as one copy out of the sender's pages (cross-memory attach),
// and the kernel pins and looks up the sender's pages one by one: on 4 KiB pages that costs
// as much as the copy (a 64 MiB ring all-reduce on 2 ranks: 13.3 ms on 4 KiB pages, 6.9 ms
// on 2 MiB pages). Random rows of a large table (a parameter server's shard) also miss the
// TLB far less. An allocation of at least one huge page is mapped on its own, aligned to a
// huge page and advised as huge-page memory (Linux's transparent huge pages, in `madvise`
// or `always` mode); smaller ones, and systems without the advice, get ordinary memory.
// Under the kernel's default `defrag` setting a first touch may compact memory to find a
// huge page: allocate such buffers once and keep them, as parameters and gradients are.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace strata {

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

namespace detail {

inline std::size_t whole_pages(std::size_t bytes) {
  static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

/// `bytes` of zeroed memory starting on a huge page: a mapping one huge page larger, its
/// unaligned head and unused tail given back.
inline void* map_huge_aligned(std::size_t bytes) {
  const std::size_t length = whole_pages(bytes), mapped = length + huge_page_bytes;
  void* raw = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
  if (aligned > start) ::munmap(raw, aligned - start);
  if (const std::uintptr_t end = start + mapped; end > aligned + length)
    ::munmap(reinterpret_cast<void*>(aligned + length), end - (aligned + length));
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // advice: where refused, 4 KiB pages
#endif
  return reinterpret_cast<void*>(aligned);
}

}  // namespace detail

/// A standard allocator that puts allocations of a huge page or more on huge pages.
template <class T>
struct huge_page_allocator {
  using value_type = T;

  huge_page_allocator() = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    if (n * sizeof(T) < huge_page_bytes) return std::allocator<T>{}.allocate(n);
    return static_cast<T*>(detail::map_huge_aligned(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < huge_page_bytes) return std::allocator<T>{}.deallocate(p, n);
    ::munmap(p, detail::whole_pages(n * sizeof(T)));
  }

  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;  // stateless: any one frees what another allocated
  }
};

/// A vector whose storage, from one huge page up, lies on huge pages: for parameters,
/// gradients and tables that are synchronized.
template <class T>
using host_vector = std::vector<T, huge_page_allocator<T>>;

/// A huge_page_allocator that leaves what a vector adds uninitialized (resize() writes
/// nothing), for buffers whose every byte is written before it is read: a reused message
/// buffer resized from a small message to a 1 MB one was zeroed whole first, a pass over
/// the bytes as long as the copy that sends them.
template <class T>
struct uninitialized_allocator : huge_page_allocator<T> {
  uninitialized_allocator() = default;
  template <class U>
  uninitialized_allocator(const uninitialized_allocator<U>&) noexcept {}

  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;  // default-initialized: no bytes written for std::byte
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    std::construct_at(p, std::forward<Args>(args)...);
  }
};

/// The bytes of a message: resized without being written.
using message_bytes = std::vector<std::byte, uninitialized_allocator<std::byte>>;

/// Sizes a reused message buffer to `bytes`, writing nothing. A buffer of a quarter huge page
/// or more takes whole huge pages when it grows: within a machine the receiver copies straight
/// out of it, pinning its pages one by one.
inline void resize_message(message_bytes& buffer, std::size_t bytes) {
  if (bytes > buffer.capacity() && bytes >= huge_page_bytes / 4)
    buffer.reserve((bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes);
  buffer.resize(bytes);
}

}  // namespace strata
