#pragma once
// Where a variable's buffers live is part of its type: a declaration over host memory can
// only reach the host synchronizers, one over GPU memory only the nccl executor or a stage
// of GPU memory (the staged executor), and a mix-up is a compile error naming the rule
// (MemorySpace). In a variable's declaration std::span means host memory and GPU memory is a
// device_span. (Below the declarations, the kernels and the nccl communicator take std::span
// over the memory their own documentation names.) Plain C++.
#include <cstddef>
#include <type_traits>

#include "strata/numeric/float16.hpp"

namespace strata {

/// Memory the CPU reads: what std::span and std::vector hold.
struct host_memory {};
/// Memory of a GPU: the host must not dereference it.
struct device_memory {};

/// The element types of device variables: fp32, fp16, bf16.
template <class T>
concept DeviceElement = std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// A span of GPU memory: a pointer the host must not dereference, and its length. A type of
/// its own, so that device memory cannot be passed where host memory is read.
template <class T>
class device_span {
 public:
  constexpr device_span() = default;
  constexpr device_span(T* data, std::size_t size) : data_(data), size_(size) {}
  /// A span of const elements from one of mutable ones.
  template <class U>
    requires std::is_same_v<T, const U>
  constexpr device_span(device_span<U> other) : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr std::size_t size_bytes() const { return size_ * sizeof(T); }
  constexpr bool empty() const { return size_ == 0; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace strata
