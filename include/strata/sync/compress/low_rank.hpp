#pragma once
// The dense linear algebra of PowerSGD on small row-major matrices: M is rows x cols, P is
// rows x r and Q is cols x r with r tiny, so plain loops in cache-friendly order suffice.
#include <cmath>
#include <cstddef>
#include <span>

namespace strata::sync::low_rank {

/// P = M Q
inline void multiply(std::span<const float> m, std::span<const float> q, std::span<float> p, std::size_t rows,
                     std::size_t cols, std::size_t r) {
  for (std::size_t i = 0; i < rows; ++i) {
    float* p_row = p.data() + i * r;
    for (std::size_t j = 0; j < r; ++j) p_row[j] = 0.0f;
    for (std::size_t k = 0; k < cols; ++k) {
      const float m_ik = m[i * cols + k];
      const float* q_row = q.data() + k * r;
      for (std::size_t j = 0; j < r; ++j) p_row[j] += m_ik * q_row[j];
    }
  }
}

/// Q = M^T P
inline void multiply_transposed(std::span<const float> m, std::span<const float> p, std::span<float> q, std::size_t rows,
                                std::size_t cols, std::size_t r) {
  for (std::size_t k = 0; k < cols * r; ++k) q[k] = 0.0f;
  for (std::size_t i = 0; i < rows; ++i) {
    const float* p_row = p.data() + i * r;
    for (std::size_t k = 0; k < cols; ++k) {
      const float m_ik = m[i * cols + k];
      float* q_row = q.data() + k * r;
      for (std::size_t j = 0; j < r; ++j) q_row[j] += m_ik * p_row[j];
    }
  }
}

/// M = P Q^T
inline void reconstruct(std::span<const float> p, std::span<const float> q, std::span<float> m, std::size_t rows,
                        std::size_t cols, std::size_t r) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t k = 0; k < cols; ++k) {
      float sum = 0.0f;
      for (std::size_t j = 0; j < r; ++j) sum += p[i * r + j] * q[k * r + j];
      m[i * cols + k] = sum;
    }
}

/// Makes the r columns of P orthonormal (modified Gram-Schmidt). Each column is projected
/// out twice ("twice is enough"): when the gradient's rank is below r, the last columns are
/// rounding noise, and one pass leaves them far from orthogonal. `epsilon` keeps a zero
/// column from dividing by zero, as PyTorch's PowerSGD hook does.
inline void orthogonalize(std::span<float> p, std::size_t rows, std::size_t r, float epsilon = 1e-8f) {
  for (std::size_t j = 0; j < r; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t k = 0; k < j; ++k) {
        float dot = 0.0f;
        for (std::size_t i = 0; i < rows; ++i) dot += p[i * r + j] * p[i * r + k];
        for (std::size_t i = 0; i < rows; ++i) p[i * r + j] -= dot * p[i * r + k];
      }
    float norm = 0.0f;
    for (std::size_t i = 0; i < rows; ++i) norm += p[i * r + j] * p[i * r + j];
    const float inverse = 1.0f / (std::sqrt(norm) + epsilon);
    for (std::size_t i = 0; i < rows; ++i) p[i * r + j] *= inverse;
  }
}

}  // namespace strata::sync::low_rank
