// One step of the nccl executor on one rank against two baselines of the same bytes, in
// the same run, interleaved (A B A B ...), medians over rounds: a raw ncclAllReduce, and the
// fused SGD kernel over every variable (the update a step cannot skip). The step packs every
// bucket, all-reduces it, averages and runs the fused SGD kernel. On one rank NCCL's
// in-place all-reduce does no work (it costs a launch), so there step_vs_update is the
// executor's cost (packing, averaging, bookkeeping) over the update alone; across ranks
// step_vs_allreduce is its cost over the collective. The raw all-reduce goes through the
// same communicator (nccl::communicator::iallreduce_sum: ncclAllReduce, and polling until
// the non-blocking communicator has enqueued it).
//
//   nccl_step [--quick] [--mib N] [--variables K]   N MiB of fp32 gradients in K variables
//                                                   (default 256 MiB in 16)
//
// Exits with STRATA_GPU_SKIP_CODE when there is no GPU.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_main.cuh"
#include "measure.hpp"
#include "strata/cuda/buffer.cuh"
#include "strata/cuda/optimizer.cuh"
#include "strata/exec/nccl_executor.cuh"

namespace {

using strata::cuda::device_buffer;

struct options {
  std::size_t mib = 256, variables = 16;
  int rounds = 15, calls = 10;
};

options parse(int argc, char** argv) {
  options o;
  auto number = [&](int& i) { return std::strtoull(argv[++i], nullptr, 10); };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") o = {.mib = 8, .variables = 8, .rounds = 3, .calls = 2};
    else if (arg == "--mib" && i + 1 < argc) o.mib = number(i);
    else if (arg == "--variables" && i + 1 < argc) o.variables = number(i);
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--mib N] [--variables K]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

void run(const options& o) {
  using Dense = strata::Strategy<strata::Replicate, strata::AllReduce<strata::Native>>;
  const std::size_t each = o.mib * (std::size_t{1} << 20) / sizeof(float) / o.variables;
  std::vector<device_buffer<float>> buffers;
  std::vector<strata::device_variable_binding> variables;
  for (std::size_t k = 0; k < o.variables; ++k) {
    buffers.emplace_back(each, nullptr);
    buffers.emplace_back(each, nullptr);
    STRATA_CUDA_CHECK(cudaMemsetAsync(buffers[2 * k].data(), 0, each * sizeof(float), nullptr));
    STRATA_CUDA_CHECK(cudaMemsetAsync(buffers[2 * k + 1].data(), 0, each * sizeof(float), nullptr));
    variables.push_back(strata::device_variable<Dense>("layer" + std::to_string(k), buffers[2 * k].memory(),
                                                       buffers[2 * k + 1].memory(), {each}));
  }
  device_buffer<float> raw(each * o.variables, nullptr);
  STRATA_CUDA_CHECK(cudaDeviceSynchronize());

  auto exec = strata::make_executor(strata::nccl::communicator::single_process(0), variables, strata::optim::sgd{.lr = 0.0f},
                                   {.buckets = {}, .initialized_on = cudaStreamLegacy});
  strata::nccl::communicator& comm = exec.communicator();
  std::vector<bench::contender> contenders = {
      {"ncclAllReduce", [&] { comm.iallreduce_sum(raw.span()); }},  // what the executor calls per bucket
      {"executor_step", [&] {
         exec.parameters_ready(comm.stream());
         exec.step(comm.stream());
       }},
      {"sgd_update", [&] {
         for (std::size_t k = 0; k < o.variables; ++k)
           strata::cuda::sgd_update(buffers[2 * k].span(), buffers[2 * k + 1].span(), {}, {0.0f, 0.0f, 0.0f, false}, comm.stream());
       }},
  };
  bench::interleave(contenders, o.rounds, o.calls, [&] { STRATA_CUDA_CHECK(cudaStreamSynchronize(comm.stream())); });
  exec.wait();

  cudaDeviceProp device{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&device, comm.device()));
  const double raw_us = 1e6 * bench::median(contenders[0].seconds), step_us = 1e6 * bench::median(contenders[1].seconds),
               update_us = 1e6 * bench::median(contenders[2].seconds);
  std::printf("%s: %zu MiB of fp32 gradients in %zu variables, 1 rank; medians of %d rounds of %d calls\n", device.name,
              o.mib, o.variables, o.rounds, o.calls);
  for (const bench::contender& c : contenders) std::printf("%-14s %10.1f us\n", c.name.c_str(), 1e6 * bench::median(c.seconds));
  std::printf("summary: mib=%zu variables=%zu allreduce_us=%.1f update_us=%.1f step_us=%.1f step_vs_update=%.3f "
              "step_vs_allreduce=%.3f\n",
              o.mib, o.variables, raw_us, update_us, step_us, step_us / update_us, step_us / raw_us);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  return bench::gpu_main("nccl_step", [&] {
    STRATA_CUDA_CHECK(cudaSetDevice(0));
    run(o);
  });
}
