#pragma once
// PowerSGD's linear algebra on the GPU, on the row-major matrices of
// sync::low_rank (M rows x cols, P rows x r, Q cols x r). The products are cuBLAS SGEMMs;
// orthogonalization runs sync::low_rank::gram_schmidt in one thread block, with each
// column split over the block's threads. Spans are of device memory.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include <cub/block/block_reduce.cuh>

#include "strata/cuda/check.cuh"
#include "strata/cuda/launch.cuh"
#include "strata/kernels/sizes.hpp"
#include "strata/sync/compress/low_rank.hpp"

namespace strata::cuda::low_rank {

namespace detail {

using cuda::detail::block_threads;

/// The sum of every thread's `x`, returned to every thread of the block.
__device__ inline float block_sum(float x) {
  using reduce = cub::BlockReduce<float, block_threads>;
  __shared__ typename reduce::TempStorage storage;
  __shared__ float total;
  const float sum = reduce(storage).Sum(x);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  const float result = total;
  __syncthreads();  // before the next call reuses `storage` and `total`
  return result;
}

/// The columns of a row-major rows x r matrix, for gram_schmidt in one block: thread t owns
/// rows t, t + blockDim.x, ... in every operation, so only the dot products synchronize.
struct block_columns {
  float* p;
  std::size_t rows, r;

  __device__ float dot(std::size_t j, std::size_t k) const {
    float sum = 0.0f;
    for (std::size_t i = threadIdx.x; i < rows; i += blockDim.x) sum += p[i * r + j] * p[i * r + k];
    return block_sum(sum);
  }
  __device__ void axpy(std::size_t j, float a, std::size_t k) const {
    for (std::size_t i = threadIdx.x; i < rows; i += blockDim.x) p[i * r + j] += a * p[i * r + k];
  }
  __device__ void scale(std::size_t j, float s) const {
    for (std::size_t i = threadIdx.x; i < rows; i += blockDim.x) p[i * r + j] *= s;
  }
};

// A template (of no parameter that matters): a kernel defined in a header must have one
// definition across the translation units that include it, as inline functions do.
template <int = 0>
__global__ void orthogonalize_kernel(float* p, std::size_t rows, std::size_t r, float epsilon) {
  block_columns columns{p, rows, r};
  sync::low_rank::gram_schmidt(columns, r, epsilon);
}

/// cuBLAS counts in int.
inline int blas_dimension(std::size_t value, const char* function) {
  if (value > INT_MAX)
    throw std::invalid_argument(std::string(function) + ": a dimension of " + std::to_string(value) +
                                " exceeds cuBLAS's int; split the matrix");
  return static_cast<int>(value);
}

/// C = op(A) op(B) in cuBLAS's column-major terms, where a row-major matrix is its own
/// transpose: a (m x k), b (k x n), c (m x n) after the operations.
inline void gemm(cublasHandle_t blas, cudaStream_t stream, const char* function, cublasOperation_t op_a,
                 cublasOperation_t op_b, std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                 const float* b, std::size_t ldb, float* c, std::size_t ldc) {
  const float one = 1.0f, zero = 0.0f;
  STRATA_CUDA_CHECK(cublasSetStream(blas, stream));
  STRATA_CUDA_CHECK(cublasSgemm(blas, op_a, op_b, blas_dimension(m, function), blas_dimension(n, function),
                                blas_dimension(k, function), &one, a, blas_dimension(lda, function), b,
                                blas_dimension(ldb, function), &zero, c, blas_dimension(ldc, function)));
}

inline void check_shapes(const char* function, std::size_t m, std::size_t p, std::size_t q, std::size_t rows,
                         std::size_t cols, std::size_t r) {
  kernels::detail::require_size(function, "M", m, rows * cols);
  kernels::detail::require_size(function, "P", p, rows * r);
  kernels::detail::require_size(function, "Q", q, cols * r);
}

}  // namespace detail

/// P = M Q. In column-major terms P^T (r x rows) = Q^T (r x cols) M^T (cols x rows).
inline void multiply(cublasHandle_t blas, std::span<const float> m, std::span<const float> q, std::span<float> p,
                     std::size_t rows, std::size_t cols, std::size_t r, cudaStream_t stream) {
  detail::check_shapes("cuda::low_rank::multiply", m.size(), p.size(), q.size(), rows, cols, r);
  detail::gemm(blas, stream, "cuda::low_rank::multiply", CUBLAS_OP_N, CUBLAS_OP_N, r, rows, cols, q.data(), r, m.data(), cols,
               p.data(), r);
}

/// Q = M^T P. In column-major terms Q^T (r x cols) = P^T (r x rows) M (rows x cols).
inline void multiply_transposed(cublasHandle_t blas, std::span<const float> m, std::span<const float> p, std::span<float> q,
                                std::size_t rows, std::size_t cols, std::size_t r, cudaStream_t stream) {
  detail::check_shapes("cuda::low_rank::multiply_transposed", m.size(), p.size(), q.size(), rows, cols, r);
  detail::gemm(blas, stream, "cuda::low_rank::multiply_transposed", CUBLAS_OP_N, CUBLAS_OP_T, r, cols, rows, p.data(), r,
               m.data(), cols, q.data(), r);
}

/// M = P Q^T. In column-major terms M^T (cols x rows) = Q (cols x r) P^T (r x rows).
inline void reconstruct(cublasHandle_t blas, std::span<const float> p, std::span<const float> q, std::span<float> m,
                        std::size_t rows, std::size_t cols, std::size_t r, cudaStream_t stream) {
  detail::check_shapes("cuda::low_rank::reconstruct", m.size(), p.size(), q.size(), rows, cols, r);
  detail::gemm(blas, stream, "cuda::low_rank::reconstruct", CUBLAS_OP_T, CUBLAS_OP_N, cols, rows, r, q.data(), r, p.data(), r,
               m.data(), cols);
}

/// Makes the r columns of P (rows x r) orthonormal, as sync::low_rank::orthogonalize.
inline void orthogonalize(std::span<float> p, std::size_t rows, std::size_t r, cudaStream_t stream, float epsilon = 1e-8f) {
  kernels::detail::require_size("cuda::low_rank::orthogonalize", "P", p.size(), rows * r);
  if (p.empty()) return;
  cuda::detail::launch("orthogonalize_kernel", detail::orthogonalize_kernel<>, 1, cuda::detail::block_threads, stream, p.data(),
                       rows, r, epsilon);
}

}  // namespace strata::cuda::low_rank
