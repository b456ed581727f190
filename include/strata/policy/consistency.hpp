#pragma once
#include "strata/policy/category.hpp"

namespace strata {

/// Bulk synchronous: no read at clock c+1 before every push of clock c is applied.
struct BSP { static constexpr bool is_consistency_model = true; static constexpr int staleness = 0; };
/// Asynchronous: push and continue; reads may be arbitrarily stale.
struct ASP { static constexpr bool is_consistency_model = true; static constexpr int staleness = -1; };
/// Stale synchronous: a worker at clock c waits until the slowest worker reaches c - S.
template <int S>
struct SSP {
  static_assert(S >= 1, "SSP<S>: staleness S must be at least 1 (SSP<0> is BSP; write Consistency<BSP>)");
  static constexpr bool is_consistency_model = true;
  static constexpr int staleness = S;
};

template <class M>
concept ConsistencyModel = M::is_consistency_model;

template <class Model>
struct Consistency {
  static_assert(ConsistencyModel<Model>, "Consistency<Model>: Model must be one of BSP, ASP, SSP<S>");
  using policy_category = category::consistency;
  using model = Model;
};

}  // namespace strata
