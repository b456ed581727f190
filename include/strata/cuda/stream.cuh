#pragma once
// A CUDA stream owned by an object. Non-blocking: it does not wait for the legacy default
// stream, so work on it overlaps work on other streams unless ordered by events.
// Host code that needs only the CUDA runtime, so either compiler may include it.
#include <cuda_runtime_api.h>

#include "strata/cuda/check.cuh"

namespace strata::cuda {

class owned_stream {
 public:
  owned_stream() { STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~owned_stream() { static_cast<void>(cudaStreamDestroy(stream_)); }  // pending work still completes
  owned_stream(const owned_stream&) = delete;
  owned_stream& operator=(const owned_stream&) = delete;
  operator cudaStream_t() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace strata::cuda
