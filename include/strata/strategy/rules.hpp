#pragma once
// Cross-policy rules, written once as predicates on a descriptor. The compile-time concepts
// in strategy.hpp and the run-time check of parsed strings both call these.
#include <array>
#include <string_view>

#include "strata/strategy/descriptor.hpp"

namespace strata::rules {

constexpr bool stale_consistency_needs_parameter_server(const strategy_descriptor& d) {
  return d.consistency == consistency_kind::bsp || d.placement == placement_kind::ps;
}
constexpr bool allreduce_needs_replicate(const strategy_descriptor& d) {
  return d.collective == collective_kind::none || d.placement == placement_kind::replicate;
}
constexpr bool replicate_needs_allreduce(const strategy_descriptor& d) {
  return d.placement != placement_kind::replicate || d.collective != collective_kind::none;
}
constexpr bool sharded_parameter_server_needs_partition(const strategy_descriptor& d) {
  return d.placement != placement_kind::ps || d.ps_shards == 1 || d.partitioned();
}
constexpr bool partition_shards_follow_parameter_server(const strategy_descriptor& d) {
  return d.placement != placement_kind::ps || d.partition_shards == 0 || d.partition_shards == d.ps_shards;
}
constexpr bool sparse_rows_partition_by_rows(const strategy_descriptor& d) {
  return !d.sparse_rows || d.partition_axis <= 0;
}
constexpr bool low_rank_compression_needs_dense_gradient(const strategy_descriptor& d) {
  return !d.sparse_rows || d.codec != codec_kind::powersgd;
}
constexpr bool top_k_needs_dense_gradient(const strategy_descriptor& d) {
  return !d.sparse_rows || d.codec != codec_kind::topk;
}

struct rule {
  std::string_view name;
  std::string_view message;
  bool (*holds)(const strategy_descriptor&);
};

/// Every rule with the sentence a user reads when a strategy string breaks it.
inline constexpr std::array all = {
    rule{"StaleConsistencyNeedsParameterServer",
         "Consistency<ASP> and Consistency<SSP<S>> need placement PS<N>; replicated variables are synchronous",
         stale_consistency_needs_parameter_server},
    rule{"AllReduceNeedsReplicate", "AllReduce<...> reduces replicated gradients; it needs placement Replicate, not PS<N>",
         allreduce_needs_replicate},
    rule{"ReplicateNeedsAllReduce", "replicated variables are kept equal by an all-reduce; NoCollective needs placement PS<N>",
         replicate_needs_allreduce},
    rule{"ShardedParameterServerNeedsPartition", "PS<N> with N > 1 needs Partition<Axis> to say how the variable is split",
         sharded_parameter_server_needs_partition},
    rule{"PartitionShardsFollowParameterServer",
         "under PS<N> write Partition<Axis> (or Partition<Axis, N>); the shard count comes from PS<N>",
         partition_shards_follow_parameter_server},
    rule{"SparseRowsPartitionByRows", "SparseRows variables can only be partitioned by rows: Partition<0>",
         sparse_rows_partition_by_rows},
    rule{"LowRankCompressionNeedsDenseGradient", "Compress<PowerSGD<R>> needs dense gradients; remove SparseRows or the codec",
         low_rank_compression_needs_dense_gradient},
    rule{"TopKNeedsDenseGradient", "Compress<TopK<R>> needs dense gradients; SparseRows gradients are sparse already",
         top_k_needs_dense_gradient},
};

}  // namespace strata::rules
