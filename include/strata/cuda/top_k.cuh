#pragma once
// kernels::top_k on the GPU: each value becomes its kernels::top_k_key, CUB radix-sorts the
// keys in descending order, and the first k keys give the indices - the same entries in
// the same order as the host, whose nth_element ranks by the same keys. A full sort does
// more than selection needs, but stays one well-tested library call. Spans are of device
// memory.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include <cub/device/device_radix_sort.cuh>

#include "strata/cuda/buffer.cuh"
#include "strata/cuda/launch.cuh"
#include "strata/kernels/top_k.hpp"

namespace strata::cuda {

namespace detail {

// A template (of no parameter that matters): a kernel defined in a header must have one
// definition across the translation units that include it, as inline functions do.
template <int = 0>
__global__ void top_k_keys_kernel(const float* values, std::uint64_t* keys, std::size_t n) {
  for_each_fragment<1>(n, [=](std::size_t i, auto) { keys[i] = kernels::top_k_key(values[i], static_cast<std::uint32_t>(i)); });
}

template <int = 0>
__global__ void top_k_indices_kernel(const std::uint64_t* keys, std::uint32_t* indices, std::size_t k) {
  for_each_fragment<1>(k, [=](std::size_t i, auto) { indices[i] = kernels::top_k_index(keys[i]); });
}

}  // namespace detail

/// The indices of the indices.size() largest-magnitude values, largest first.
inline void top_k(std::span<const float> values, std::span<std::uint32_t> indices, cudaStream_t stream) {
  kernels::detail::check_top_k("cuda::top_k", values.size(), indices.size());
  const std::size_t n = values.size(), k = indices.size();
  if (k == 0) return;
  device_buffer<std::uint64_t> keys(n, stream), sorted(n, stream);
  detail::launch_elementwise<1>("top_k_keys_kernel", detail::top_k_keys_kernel<>, n, stream, values.data(), keys.data(), n);
  detail::with_cub_scratch(stream, [&](void* scratch, std::size_t capacity) {
    STRATA_CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(scratch, capacity, keys.data(), sorted.data(), n, 0, 64, stream));
    return capacity;
  });
  detail::launch_elementwise<1>("top_k_indices_kernel", detail::top_k_indices_kernel<>, k, stream, sorted.data(),
                                indices.data(), k);
}

}  // namespace strata::cuda
