// The staged executor with cuda::pinned_stage: the staged cases of the CPU tests (the host
// executor's strategies through device memory, SSP's bound, checkpoints) on one loopback
// rank over device buffers, and the refusal of host memory where the stage expects the
// GPU's. Exits with STRATA_GPU_SKIP_CODE when there is no GPU.
//
// Host code (the host executor includes fmt, which nvcc does not compile): the C++
// compiler builds it against the CUDA runtime's host API.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "conformance/staged_cases.hpp"
#include "conformance/temporary_folder.hpp"
#include "strata/cuda/device.cuh"
#include "strata/cuda/pinned_stage.cuh"
#include "strata/cuda/stream.cuh"

using namespace strata;

namespace {

int failures = 0;

/// Runs one case; a failure is printed and counted, and the next case runs.
template <class F>
void run_case(const char* name, F&& f) {
  try {
    f();
    std::printf("passed: %s\n", name);
  } catch (const std::exception& e) {
    ++failures;
    std::printf("FAILED: %s: %s\n", name, e.what());
  }
}

struct device_free {
  void operator()(float* p) const { static_cast<void>(cudaFree(p)); }
};

/// Device memory for a case, owned by the source (the cases write every buffer before
/// reading it).
conformance::stage_memory<cuda::pinned_stage> gpu_buffers() {
  auto buffers = std::make_shared<std::deque<std::unique_ptr<float, device_free>>>();
  return [buffers](std::size_t n) -> device_span<float> {
    float* data = nullptr;
    STRATA_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float)));
    buffers->emplace_back(data);
    return {data, n};
  };
}

}  // namespace

int main() {
  try {
    if (!cuda::device_available()) {
      std::puts("staged_executor_tests: no GPU here; skipped");
      return STRATA_GPU_SKIP_CODE;
    }
    STRATA_CUDA_CHECK(cudaSetDevice(0));
    const strata::cuda::owned_stream stream;
    loopback::run(1, [&](loopback::context& ctx) {
      run_case("a staged executor trains as the host executor on host buffers", [&] {
        conformance::staged_equals_direct(ctx, cuda::pinned_stage(stream), gpu_buffers());
      });
      run_case("SSP through a stage reads within its bound and copies what it read", [&] {
        conformance::staged_ssp_reads_within_bound<1>(ctx, cuda::pinned_stage(stream), gpu_buffers(), 7, 12);
      });
      run_case("a staged checkpoint restores into the stage's memory", [&] {
        const conformance::temporary_folder folder;
        conformance::staged_checkpoint_restores_stage(ctx, cuda::pinned_stage(stream), gpu_buffers(), folder.path);
      });
      // A std::span is refused at compile time (compile_fail/memory_space_staged_mismatch.cpp);
      // host memory wrapped in a device_span is found by the stage's check.
      run_case("host memory declared as GPU memory for the pinned stage is refused, naming the variable", [&] {
        std::vector<float> w(4), gw(4);
        try {
          make_staged_executor(ctx, cuda::pinned_stage(stream), optim::sgd{}, {},
                               variable<Strategy<PS<1>, Consistency<ASP>>>("host.weight", device_span<float>(w.data(), 4),
                                                                           device_span<float>(gw.data(), 4), {4}));
        } catch (const binding_error& e) {
          const std::string message = e.what();
          for (const char* word : {"\"host.weight\"", "parameter", "host memory", "device memory of GPU 0"})
            conformance::expect(message.find(word) != std::string::npos, "\"{}\" missing from: {}", word, message);
          return;
        }
        conformance::expect(false, "a pageable host parameter was accepted");
      });
    });
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  std::printf("%s\n", failures == 0 ? "all staged executor GPU cases passed" : "some staged executor GPU cases FAILED");
  return failures == 0 ? 0 : 1;
}
