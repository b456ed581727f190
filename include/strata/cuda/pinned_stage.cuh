#pragma once
// The stage of device variables trained by the host executor (exec/staged_executor.hpp):
// their buffers are device memory of the current GPU, mirrored in pinned host memory so
// that the copies are asynchronous DMA on one stream, the user's compute stream. A
// gradient copied after backward was enqueued waits for backward; a forward enqueued after
// a parameter copy reads the new values; wait() is the one place the host blocks.
// Host code that needs only the CUDA runtime, so either compiler may include it.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/cuda/check.cuh"
#include "strata/cuda/device.cuh"
#include "strata/model/memory.hpp"

namespace strata::cuda {

class pinned_stage {
 public:
  using memory_space = device_memory;
  using span = device_span<float>;

  /// Copies on `stream`, for device memory of the GPU current when it is constructed.
  explicit pinned_stage(cudaStream_t stream) : stream_(stream) { STRATA_CUDA_CHECK(cudaGetDevice(&device_)); }

  /// `n` floats of pinned host memory, released with the stage.
  std::span<float> host_buffer(std::size_t n) {
    std::unique_ptr<float, release>& slot = buffers_.emplace_back();  // first: a full vector cannot leak the block
    void* data = nullptr;
    if (n != 0) STRATA_CUDA_CHECK(cudaMallocHost(&data, n * sizeof(float)));
    slot.reset(static_cast<float*>(data));
    return {slot.get(), n};
  }

  /// Throws binding_error, naming the variable, unless `memory` is memory of this
  /// stage's GPU.
  void check(std::string_view variable, span memory, std::string_view what) const {
    require_device_memory(memory.data(), memory.size_bytes(), device_,
                          "staged variable \"" + std::string(variable) + "\": the " + std::string(what));
  }

  void to_host(span device, std::span<float> host) {
    copy(device.data(), device.size_bytes(), host.data(), cudaMemcpyDeviceToHost);
  }
  void to_device(std::span<const float> host, span device) {
    copy(host.data(), host.size_bytes(), device.data(), cudaMemcpyHostToDevice);
  }

  /// Blocks until every copy enqueued so far, and the work before them on the stream, is done.
  void wait() { STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  cudaStream_t stream() const { return stream_; }

 private:
  void copy(const float* from, std::size_t bytes, float* to, cudaMemcpyKind kind) {
    if (bytes != 0) STRATA_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, stream_));
  }

  struct release {
    void operator()(float* data) const noexcept { static_cast<void>(cudaFreeHost(data)); }
  };

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  std::vector<std::unique_ptr<float, release>> buffers_;
};

}  // namespace strata::cuda
