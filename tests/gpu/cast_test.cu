// Scaled casts: the device rounds exactly as the host, for normal, subnormal, overflowing and
// special values, on aligned buffers (vector path) and offset views (element path).
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "strata/cuda/cast.cuh"

namespace gpu_test {

namespace {

std::vector<float> awkward_values(std::size_t n) {
  std::mt19937 engine(7);
  std::uniform_real_distribution<float> exponent(-30.0f, 20.0f);
  std::vector<float> values(n);
  for (float& x : values) x = std::exp2(exponent(engine)) * (engine() % 2 ? 1.0f : -1.0f);
  const float specials[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 1e-8f, 6e-8f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 3e5f};
  for (std::size_t i = 0; i < std::size(specials); ++i) values[i * 97] = specials[i];
  return values;
}

std::vector<float> as_floats(const auto& narrow) {
  std::vector<float> out;
  for (const auto& w : narrow) out.push_back(static_cast<float>(w));
  return out;
}

template <class W>
void check_type(const char* type) {
  const std::size_t n = (1u << 20) + 5;  // a tail after the last whole fragment
  const float scale = 0.25f;
  const std::vector<float> values = awkward_values(n);
  const auto device_values = to_device(values);
  for (std::size_t offset : {0, 1}) {  // 1: a view no fragment is aligned to
    const std::string what = std::string(type) + " at offset " + std::to_string(offset);
    const std::span<const float> in = std::span<const float>(device_values.span()).subspan(offset);
    strata::cuda::device_buffer<W> narrow(in.size(), nullptr);
    strata::cuda::scaled_narrow<W>(in, narrow.span(), scale, nullptr);
    std::vector<W> host_narrow(in.size());
    strata::kernels::scaled_narrow<W>(std::span<const float>(values).subspan(offset), host_narrow, scale);
    const auto device_narrow = to_host(narrow);
    expect_equal<float>(as_floats(device_narrow), as_floats(host_narrow), "scaled_narrow to " + what);

    strata::cuda::device_buffer<float> wide(in.size(), nullptr);
    strata::cuda::scaled_widen<W>(narrow.span(), wide.span(), 1.0f / scale, nullptr);
    std::vector<float> host_wide(in.size());
    strata::kernels::scaled_widen<W>(host_narrow, host_wide, 1.0f / scale);
    expect_equal<float>(to_host(wide), host_wide, "scaled_widen from " + what);

    strata::cuda::accumulate<W>(narrow.span(), wide.span(), nullptr);  // wide += narrow
    strata::kernels::accumulate<W>(host_narrow, host_wide);
    expect_equal<float>(to_host(wide), host_wide, "accumulate of " + what);
  }
}

}  // namespace

void cast() {
  check_type<strata::half>("half");
  check_type<strata::bfloat16>("bfloat16");
}

}  // namespace gpu_test
