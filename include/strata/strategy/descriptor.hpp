#pragma once
// The run-time description of a strategy: what a canonical strategy type knows, as plain
// values. It is what the canonical string prints and parses, what strategy rules check, and
// what ranks compare in their start-up handshake.
#include "strata/policy/policies.hpp"

namespace strata {

enum class placement_kind { replicate, ps };
enum class collective_kind { none, native, ring, tree, hierarchical };
enum class codec_kind { none, fp16, bf16, topk, powersgd };
enum class consistency_kind { bsp, asp, ssp };

struct strategy_descriptor {
  placement_kind placement = placement_kind::replicate;
  int ps_shards = 0;
  int partition_axis = -1;  ///< -1: unpartitioned
  int partition_shards = 0; ///< 0: decided at run time
  collective_kind collective = collective_kind::native;
  codec_kind codec = codec_kind::none;
  double topk_ratio = 0.0;
  int powersgd_rank = 0;
  bool error_feedback = false;
  consistency_kind consistency = consistency_kind::bsp;
  int staleness = 0;
  bool sparse_rows = false;
  int tensor_axis = -1;  ///< -1: whole on every rank of the tensor group

  constexpr bool partitioned() const { return partition_axis >= 0; }
  constexpr bool tensor_parallel() const { return tensor_axis >= 0; }
  friend constexpr bool operator==(const strategy_descriptor&, const strategy_descriptor&) = default;
};

namespace detail {

// One overload per policy: record what the policy says. Unknown types have no overload,
// but Strategy<...> rejects them before describing.
constexpr void describe_into(strategy_descriptor& d, Replicate) { d.placement = placement_kind::replicate; }
template <int N>
constexpr void describe_into(strategy_descriptor& d, PS<N>) {
  d.placement = placement_kind::ps;
  d.ps_shards = N;
}
constexpr void describe_into(strategy_descriptor&, Unpartitioned) {}
template <int Axis, int Shards>
constexpr void describe_into(strategy_descriptor& d, Partition<Axis, Shards>) {
  d.partition_axis = Axis;
  d.partition_shards = Shards;
}
constexpr void describe_into(strategy_descriptor& d, NoCollective) { d.collective = collective_kind::none; }
constexpr collective_kind collective_of(Native) { return collective_kind::native; }
constexpr collective_kind collective_of(Ring) { return collective_kind::ring; }
constexpr collective_kind collective_of(Tree) { return collective_kind::tree; }
constexpr collective_kind collective_of(Hierarchical) { return collective_kind::hierarchical; }
template <class A>
constexpr void describe_into(strategy_descriptor& d, AllReduce<A>) { d.collective = collective_of(A{}); }

constexpr void describe_codec(strategy_descriptor& d, None) { d.codec = codec_kind::none; }
constexpr void describe_codec(strategy_descriptor& d, FP16) { d.codec = codec_kind::fp16; }
constexpr void describe_codec(strategy_descriptor& d, BF16) { d.codec = codec_kind::bf16; }
template <double R>
constexpr void describe_codec(strategy_descriptor& d, TopK<R>) {
  d.codec = codec_kind::topk;
  d.topk_ratio = R;
}
template <int R>
constexpr void describe_codec(strategy_descriptor& d, PowerSGD<R>) {
  d.codec = codec_kind::powersgd;
  d.powersgd_rank = R;
}
template <class C, class F>
constexpr void describe_into(strategy_descriptor& d, Compress<C, F>) {
  describe_codec(d, C{});
  d.error_feedback = F::enabled;
}

constexpr void describe_model(strategy_descriptor& d, BSP) { d.consistency = consistency_kind::bsp; }
constexpr void describe_model(strategy_descriptor& d, ASP) { d.consistency = consistency_kind::asp; }
template <int S>
constexpr void describe_model(strategy_descriptor& d, SSP<S>) {
  d.consistency = consistency_kind::ssp;
  d.staleness = S;
}
template <class M>
constexpr void describe_into(strategy_descriptor& d, Consistency<M>) { describe_model(d, M{}); }

constexpr void describe_into(strategy_descriptor& d, DenseGradient) { d.sparse_rows = false; }
constexpr void describe_into(strategy_descriptor& d, SparseRows) { d.sparse_rows = true; }

constexpr void describe_into(strategy_descriptor& d, WholeTensor) { d.tensor_axis = -1; }
template <int Axis>
constexpr void describe_into(strategy_descriptor& d, TensorParallel<Axis>) { d.tensor_axis = Axis; }

}  // namespace detail

/// The one spelling of `d`'s strategy: under PS<N> a partition's shard count is N's, and
/// Partition<Axis, N> is written Partition<Axis>.
constexpr strategy_descriptor canonical_form(strategy_descriptor d) {
  if (d.placement == placement_kind::ps && d.partition_shards == d.ps_shards) d.partition_shards = 0;
  return d;
}

/// The descriptor of a list of policies (each category given at most once).
template <class... Policies>
constexpr strategy_descriptor describe() {
  strategy_descriptor d;
  (detail::describe_into(d, Policies{}), ...);
  return d;
}

}  // namespace strata
