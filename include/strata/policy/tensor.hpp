#pragma once
#include "strata/policy/category.hpp"

namespace strata {

/// Every rank of the tensor group holds the whole variable (the default; without a mesh
/// the tensor group is the rank itself).
struct WholeTensor {
  using policy_category = category::tensor;
};

/// The variable is split along `Axis` over the tensor group of a mesh (parallel/mesh.hpp):
/// each rank binds and updates its own equal part, e.g. TensorParallel<0> for a
/// column-parallel linear layer's weight [out, in] (its output rows) and TensorParallel<1>
/// for a row-parallel one's (its input columns). The part's gradient is averaged over the
/// data group like any replicated variable's; the layer itself sums partial results with
/// the collectives of parallel/tensor_parallel.hpp. Checkpoints hold the whole tensor, so
/// they restore into another tensor-parallel width.
template <int Axis>
struct TensorParallel {
  static_assert(Axis >= 0, "TensorParallel<Axis>: Axis must be a non-negative dimension index");
  static constexpr bool arguments_accepted = Axis >= 0;
  using policy_category = category::tensor;
  static constexpr int axis = Axis;
};

}  // namespace strata
