#pragma once
// Build-wide switches shared by host and device code.

/// Marks math that must run identically on the host and on a GPU: under nvcc the same
/// function is compiled for both, elsewhere it is an ordinary inline function, so CPU tests
/// exercise the exact code the device runs.
#if defined(__CUDACC__)
#define STRATA_HOST_DEVICE __host__ __device__ inline
#else
#define STRATA_HOST_DEVICE inline
#endif

namespace strata {
inline constexpr int version_major = 0;
inline constexpr int version_minor = 1;
inline constexpr int version_patch = 0;
}  // namespace strata
