#pragma once
// Strategy builders: AutoDist's way of choosing every variable's strategy from what is known
// about the variable, as compile-time type functions. A builder maps `variable_traits` (static
// shape, gradient form) to a canonical strategy; `builder_strategy_t<B, V>` is the result, and
// `build<B>` (model/build.hpp) declares variables with it. The builders decide strategy types
// only: which rank hosts a parameter-server shard is decided at run time.
#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "strata/detail/fixed_string.hpp"
#include "strata/strategy/strategy.hpp"

namespace strata {

/// Static dimensions of a variable: `dims<1000000, 32>` is a 1000000 x 32 table, `dims<>` a
/// scalar.
template <std::size_t... Extents>
struct dims {
  static_assert(((Extents >= 1) && ...), "dims<...>: every dimension must be at least 1");
};

/// What a builder knows of a variable: its static shape and its gradient form
/// (`DenseGradient` or `SparseRows`).
template <class Shape, class Gradient = DenseGradient>
struct variable_traits {
  static_assert(sizeof(Shape) == 0, "variable_traits<Shape, Gradient>: Shape must be dims<d0, d1, ...>");
};

template <std::size_t... Extents, class Gradient>
struct variable_traits<dims<Extents...>, Gradient> {
  static_assert(std::is_same_v<Gradient, DenseGradient> || std::is_same_v<Gradient, SparseRows>,
                "variable_traits<Shape, Gradient>: Gradient must be DenseGradient or SparseRows");
  static_assert(std::is_same_v<Gradient, DenseGradient> || sizeof...(Extents) >= 1,
                "variable_traits<dims<>, SparseRows>: SparseRows gradients are rows of a table and a scalar has "
                "none; give the variable at least one dimension or a DenseGradient");
  using shape = dims<Extents...>;
  using gradient = Gradient;
  static constexpr std::size_t rank = sizeof...(Extents);
  static constexpr std::array<std::size_t, rank> extents{Extents...};
  static constexpr bool sparse = std::is_same_v<Gradient, SparseRows>;
};

template <class V>
inline constexpr bool is_variable_traits = false;
template <std::size_t... Extents, class Gradient>
inline constexpr bool is_variable_traits<variable_traits<dims<Extents...>, Gradient>> = true;

template <class V>
concept VariableTraits = is_variable_traits<V>;

/// Which parameter server a builder asks for: AutoDist's PS builder puts every variable on
/// the first server, the others spread shards greedily over the least-loaded servers (by
/// bytes). Strategy types cannot say this; a builder records it for the run time.
enum class server_assignment { first_server, least_loaded };

/// A builder: `B::template strategy_for<V>` is the strategy of a variable with traits `V`,
/// `B::describe(extents, sparse)` the same for extents known at run time, and `B::servers`
/// says how parameter-server shards are to be assigned.
template <class B>
concept HasBuilderMembers = requires {
  { B::servers } -> std::convertible_to<server_assignment>;
  typename B::template strategy_for<variable_traits<dims<1>>>;
  { B::describe(std::span<const std::size_t>(), false) } -> std::same_as<strategy_descriptor>;
};
template <class B>
concept StrategyBuilder =
    HasBuilderMembers<B> ||
    detail::unsatisfied<"a strategy builder is one of builder::PS<>, PSLoadBalancing<>, PartitionedPS<>, "
                        "UnevenPartitionedPS<>, AllReduce<>, PartitionedAllReduce<>, "
                        "RandomAxisPartitionAllReduce<Seed>, Parallax<> (strategy/builders.hpp)">();

namespace detail {

/// The first k >= 2 in range for which `found(k)` holds, else `rows`; at most `max_shards`.
template <class InRange, class Found>
constexpr int first_shard_count(std::size_t rows, int max_shards, InRange in_range, Found found) {
  std::size_t shards = rows;
  for (std::size_t k = 2; in_range(k); ++k)
    if (found(k)) {
      shards = k;
      break;
    }
  return static_cast<int>(std::min(shards, static_cast<std::size_t>(max_shards)));
}

/// AutoDist's PartitionedPS shard count: the smallest divisor >= 2 of `rows` (`rows` itself
/// when prime: no divisor up to its square root), at most `max_shards`; 1 for one row.
constexpr int smallest_divisor_shards(std::size_t rows, int max_shards) {
  return first_shard_count(
      rows, max_shards, [=](std::size_t k) { return k * k <= rows; }, [=](std::size_t k) { return rows % k == 0; });
}

/// AutoDist's UnevenPartitionedPS shard count: the smallest k >= 2 that does not divide
/// `rows`, at most `max_shards`. No such k below `rows` exists for 1 and 2 rows: they get
/// `rows` shards (one row each).
constexpr int smallest_non_divisor_shards(std::size_t rows, int max_shards) {
  return first_shard_count(
      rows, max_shards, [=](std::size_t k) { return k < rows; }, [=](std::size_t k) { return rows % k != 0; });
}

constexpr int one_shard(std::size_t, int) { return 1; }

/// Dimension 0 of a variable; a scalar has one row.
template <VariableTraits V>
constexpr std::size_t rows_of() {
  if constexpr (V::rank == 0) return 1;
  else return V::extents[0];
}

/// `Partition<Axis>`, or `Unpartitioned` for Axis = -1.
template <int Axis>
struct partition_along : std::type_identity<Partition<Axis>> {};
template <>
struct partition_along<-1> : std::type_identity<Unpartitioned> {};

template <class P, class Category>
concept PolicyOf = Policy<P> && std::is_same_v<category_of<P>, Category>;

/// The parameter-server builders differ in the shard count they compute from dimension 0.
template <class ConsistencyPolicy, server_assignment Servers, int (*ShardCount)(std::size_t rows, int max_shards),
          int MaxShards>
struct parameter_server_builder {
  static_assert(PolicyOf<ConsistencyPolicy, category::consistency>,
                "parameter-server builders (PS, PSLoadBalancing, PartitionedPS, UnevenPartitionedPS, Parallax): the "
                "consistency argument must be Consistency<BSP>, Consistency<ASP> or Consistency<SSP<S>>");
  static constexpr server_assignment servers = Servers;

