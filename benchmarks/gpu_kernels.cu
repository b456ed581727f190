// Achieved memory bandwidth of strata's element-wise GPU kernels (scaled casts, fused SGD and
// Adam, bucket pack/unpack) against a device-to-device cudaMemcpy of the same size, timed in
// the same run, interleaved (copy A B C ... copy A B C ...), medians over rounds. Bandwidth
// counts every byte a kernel must read and write once. Target: each kernel at >= 85% of the
// copy's bandwidth.
//
//   gpu_kernels [--quick] [--mib N]     N MiB of floats per array (default 256)
//
// Exits with STRATA_GPU_SKIP_CODE when there is no GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_main.cuh"
#include "measure.hpp"
#include "strata/cuda/buffer.cuh"
#include "strata/cuda/cast.cuh"
#include "strata/cuda/optimizer.cuh"
#include "strata/cuda/pack.cuh"

namespace {

using strata::cuda::device_buffer;

struct options {
  std::size_t mib = 256;
  int rounds = 15, calls = 10;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      o.mib = 16;
      o.rounds = 3;
      o.calls = 2;
    } else if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
      o.mib = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--mib N]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

device_buffer<float> filled(std::size_t n, float value, cudaStream_t stream) {
  device_buffer<float> b(n, stream);
  const std::vector<float> host(n, value);
  STRATA_CUDA_CHECK(cudaMemcpyAsync(b.data(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return b;
}

void run(const options& o, cudaStream_t stream) {
  const std::size_t n = o.mib * (std::size_t{1} << 20) / sizeof(float);
  auto a = filled(n, 0.5f, stream), b = filled(n, 0.25f, stream), c = filled(n, 0.0f, stream), d = filled(n, 0.0f, stream);
  device_buffer<strata::half> narrow(n, stream);

  // A bucket of 64 gradients of equal size, as fusion buckets of one layer type are.
  constexpr std::size_t parts = 64;
  std::vector<std::span<float>> pieces;
  for (std::size_t i = 0; i < parts; ++i) pieces.push_back(a.span().subspan(i * (n / parts), n / parts));
  const strata::cuda::bucket_packer<float> packer(std::span<const std::span<float>>(pieces), stream);
  const std::span<float> bucket = b.span().first(packer.size());

  const strata::optim::sgd_element sgd{0.01f, 0.9f, 1e-4f, false};
  const strata::optim::adam_element adam = strata::optim::adam{}.element(10);
  const double f = sizeof(float), h = sizeof(strata::half);
  std::vector<bench::contender> contenders = {
      {"copy", [&] { STRATA_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, stream)); }},
      {"narrow_half", [&] { strata::cuda::scaled_narrow<strata::half>(a.span(), narrow.span(), 0.5f, stream); }},
      {"widen_half", [&] { strata::cuda::scaled_widen<strata::half>(narrow.span(), c.span(), 2.0f, stream); }},
      {"sgd", [&] { strata::cuda::sgd_update(a.span(), b.span(), c.span(), sgd, stream); }},
      {"adam", [&] { strata::cuda::adam_update(a.span(), b.span(), c.span(), d.span(), adam, stream); }},
      {"pack", [&] { packer.pack(bucket, stream); }},
      {"unpack", [&] { packer.unpack(bucket, stream); }},
  };
  // Bytes each must move per element: reads plus writes.
  const std::vector<double> bytes = {2 * f, f + h, h + f, 5 * f, 7 * f, 2 * f, 2 * f};
  bench::interleave(contenders, o.rounds, o.calls, [&] { STRATA_CUDA_CHECK(cudaStreamSynchronize(stream)); });

  cudaDeviceProp device{};
  int id = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&id));
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&device, id));
  std::printf("%s: %zu MiB of floats per array; medians of %d rounds of %d calls\n", device.name, o.mib, o.rounds, o.calls);
  std::printf("%-12s %10s %10s %8s\n", "kernel", "time_us", "GB/s", "vs_copy");
  std::vector<double> gbps;
  for (std::size_t i = 0; i < contenders.size(); ++i) {
    const double seconds = bench::median(contenders[i].seconds);
    gbps.push_back(bytes[i] * static_cast<double>(n) / seconds / 1e9);
    std::printf("%-12s %10.1f %10.1f %8.3f\n", contenders[i].name.c_str(), 1e6 * seconds, gbps[i], gbps[i] / gbps[0]);
  }
  std::string summary = "summary: copy_GBps=" + std::to_string(static_cast<int>(gbps[0]));
  double worst = 1e9;
  for (std::size_t i = 1; i < contenders.size(); ++i) {
    char field[64];
    std::snprintf(field, sizeof field, " %s=%.3f", contenders[i].name.c_str(), gbps[i] / gbps[0]);
    summary += field;
    worst = std::min(worst, gbps[i] / gbps[0]);
  }
  std::printf("%s min_vs_copy=%.3f target=0.85\n", summary.c_str(), worst);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  return bench::gpu_main("gpu_kernels", [&] {
    cudaStream_t stream = nullptr;
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    run(o, stream);  // frees its buffers on the stream before the stream goes
    STRATA_CUDA_CHECK(cudaStreamDestroy(stream));
  });
}
