// The second unit of two_units_a.cu.
#include "strata/cuda/cast.cuh"
#include "strata/cuda/low_rank.cuh"
#include "strata/cuda/optimizer.cuh"
#include "strata/cuda/pack.cuh"
#include "strata/cuda/sparse_rows.cuh"
#include "strata/cuda/top_k.cuh"

int launchers_of_unit_b() {
  const void* const there[] = {reinterpret_cast<const void*>(&strata::cuda::gather_rows),
                         reinterpret_cast<const void*>(&strata::cuda::scatter_add_rows),
                         reinterpret_cast<const void*>(&strata::cuda::top_k),
                         reinterpret_cast<const void*>(&strata::cuda::low_rank::orthogonalize)};
  int found = 0;
  for (const void* launcher : there) found += launcher != nullptr;
  return found;
}
