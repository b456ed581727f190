#pragma once
#include "strata/policy/category.hpp"

namespace strata {

/// Every rank holds a full copy of the variable; gradients are reduced across ranks.
struct Replicate {
  using policy_category = category::placement;
};

/// The variable lives on `Shards` parameter-server shards hosted by ranks; workers push
/// gradients and pull values.
template <int Shards>
struct PS {
  static_assert(Shards >= 1, "PS<Shards>: Shards is the number of server shards and must be at least 1");
  static constexpr bool arguments_accepted = Shards >= 1;
  using policy_category = category::placement;
  static constexpr int shards = Shards;
};

}  // namespace strata
