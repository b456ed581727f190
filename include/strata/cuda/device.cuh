#pragma once
// Whether this process has a GPU to run on.
#include <cuda_runtime_api.h>

#include "strata/cuda/check.cuh"

namespace strata::cuda {

/// The CUDA devices this process can use. No device, or no driver (a build machine), is
/// zero rather than an error; any other failure throws cuda_error.
inline int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary) {
    static_cast<void>(cudaGetLastError());  // the answer is taken; do not leave it to the next call
    return 0;
  }
  STRATA_CUDA_CHECK(status);
  return count;
}

/// True when at least one CUDA device can be used.
inline bool device_available() { return device_count() > 0; }

}  // namespace strata::cuda
