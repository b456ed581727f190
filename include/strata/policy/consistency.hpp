#pragma once
#include "strata/policy/category.hpp"

namespace strata {

/// Bulk synchronous: a pull at clock c (after c pushes) waits until every worker's first c
/// pushes are applied; each clock's pushes are averaged and applied once.
struct BSP { static constexpr bool is_consistency_model = true; static constexpr int staleness = 0; };
/// Asynchronous: pulls are answered at once and may be arbitrarily stale; each push is
/// applied on arrival with 1/workers of its gradient.
struct ASP { static constexpr bool is_consistency_model = true; static constexpr int staleness = -1; };
/// Stale synchronous: a pull at clock c waits until every worker's first c - S pushes are
/// applied, so a read misses at most S of each other worker's first c pushes (none of its
/// own) and a worker pushes at most S + 1 updates more than the slowest. Each push is
/// applied on arrival with 1/workers of its gradient.
template <int S>
struct SSP {
  static_assert(S >= 1, "SSP<S>: staleness S must be at least 1 (SSP<0> is BSP; write Consistency<BSP>)");
  static constexpr bool arguments_accepted = S >= 1;
  static constexpr bool is_consistency_model = true;
  static constexpr int staleness = S;
};

template <class M>
concept ConsistencyModel = requires { requires M::is_consistency_model; };

template <class Model>
struct Consistency {
  static_assert(ConsistencyModel<Model>, "Consistency<Model>: Model must be one of BSP, ASP, SSP<S>");
  static constexpr bool arguments_accepted = ConsistencyModel<Model> && arguments_accepted_of<Model>;
  using policy_category = category::consistency;
  using model = Model;
};

}  // namespace strata