  template <VariableTraits V>
  static constexpr int shards = ShardCount(rows_of<V>(), MaxShards);

  template <VariableTraits V>
  using strategy_for = Strategy<strata::PS<shards<V>>, typename partition_along<(shards<V> > 1 ? 0 : -1)>::type,
                                ConsistencyPolicy, typename V::gradient>;

  /// What strategy_for gives a variable whose extents are known only at run time.
  static strategy_descriptor describe(std::span<const std::size_t> extents, bool sparse) {
    strategy_descriptor d = Strategy<strata::PS<1>, ConsistencyPolicy>::descriptor;
    d.ps_shards = ShardCount(extents.empty() ? 1 : extents[0], MaxShards);
    d.partition_axis = d.ps_shards > 1 ? 0 : -1;
    d.sparse_rows = sparse;
    return d;
  }
};

/// The all-reduce builders differ in the axis they partition along (-1: none), computed
/// from the extents and the gradient form.
template <class Algorithm, int (*AxisOf)(std::span<const std::size_t> extents, bool sparse)>
struct allreduce_builder {
  static_assert(AllReduceAlgorithm<Algorithm>,
                "all-reduce builders (AllReduce, PartitionedAllReduce, RandomAxisPartitionAllReduce, Parallax): the "
                "algorithm must be one of Ring, Tree, Hierarchical, Native");
  static constexpr server_assignment servers = server_assignment::least_loaded;

  template <VariableTraits V>
  using strategy_for = Strategy<Replicate, strata::AllReduce<Algorithm>,
                                typename partition_along<AxisOf(V::extents, V::sparse)>::type, typename V::gradient>;

