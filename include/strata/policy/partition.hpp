#pragma once
#include "strata/policy/category.hpp"

namespace strata {

/// The variable is not split (the default).
struct Unpartitioned {
  using policy_category = category::partition;
};

/// Split the variable along `Axis` into `Shards` parts. `Shards = 0` means "decide at run
/// time": the PS<N> shard count for parameter-server variables, the world size otherwise.
template <int Axis, int Shards = 0>
struct Partition {
  static_assert(Axis >= 0, "Partition<Axis, Shards>: Axis must be a non-negative dimension index");
  static_assert(Shards == 0 || Shards >= 2,
                "Partition<Axis, Shards>: Shards must be at least 2 (or 0 for automatic); one part is no partition");
  static constexpr bool arguments_accepted = Axis >= 0 && (Shards == 0 || Shards >= 2);
  using policy_category = category::partition;
  static constexpr int axis = Axis;
  static constexpr int shards = Shards;
};

}  // namespace strata
