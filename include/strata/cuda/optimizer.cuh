#pragma once
// Fused optimizer updates on the GPU: weight decay, moments and the parameter step in one
// pass over memory, each element updated by the very functor the host optimizers loop
// over (optim::sgd_element, optim::adam_element). Spans are of device memory. Each takes
// the gradient times `grad_scale`, so that a sum over ranks becomes their average inside
// the update instead of in a pass of its own (x 1.0f is exact: the default changes nothing).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

#include "strata/cuda/launch.cuh"
#include "strata/kernels/sizes.hpp"
#include "strata/optim/adam.hpp"
#include "strata/optim/sgd.hpp"

namespace strata::cuda {

namespace detail {

inline constexpr int optimizer_fragment = 4;  // 16 bytes of each array

/// `velocity` is null for SGD without momentum, which keeps no state.
template <int N>
__global__ void sgd_kernel(float* param, const float* grad, float* velocity, std::size_t n, optim::sgd_element op,
                           float grad_scale) {
  for_each_fragment<N>(n, [=](std::size_t at, auto w) {
    constexpr int M = decltype(w)::value;
    fragment<float, M> p = load<M>(param + at), v{};
    const fragment<float, M> g = load<M>(grad + at);
    if (velocity) v = load<M>(velocity + at);
    for (int k = 0; k < M; ++k) op(p[k], grad_scale * g[k], v[k]);
    store(param + at, p);
    if (velocity) store(velocity + at, v);
  });
}

template <int N>
__global__ void adam_kernel(float* param, const float* grad, float* m, float* v, std::size_t n, optim::adam_element op,
                            float grad_scale) {
  for_each_fragment<N>(n, [=](std::size_t at, auto w) {
    constexpr int M = decltype(w)::value;
    fragment<float, M> p = load<M>(param + at), first = load<M>(m + at), second = load<M>(v + at);
    const fragment<float, M> g = load<M>(grad + at);
    for (int k = 0; k < M; ++k) op(p[k], grad_scale * g[k], first[k], second[k]);
    store(param + at, p);
    store(m + at, first);
    store(v + at, second);
  });
}

}  // namespace detail

/// optim::sgd::update on the GPU. `velocity` holds one value per parameter, or nothing
/// when op.momentum is 0 (optim::sgd::make_state's sizes).
inline void sgd_update(std::span<float> param, std::span<const float> grad, std::span<float> velocity,
                       const optim::sgd_element& op, cudaStream_t stream, float grad_scale = 1.0f) {
  kernels::detail::require_size("cuda::sgd_update", "grad", grad.size(), param.size());
  kernels::detail::require_size("cuda::sgd_update", "velocity", velocity.size(), op.momentum != 0.0f ? param.size() : 0);
  float* state = velocity.empty() ? nullptr : velocity.data();
  detail::with_fragment_width<detail::optimizer_fragment>(
      [&](auto w) {
        constexpr int N = decltype(w)::value;
        detail::launch_elementwise<N>("sgd_kernel", detail::sgd_kernel<N>, param.size(), stream, param.data(), grad.data(),
                                      state, param.size(), op, grad_scale);
      },
      param.data(), grad.data(), velocity.data());
}

/// optim::adam::update on the GPU; `op` is optim::adam::element(step).
inline void adam_update(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                        const optim::adam_element& op, cudaStream_t stream, float grad_scale = 1.0f) {
  kernels::detail::require_size("cuda::adam_update", "grad", grad.size(), param.size());
  kernels::detail::require_size("cuda::adam_update", "m", m.size(), param.size());
  kernels::detail::require_size("cuda::adam_update", "v", v.size(), param.size());
  detail::with_fragment_width<detail::optimizer_fragment>(
      [&](auto w) {
        constexpr int N = decltype(w)::value;
        detail::launch_elementwise<N>("adam_kernel", detail::adam_kernel<N>, param.size(), stream, param.data(), grad.data(),
                                      m.data(), v.data(), param.size(), op, grad_scale);
      },
      param.data(), grad.data(), m.data(), v.data());
}

}  // namespace strata::cuda
