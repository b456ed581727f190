#pragma once
// Device memory owned by an object. Allocation and release are ordered on a stream and
// come from the device's memory pool, cheap once warm: launchers that need scratch space
// (sorting, run finding) take it per call instead of asking the caller to manage it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>

#include "strata/cuda/check.cuh"
#include "strata/model/memory.hpp"

namespace strata::cuda {

/// `size` elements of T in device memory, usable on `stream` (or after synchronizing with
/// it) and released on it.
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(std::size_t size, cudaStream_t stream) : size_(size), stream_(stream) {
    if (size != 0) STRATA_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&data_), size * sizeof(T), stream));
  }
  device_buffer(device_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), stream_(other.stream_) {}
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  ~device_buffer() { release(); }

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<T> span() const { return {data_, size_}; }
  /// The buffer as GPU memory, for binding variables (device_variable, a staged variable).
  device_span<T> memory() const { return {data_, size_}; }

 private:
  void release() noexcept {
    // A destructor cannot throw; a free fails only in a context that is already broken,
    // and the next checked call reports that.
    if (data_) static_cast<void>(cudaFreeAsync(data_, stream_));
    data_ = nullptr;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
};

namespace detail {

/// CUB's two-call protocol: `steps(scratch, capacity)` runs CUB algorithms sharing one
/// scratch buffer and returns the bytes they need; without scratch space (the first call)
/// they only say how much.
template <class Steps>
void with_cub_scratch(cudaStream_t stream, Steps&& steps) {
  const std::size_t bytes = std::max<std::size_t>(steps(nullptr, 0), 1);  // a null buffer would mean "only say"
  device_buffer<std::byte> scratch(bytes, stream);
  steps(scratch.data(), bytes);
}

}  // namespace detail

}  // namespace strata::cuda
