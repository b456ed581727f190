#pragma once
#include <type_traits>

#include "strata/policy/category.hpp"

namespace strata {

/// All-reduce algorithms. `Native` is the communication library's own implementation.
struct Native       { static constexpr bool is_allreduce_algorithm = true; };
struct Ring         { static constexpr bool is_allreduce_algorithm = true; };
struct Tree         { static constexpr bool is_allreduce_algorithm = true; };
struct Hierarchical { static constexpr bool is_allreduce_algorithm = true; };

template <class A>
concept AllReduceAlgorithm = requires { requires A::is_allreduce_algorithm; };

/// Replicated gradients are summed by an all-reduce using `Algorithm`.
template <class Algorithm = Native>
struct AllReduce {
  static_assert(AllReduceAlgorithm<Algorithm>,
                "AllReduce<Algorithm>: Algorithm must be one of Ring, Tree, Hierarchical, Native");
  static constexpr bool arguments_accepted = AllReduceAlgorithm<Algorithm>;
  using policy_category = category::collective;
  using algorithm = Algorithm;
};

/// No collective: the variable is synchronized through parameter servers.
struct NoCollective {
  using policy_category = category::collective;
};

}  // namespace strata
