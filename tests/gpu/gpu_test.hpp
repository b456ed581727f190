#pragma once
// What the GPU tests share: moving data to and from the device, and comparisons that
// report every mismatch's position and both values.
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/cuda/buffer.cuh"
#include "strata/cuda/check.cuh"
#include "strata/cuda/device.cuh"

namespace gpu_test {

/// Mismatches found so far; the program fails when any were.
inline int failures = 0;

inline void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::printf("FAILED: %s\n", what.c_str());
}

/// A test program's main around `checks`: exit `skip_code` where there is no GPU; otherwise
/// `checks` on GPU 0, failing on an exception or on any failed check.
template <class F>
int main_on_gpu(int skip_code, F&& checks) {
  try {
    if (!strata::cuda::device_available()) {
      std::puts("no CUDA device: skipped");
      return skip_code;
    }
    STRATA_CUDA_CHECK(cudaSetDevice(0));
    checks();
  } catch (const std::exception& e) {
    std::printf("FAILED with an exception: %s\n", e.what());
    return 1;
  }
  std::printf("%s\n", failures == 0 ? "all passed" : "some checks FAILED");
  return failures == 0 ? 0 : 1;
}

/// Runs `f`, expecting it to throw an `E` whose message contains every one of `words`.
template <class E, class F>
void expect_throws(F f, std::initializer_list<std::string_view> words, const std::string& what) {
  try {
    f();
  } catch (const E& e) {
    const std::string_view message = e.what();
    for (std::string_view word : words)
      expect(message.find(word) != std::string_view::npos, what + ": \"" + std::string(word) + "\" missing from: " + e.what());
    return;
  } catch (const std::exception& e) {
    expect(false, what + ": threw another exception: " + e.what());
    return;
  }
  expect(false, what + ": did not throw");
}

template <class T>
strata::cuda::device_buffer<T> to_device(std::span<const T> host) {
  strata::cuda::device_buffer<T> device(host.size(), nullptr);
  STRATA_CUDA_CHECK(cudaMemcpyAsync(device.data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice, nullptr));
  return device;
}
template <class T>
strata::cuda::device_buffer<T> to_device(const std::vector<T>& host) {
  return to_device(std::span<const T>(host));
}

template <class T>
std::vector<T> to_host(std::span<const T> device) {
  std::vector<T> host(device.size());
  STRATA_CUDA_CHECK(cudaMemcpyAsync(host.data(), device.data(), device.size_bytes(), cudaMemcpyDeviceToHost, nullptr));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  return host;
}
template <class T>
std::vector<T> to_host(const strata::cuda::device_buffer<T>& device) {
  return to_host(std::span<const T>(device.span()));
}

/// Equal element by element (== on the elements; NaN only matches NaN).
template <class T>
void expect_equal(std::span<const T> device, std::span<const T> host, const std::string& what) {
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const bool both_nan = [&] {
      if constexpr (std::is_floating_point_v<T>) return std::isnan(device[i]) && std::isnan(host[i]);
      else return false;
    }();
    if (!(device[i] == host[i]) && !both_nan && wrong++ == 0) first = i;
  }
  expect(device.size() == host.size() && wrong == 0,
         what + ": " + std::to_string(wrong) + " of " + std::to_string(host.size()) + " differ, first at " +
             std::to_string(first));
}

/// Equal up to rounding: |device - host| <= tolerance * max(1, |host|).
inline void expect_near(std::span<const float> device, std::span<const float> host, float tolerance, const std::string& what) {
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < host.size(); ++i)
    if (!(std::abs(device[i] - host[i]) <= tolerance * std::max(1.0f, std::abs(host[i]))) && wrong++ == 0) first = i;
  expect(device.size() == host.size() && wrong == 0,
         what + ": " + std::to_string(wrong) + " of " + std::to_string(host.size()) + " differ by more than " +
             std::to_string(tolerance) + (wrong ? ", first at " + std::to_string(first) + ": device " +
                                                      std::to_string(device[first]) + ", host " + std::to_string(host[first])
                                                : std::string()));
}

// One per kernel family (the files of the same names).
void cast();
void optimizer();
void pack();
void sparse_rows();
void top_k();
void low_rank();

}  // namespace gpu_test
