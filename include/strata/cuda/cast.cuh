#pragma once
// kernels::scaled_narrow, scaled_widen and accumulate on the GPU: the same element
// functions, eight values per thread. Spans are of device memory.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <type_traits>

#include "strata/cuda/launch.cuh"
#include "strata/kernels/cast.hpp"

namespace strata::cuda {

namespace detail {

inline constexpr int cast_fragment = 8;  // 32 bytes of float, 16 of the 16-bit type

/// Narrows from float, or widens to it.
template <class Out, class In>
__device__ Out scaled_cast_element(In value, float scale) {
  if constexpr (std::is_same_v<In, float>)
    return kernels::scaled_narrow_element<Out>(value, scale);
  else
    return kernels::scaled_widen_element(value, scale);
}

template <int N, class In, class Out>
__global__ void scaled_cast_kernel(const In* in, Out* out, std::size_t n, float scale) {
  for_each_fragment<N>(n, [=](std::size_t at, auto w) {
    constexpr int M = decltype(w)::value;
    const fragment<In, M> x = load<M>(in + at);
    fragment<Out, M> y;
    for (int k = 0; k < M; ++k) y[k] = scaled_cast_element<Out>(x[k], scale);
    store(out + at, y);
  });
}

template <class In, class Out>
void scaled_cast(const char* function, std::span<const In> in, std::span<Out> out, float scale, cudaStream_t stream) {
  kernels::detail::require_size(function, "out", out.size(), in.size());
  with_fragment_width<cast_fragment>(
      [&](auto w) {
        constexpr int N = decltype(w)::value;
        launch_elementwise<N>("scaled_cast_kernel", scaled_cast_kernel<N, In, Out>, in.size(), stream, in.data(), out.data(),
                              in.size(), scale);
      },
      in.data(), out.data());
}

template <int N, class W>
__global__ void accumulate_kernel(const W* in, float* sum, std::size_t n) {
  for_each_fragment<N>(n, [=](std::size_t at, auto w) {
    constexpr int M = decltype(w)::value;
    const fragment<W, M> x = load<M>(in + at);
    fragment<float, M> s = load<M>(sum + at);
    for (int k = 0; k < M; ++k) s[k] = kernels::accumulate_element(s[k], x[k]);
    store(sum + at, s);
  });
}

}  // namespace detail

/// sum[i] += float(in[i]), enqueued on `stream` (W: float, half or bfloat16).
template <class W>
void accumulate(std::span<const W> in, std::span<float> sum, cudaStream_t stream) {
  kernels::detail::require_size("cuda::accumulate", "sum", sum.size(), in.size());
  detail::with_fragment_width<detail::cast_fragment>(
      [&](auto w) {
        constexpr int N = decltype(w)::value;
        detail::launch_elementwise<N>("accumulate_kernel", detail::accumulate_kernel<N, W>, in.size(), stream, in.data(),
                                      sum.data(), in.size());
      },
      in.data(), sum.data());
}

/// out[i] = W(in[i] × scale), enqueued on `stream`.
template <class W>
void scaled_narrow(std::span<const float> in, std::span<W> out, float scale, cudaStream_t stream) {
  detail::scaled_cast("cuda::scaled_narrow", in, out, scale, stream);
}

/// out[i] = float(in[i]) × scale, enqueued on `stream`.
template <class W>
void scaled_widen(std::span<const W> in, std::span<float> out, float scale, cudaStream_t stream) {
  detail::scaled_cast("cuda::scaled_widen", in, out, scale, stream);
}

}  // namespace strata::cuda
