#pragma once
// kernels::gather_rows and scatter_add_rows on the GPU. Scatter-add finds the runs of equal
// indices as the host does - a stable sort of positions by index (CUB's radix sort is
// stable), then run-length encoding - and adds each run with kernels::add_run_element, so
// duplicates combine in input order and the result equals the host's bit for bit.
// Spans are of device memory; indices must be below the table's row count (they are not
// checked: reading them would cost a copy to the host).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "strata/cuda/buffer.cuh"
#include "strata/cuda/launch.cuh"
#include "strata/kernels/sparse_rows.hpp"

namespace strata::cuda {

namespace detail {

// A template (of no parameter that matters): a kernel defined in a header must have one
// definition across the translation units that include it, as inline functions do.
template <int = 0>
__global__ void gather_kernel(const float* table, const std::uint32_t* indices, float* out, std::size_t cols, std::size_t n) {
  for_each_fragment<1>(n, [=](std::size_t i, auto) { kernels::gather_element(table, indices, out, cols, i); });
}

template <int = 0>
__global__ void positions_kernel(std::uint32_t* positions, std::size_t n) {
  for_each_fragment<1>(n, [=](std::size_t i, auto) { positions[i] = static_cast<std::uint32_t>(i); });
}

/// One thread per (run, column); `runs` (on the device) says how many of the `capacity`
/// run slots are used.
template <int = 0>
__global__ void add_runs_kernel(float* table, const float* rows, const std::uint32_t* order, const std::uint32_t* run_index,
                                const std::uint32_t* run_start, const std::uint32_t* run_length, const int* runs,
                                std::size_t cols, std::size_t capacity) {
  const std::size_t used = static_cast<std::size_t>(*runs) * cols;
  for_each_fragment<1>(capacity * cols, [=](std::size_t i, auto) {
    if (i >= used) return;
    const std::size_t run = i / cols;
    kernels::add_run_element(table, rows, order, run_index[run], run_start[run], run_start[run] + run_length[run], cols,
                             i % cols);
  });
}

}  // namespace detail

/// out (indices.size() rows of `cols`) = the table's rows at `indices`.
inline void gather_rows(std::span<const float> table, std::size_t cols, std::span<const std::uint32_t> indices,
                        std::span<float> out, cudaStream_t stream) {
  kernels::detail::rows_of("cuda::gather_rows", table.size(), cols);
  kernels::detail::require_size("cuda::gather_rows", "out", out.size(), indices.size() * cols);
  detail::launch_elementwise<1>("gather_kernel", detail::gather_kernel<>, out.size(), stream, table.data(), indices.data(),
                                out.data(), cols, out.size());
}

/// table row indices[r] += row r of `rows`, for every r; duplicates add in input order.
inline void scatter_add_rows(std::span<float> table, std::size_t cols, std::span<const std::uint32_t> indices,
                             std::span<const float> rows, cudaStream_t stream) {
  const std::size_t table_rows = kernels::detail::rows_of("cuda::scatter_add_rows", table.size(), cols);
  kernels::detail::require_size("cuda::scatter_add_rows", "rows", rows.size(), indices.size() * cols);
  const std::size_t n = indices.size();
  if (n == 0) return;
  if (n > INT_MAX)
    throw std::invalid_argument("cuda::scatter_add_rows: " + std::to_string(n) +
                                " rows at once; CUB's run-length encoding counts in int, so split them");
  const int count = static_cast<int>(n);
  // Sort no more bits than a valid index can have.
  const int index_bits = std::clamp(static_cast<int>(std::bit_width(std::max<std::size_t>(table_rows, 1) - 1)), 1, 32);

  device_buffer<std::uint32_t> positions(n, stream), sorted(n, stream), order(n, stream);
  device_buffer<std::uint32_t> run_index(n, stream), run_length(n, stream), run_start(n, stream);
  device_buffer<int> runs(1, stream);
  detail::launch_elementwise<1>("positions_kernel", detail::positions_kernel<>, n, stream, positions.data(), n);

  detail::with_cub_scratch(stream, [&](void* scratch, std::size_t capacity) {
    std::size_t sort = capacity, encode = capacity, scan = capacity;
    STRATA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch, sort, indices.data(), sorted.data(), positions.data(),
                                                      order.data(), count, 0, index_bits, stream));
    STRATA_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(scratch, encode, sorted.data(), run_index.data(), run_length.data(),
                                                         runs.data(), count, stream));
    STRATA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scratch, scan, run_length.data(), run_start.data(), count, stream));
    return std::max({sort, encode, scan});
  });
  detail::launch_elementwise<1>("add_runs_kernel", detail::add_runs_kernel<>, n * cols, stream, table.data(), rows.data(),
                                order.data(), run_index.data(), run_start.data(), run_length.data(), runs.data(), cols, n);
}

}  // namespace strata::cuda
