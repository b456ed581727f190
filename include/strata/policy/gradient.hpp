#pragma once
#include "strata/policy/category.hpp"

namespace strata {

/// Gradients are dense tensors of the variable's shape (the default).
struct DenseGradient {
  using policy_category = category::gradient;
};

/// Gradients are row-indexed slices (embedding tables): only touched rows travel.
struct SparseRows {
  using policy_category = category::gradient;
};

}  // namespace strata
