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

/// STRATA_SEPARATE_COMPILATION: the library's non-template code (checkpoint files, the
/// timeline, signatures, bucket plans, starting MPI) is compiled once, in the one translation
/// unit that includes "strata/impl/src.hpp" (CMake: link strata::compiled), instead of in every
/// translation unit that includes a header: Asio's idiom. Define it for every translation unit
/// of a program or for none. Headers declare such functions STRATA_DECL and include their
/// definitions (impl/*.ipp) only when the library is header-only.
#if defined(STRATA_SEPARATE_COMPILATION)
#define STRATA_DECL
#else
#define STRATA_DECL inline
#define STRATA_HEADER_ONLY 1
#endif

namespace strata {
inline constexpr int version_major = 0;
inline constexpr int version_minor = 1;
inline constexpr int version_patch = 0;
}  // namespace strata
