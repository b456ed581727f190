// Bucket packing: the device bucket equals the host's, and unpacking restores every buffer,
// with aligned buffers (vector path) and sizes that misalign later offsets (element path).
#include <numeric>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "strata/cuda/pack.cuh"

namespace gpu_test {

namespace {

void check_sizes(const std::vector<std::size_t>& sizes, const std::string& what) {
  std::vector<std::vector<float>> host(sizes.size());
  std::vector<strata::cuda::device_buffer<float>> device;
  std::vector<std::span<float>> host_spans, device_spans;
  float next = 1.0f;
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    host[b].resize(sizes[b]);
    for (float& x : host[b]) x = next++;
    device.push_back(to_device(host[b]));
    host_spans.push_back(host[b]);
    device_spans.push_back(device.back().span());
  }
  const strata::cuda::bucket_packer<float> packer(std::span<const std::span<float>>(device_spans), nullptr);
  const auto layout = strata::kernels::bucket_parts<float>(host_spans);
  std::vector<float> host_bucket(packer.size());
  strata::kernels::pack<float>(layout, host_bucket);
  strata::cuda::device_buffer<float> bucket(packer.size(), nullptr);
  packer.pack(bucket.span(), nullptr);
  expect_equal<float>(to_host(bucket), host_bucket, what + ": packed bucket");

  for (auto& d : device) STRATA_CUDA_CHECK(cudaMemsetAsync(d.data(), 0, d.size() * sizeof(float), nullptr));
  packer.unpack(bucket.span(), nullptr);
  for (std::size_t b = 0; b < sizes.size(); ++b)
    expect_equal<float>(to_host(device[b]), host[b], what + ": buffer " + std::to_string(b) + " unpacked");
}

}  // namespace

void pack() {
  check_sizes({1024, 4096, 4, 0, 65536, 8}, "aligned buffers");
  check_sizes({5, 1024, 3, 4099, 0, 17, 100003}, "odd sizes");
}

}  // namespace gpu_test
