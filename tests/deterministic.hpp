#pragma once
// Test data that every backend's tests (host, simulated device, GPU) derive alike: a
// linear congruential sequence, so a value depends only on its seed and index. No fmt, so
// that nvcc-compiled tests include it too.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata_test {

/// `n` deterministic values in [-1, 1), converted to T.
template <class T = float>
std::vector<T> values(std::size_t n, std::uint32_t seed) {
  std::vector<T> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v.push_back(T(static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f));
  }
  return v;
}

}  // namespace strata_test
