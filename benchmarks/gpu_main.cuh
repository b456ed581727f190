#pragma once
// The main() of a GPU benchmark: skipped (STRATA_GPU_SKIP_CODE) without a GPU, an error
// reported with the program's name.
#include <cstdio>
#include <exception>

#include "strata/cuda/device.cuh"

namespace bench {

template <class Body>
int gpu_main(const char* program, Body&& body) {
  try {
    if (!strata::cuda::device_available()) {
      std::puts("no CUDA device: skipped");
      return STRATA_GPU_SKIP_CODE;
    }
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  return 0;
}

}  // namespace bench
