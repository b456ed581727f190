// Two translation units that include every kernel header and use its launchers: the program
// links only if every kernel defined in a header has one definition across units (it runs on
// the CPU: nothing is launched).
#include <cstdio>

#include "strata/cuda/cast.cuh"
#include "strata/cuda/low_rank.cuh"
#include "strata/cuda/optimizer.cuh"
#include "strata/cuda/pack.cuh"
#include "strata/cuda/sparse_rows.cuh"
#include "strata/cuda/top_k.cuh"

int launchers_of_unit_b();

int main() {
  const void* const here[] = {reinterpret_cast<const void*>(&strata::cuda::gather_rows),
                        reinterpret_cast<const void*>(&strata::cuda::scatter_add_rows),
                        reinterpret_cast<const void*>(&strata::cuda::top_k),
                        reinterpret_cast<const void*>(&strata::cuda::low_rank::orthogonalize)};
  int found = 0;
  for (const void* launcher : here) found += launcher != nullptr;
  const int there = launchers_of_unit_b();
  std::printf("two units link: %d launchers here, %d there\n", found, there);
  return found == 4 && there == 4 ? 0 : 1;
}