  /// What strategy_for gives a variable whose extents are known only at run time.
  static strategy_descriptor describe(std::span<const std::size_t> extents, bool sparse) {
    strategy_descriptor d = Strategy<Replicate, strata::AllReduce<Algorithm>>::descriptor;
    d.partition_axis = AxisOf(extents, sparse);
    d.sparse_rows = sparse;
    return d;
  }
};

constexpr int no_axis(std::span<const std::size_t>, bool) { return -1; }

/// Axis 0 when it has at least two rows.
constexpr int rows_axis(std::span<const std::size_t> extents, bool) {
  return !extents.empty() && extents[0] >= 2 ? 0 : -1;
}

/// SplitMix64's finalizer: a well-mixed 64-bit hash step.
constexpr std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A pseudo-random axis among those with at least two entries, drawn from the seed and the
/// extents; axis 0 for sparse gradients (rows are their unit); -1 when no axis can be split.
template <std::uint64_t Seed>
constexpr int seeded_axis(std::span<const std::size_t> extents, bool sparse) {
  if (sparse) return rows_axis(extents, sparse);
  std::uint64_t h = mix(Seed);
  int splittable = 0;
  for (std::size_t e : extents) {
    h = mix(h ^ e);
    splittable += e >= 2 ? 1 : 0;
  }
  if (splittable == 0) return -1;
  std::uint64_t pick = h % static_cast<std::uint64_t>(splittable);
  for (std::size_t axis = 0; axis < extents.size(); ++axis)
    if (extents[axis] >= 2 && pick-- == 0) return static_cast<int>(axis);
  return -1;
}

template <class B, class V>
struct checked_builder_strategy {
  using type = typename B::template strategy_for<V>;
  static_assert(ValidStrategy<type>, "a strategy builder produced a strategy that breaks a rule; this is a bug in "
                                     "strategy/builders.hpp");
};

}  // namespace detail

/// AutoDist's strategy builders. Write them qualified: `PS` and `AllReduce` are policies too.
namespace builder {

/// Every variable on one parameter-server shard, `PS<1>`, all on the first server.
template <class ConsistencyPolicy = Consistency<BSP>>
struct PS
    : detail::parameter_server_builder<ConsistencyPolicy, server_assignment::first_server, detail::one_shard, 2> {};

/// Every variable on one parameter-server shard, `PS<1>`, servers chosen least-loaded first.
template <class ConsistencyPolicy = Consistency<BSP>>
struct PSLoadBalancing
    : detail::parameter_server_builder<ConsistencyPolicy, server_assignment::least_loaded, detail::one_shard, 2> {};

/// `PS<k>, Partition<0>` with k the smallest divisor >= 2 of dimension 0 (dimension 0 itself
/// when prime), at most `MaxShards`; `PS<1>` for a scalar or a single row.
template <class ConsistencyPolicy = Consistency<BSP>, int MaxShards = 16>
struct PartitionedPS : detail::parameter_server_builder<ConsistencyPolicy, server_assignment::least_loaded,
                                                        detail::smallest_divisor_shards, MaxShards> {
  static_assert(MaxShards >= 2, "PartitionedPS: MaxShards caps the shard count and must be at least 2; use "
                                "builder::PSLoadBalancing<> for unpartitioned variables");
};

/// `PS<k>, Partition<0>` with k the smallest count >= 2 that does not divide dimension 0
/// (deliberately uneven shards), at most `MaxShards`; 2 rows get 2 shards, 1 row `PS<1>`.
template <class ConsistencyPolicy = Consistency<BSP>, int MaxShards = 16>
struct UnevenPartitionedPS : detail::parameter_server_builder<ConsistencyPolicy, server_assignment::least_loaded,
                                                              detail::smallest_non_divisor_shards, MaxShards> {
  static_assert(MaxShards >= 2, "UnevenPartitionedPS: MaxShards caps the shard count and must be at least 2; use "
                                "builder::PSLoadBalancing<> for unpartitioned variables");
};

/// `Replicate, AllReduce<Algorithm>` for every variable (sparse ones keep `SparseRows`).
template <class Algorithm = Ring>
struct AllReduce : detail::allreduce_builder<Algorithm, detail::no_axis> {};

/// `Replicate, AllReduce<Algorithm>, Partition<0>` when dimension 0 has at least two rows;
/// the part count is decided at run time (the world size).
template <class Algorithm = Ring>
struct PartitionedAllReduce : detail::allreduce_builder<Algorithm, detail::rows_axis> {};

/// `Replicate, AllReduce<Algorithm>, Partition<Axis>` with Axis drawn from `Seed` and the
/// variable's shape among its axes of at least two entries (axis 0 for sparse gradients).
/// Variables of one shape share an axis for a given seed.
template <std::uint64_t Seed, class Algorithm = Ring>
struct RandomAxisPartitionAllReduce : detail::allreduce_builder<Algorithm, detail::seeded_axis<Seed>> {};

/// Dense gradients are all-reduced (`AllReduce<Algorithm>`), sparse ones go to one
/// least-loaded parameter-server shard (`PSLoadBalancing<ConsistencyPolicy>`).
template <class Algorithm = Ring, class ConsistencyPolicy = Consistency<BSP>>
struct Parallax {
  static constexpr server_assignment servers = server_assignment::least_loaded;
  template <VariableTraits V>
  using strategy_for =
      std::conditional_t<V::sparse, typename PSLoadBalancing<ConsistencyPolicy>::template strategy_for<V>,
                         typename AllReduce<Algorithm>::template strategy_for<V>>;

  static strategy_descriptor describe(std::span<const std::size_t> extents, bool sparse) {
    return sparse ? PSLoadBalancing<ConsistencyPolicy>::describe(extents, sparse) : AllReduce<Algorithm>::describe(extents, sparse);
  }
};

}  // namespace builder

/// The strategy builder `B` chooses for a variable with traits `V`, e.g.
/// `builder_strategy_t<builder::PartitionedPS<>, variable_traits<dims<784, 256>>>` is
/// `Strategy<PS<2>, Partition<0>>`.
template <StrategyBuilder B, VariableTraits V>
using builder_strategy_t = typename detail::checked_builder_strategy<B, V>::type;

}  // namespace strata
