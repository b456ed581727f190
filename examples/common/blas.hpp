#pragma once
// OpenBLAS as the examples use it: one thread per process (ranks are the parallelism), with
// its fast kernels also on CPUs newer than the library.
//
// OpenBLAS picks its kernels by CPU model when it is loaded. A model it does not know (Debian
// 12's 0.3.21 on a 5th-generation Xeon, model 207) gets "Prescott", SSE3 kernels that make
// the examples' matrix products 3-4x slower. OPENBLAS_CORETYPE names the kernels instead but
// is read only at load, so after such a fallback on a CPU with AVX-512 or AVX2 the program
// runs itself again with it set. A user's OPENBLAS_CORETYPE is left alone.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include <cblas.h>

namespace examples {

/// The kernels OpenBLAS should run on this CPU where it fell back to SSE3, or nullptr.
/// (check_blas_kernels.sh expects better kernels exactly where the CPU has AVX2 and FMA.)
inline const char* kernels_for_this_cpu() {
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

/// Call first in main(), before MPI is initialized (it may replace the process).
inline void use_blas_single_threaded(char** argv) {
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  const bool fell_back = (chosen == nullptr || *chosen == '\0') && std::strcmp(openblas_get_corename(), "Prescott") == 0;
  if (const char* kernels = fell_back ? kernels_for_this_cpu() : nullptr) {
    std::error_code error;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (!error) {
      ::setenv("OPENBLAS_CORETYPE", kernels, 1);
      // By its own path, not /proc/self/exe, so that ps and pgrep still see the program's name.
      ::execv(self.c_str(), argv);  // returns only on failure: go on with the slow kernels
    }
  }
  openblas_set_num_threads(1);
}

}  // namespace examples
