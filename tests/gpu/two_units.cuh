#pragma once
// Included by two translation units (two_units_a.cu, two_units_b.cu): every kernel header,
// and a count of their launchers' addresses. The program links only if every kernel defined
// in a header has one definition across units; it runs on the CPU (nothing is launched).
#include "strata/cuda/cast.cuh"
#include "strata/cuda/low_rank.cuh"
#include "strata/cuda/optimizer.cuh"
#include "strata/cuda/pack.cuh"
#include "strata/cuda/sparse_rows.cuh"
#include "strata/cuda/top_k.cuh"

inline int launchers_in_this_unit() {
  const void* const launchers[] = {reinterpret_cast<const void*>(&strata::cuda::gather_rows),
                                   reinterpret_cast<const void*>(&strata::cuda::scatter_add_rows),
                                   reinterpret_cast<const void*>(&strata::cuda::top_k),
                                   reinterpret_cast<const void*>(&strata::cuda::low_rank::orthogonalize)};
  int found = 0;
  for (const void* launcher : launchers) found += launcher != nullptr;
  return found;
}

int launchers_of_unit_b();
