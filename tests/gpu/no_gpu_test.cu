// What counts as "no GPU" (a skip) and what is an error (a failure): runs on the CPU.
#include <cstdio>

#include "strata/cuda/device.cuh"

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  using strata::cuda::means_no_gpu;
  expect(means_no_gpu(cudaErrorNoDevice, 13000), "no device is no GPU");
  expect(means_no_gpu(cudaErrorInsufficientDriver, 0), "no driver installed is no GPU");
  expect(means_no_gpu(cudaErrorStubLibrary, 0), "the driver's stub library is no GPU");
  expect(!means_no_gpu(cudaErrorInsufficientDriver, 12040), "a driver older than the runtime is an error, not a skip");
  expect(!means_no_gpu(cudaErrorInitializationError, 13000), "a failed initialization is an error, not a skip");
  // Here: whatever this machine has, device_count() either counts or explains.
  try {
    std::printf("devices here: %d\n", strata::cuda::device_count());
  } catch (const strata::cuda_error& e) {
    std::printf("device_count() refused this machine: %s\n", e.what());
  }
  std::printf("%d failed\n", failures);
  return failures == 0 ? 0 : 1;
}
