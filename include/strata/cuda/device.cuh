#pragma once
// Whether this process has a GPU to run on, and whether a buffer is memory of one.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "strata/cuda/check.cuh"

namespace strata::cuda {

/// Whether `status` of cudaGetDeviceCount means "this machine has no GPU": no device, or no
/// driver at all (a build machine: the runtime then reports an insufficient driver, and the
/// driver's version is 0). A driver that is installed but too old for the runtime is not
/// "no GPU": it is an error to fix, and GPU tests must fail on it, not skip.
inline bool means_no_gpu(cudaError_t status, int driver_version) {
  return status == cudaErrorNoDevice || status == cudaErrorStubLibrary ||
         (status == cudaErrorInsufficientDriver && driver_version == 0);
}

/// The CUDA devices this process can use. No device, or no driver (a build machine), is
/// zero rather than an error; any other failure, an outdated driver included, throws
/// cuda_error.
inline int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count;
  static_cast<void>(cudaGetLastError());  // the answer is taken; do not leave it to the next call
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (means_no_gpu(status, driver)) return 0;
  if (status == cudaErrorInsufficientDriver) {
    int runtime = 0;
    static_cast<void>(cudaRuntimeGetVersion(&runtime));
    throw cuda_error("the CUDA driver supports CUDA " + std::to_string(driver / 1000) + "." +
                     std::to_string(driver % 1000 / 10) + ", older than the CUDA " + std::to_string(runtime / 1000) + "." +
                     std::to_string(runtime % 1000 / 10) + " runtime strata was built with; update the driver");
  }
  STRATA_CUDA_CHECK(status);
  return count;
}

/// True when at least one CUDA device can be used.
inline bool device_available() { return device_count() > 0; }

/// Throws binding_error, starting with `what` (e.g. `variable "w" on rank 1: the gradient`),
/// unless the `bytes` at `data` are memory of CUDA device `device` (device or managed
/// memory). Pinned and pageable host memory are refused: kernels and NCCL would read it
/// across the bus, or not at all.
inline void require_device_memory(const void* data, std::size_t bytes, int device, const std::string& what) {
  if (bytes == 0) return;
  if (data == nullptr) throw binding_error(what + " pointer is null");
  cudaPointerAttributes attributes{};
  STRATA_CUDA_CHECK(cudaPointerGetAttributes(&attributes, data));
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw binding_error(what + " buffer is " + (attributes.type == cudaMemoryTypeHost ? "pinned " : "") +
                        "host memory; bind device memory of GPU " + std::to_string(device) + " (cudaMalloc)");
  if (attributes.device != device)
    throw binding_error(what + " buffer is memory of GPU " + std::to_string(attributes.device) + ", but it is used on GPU " +
                        std::to_string(device));
}

}  // namespace strata::cuda
