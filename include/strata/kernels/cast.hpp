#pragma once
// Scaled casts between float and a 16-bit wire type (half, bfloat16): what a gradient
// becomes on the wire, and back; and the widening sum that accumulates micro-batches'
// gradients in fp32. The element functions are the whole of the math; the host
// loops below and the kernels in strata/cuda/cast.cuh both call them.
#include <cstddef>
#include <span>

#include "strata/config.hpp"
#include "strata/kernels/sizes.hpp"
#include "strata/numeric/float16.hpp"

namespace strata::kernels {

/// value × scale, rounded to the nearest W (ties to even).
template <class W>
STRATA_HOST_DEVICE W scaled_narrow_element(float value, float scale) {
  return W(value * scale);
}

/// The float a W holds, × scale.
template <class W>
STRATA_HOST_DEVICE float scaled_widen_element(W value, float scale) {
  return static_cast<float>(value) * scale;
}

/// A running fp32 sum plus the float a W (or float) holds.
template <class W>
STRATA_HOST_DEVICE float accumulate_element(float sum, W value) {
  return sum + static_cast<float>(value);
}

template <class W>
void scaled_narrow(std::span<const float> in, std::span<W> out, float scale) {
  detail::require_size("kernels::scaled_narrow", "out", out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = scaled_narrow_element<W>(in[i], scale);
}

template <class W>
void scaled_widen(std::span<const W> in, std::span<float> out, float scale) {
  detail::require_size("kernels::scaled_widen", "out", out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = scaled_widen_element(in[i], scale);
}

/// sum[i] += float(in[i]).
template <class W>
void accumulate(std::span<const W> in, std::span<float> sum) {
  detail::require_size("kernels::accumulate", "sum", sum.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) sum[i] = accumulate_element(sum[i], in[i]);
}

}  // namespace strata::kernels
