#pragma once
// Cross-policy rules, each written once: its name, the sentence a user reads when a strategy
// breaks it, and a predicate on a descriptor. The compile-time concepts in strategy.hpp
// (Obeys<S, Rule>) and the run-time check of parsed strings (rules::all) both use them.
#include <array>
#include <string_view>
#include <tuple>

#include "strata/detail/fixed_string.hpp"
#include "strata/strategy/descriptor.hpp"

namespace strata::rules {

/// One rule. Name and message are template arguments so that a compiler that reports a
/// failed `Obeys<S, Rule>` prints both, spelled out.
template <detail::fixed_string Name, detail::fixed_string Message, bool (*Holds)(const strategy_descriptor&)>
struct rule {
  static constexpr detail::fixed_string message_text = Message;
  static constexpr std::string_view name{Name.text};
  static constexpr std::string_view message{Message.text};
  static constexpr bool holds(const strategy_descriptor& d) { return Holds(d); }
};

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
constexpr bool sparse_rows_partition_by_rows(const strategy_descriptor& d) { return !d.sparse_rows || d.partition_axis <= 0; }
constexpr bool low_rank_compression_needs_dense_gradient(const strategy_descriptor& d) {
  return !d.sparse_rows || d.codec != codec_kind::powersgd;
}
constexpr bool top_k_needs_dense_gradient(const strategy_descriptor& d) { return !d.sparse_rows || d.codec != codec_kind::topk; }
constexpr bool tensor_parallel_needs_replicate(const strategy_descriptor& d) {
  return !d.tensor_parallel() || d.placement == placement_kind::replicate;
}
constexpr bool sparse_rows_split_by_rows(const strategy_descriptor& d) { return !d.sparse_rows || d.tensor_axis <= 0; }

// Every rule a strategy must obey, in the order they are checked: name, predicate, sentence.
// A list macro because GCC before 14 prints only a string literal as a static_assert's
// message: the one literal here is the first line of the compile error (strategy.hpp) and the
// run-time message of a parsed string (rules::all).
#define STRATA_EVERY_RULE(RULE)                                                                                       \
  RULE(StaleConsistencyNeedsParameterServer, stale_consistency_needs_parameter_server,                               \
       "Consistency<ASP> and Consistency<SSP<S>> need placement PS<N>; replicated variables are synchronous")        \
  RULE(AllReduceNeedsReplicate, allreduce_needs_replicate,                                                           \
       "AllReduce<...> reduces replicated gradients; it needs placement Replicate, not PS<N>")                       \
  RULE(ReplicateNeedsAllReduce, replicate_needs_allreduce,                                                           \
       "replicated variables are kept equal by an all-reduce; NoCollective needs placement PS<N>")                   \
  RULE(ShardedParameterServerNeedsPartition, sharded_parameter_server_needs_partition,                               \
       "PS<N> with N > 1 needs Partition<Axis> to say how the variable is split")                                    \
  RULE(PartitionShardsFollowParameterServer, partition_shards_follow_parameter_server,                               \
       "under PS<N> write Partition<Axis> (or Partition<Axis, N>); the shard count comes from PS<N>")                \
  RULE(SparseRowsPartitionByRows, sparse_rows_partition_by_rows,                                                     \
       "SparseRows variables can only be partitioned by rows: Partition<0>")                                         \
  RULE(LowRankCompressionNeedsDenseGradient, low_rank_compression_needs_dense_gradient,                              \
       "Compress<PowerSGD<R>> needs dense gradients; remove SparseRows or the codec")                                \
  RULE(TopKNeedsDenseGradient, top_k_needs_dense_gradient,                                                           \
       "Compress<TopK<R>> needs dense gradients; SparseRows gradients are sparse already")                           \
  RULE(TensorParallelNeedsReplicate, tensor_parallel_needs_replicate,                                                \
       "TensorParallel<Axis> parts are replicated over their data group and averaged by an all-reduce; placing "     \
       "them on PS<N> is not supported yet: use Replicate")                                                          \
  RULE(SparseRowsSplitByRows, sparse_rows_split_by_rows,                                                             \
       "SparseRows tables are split over the tensor group by rows (a vocabulary-parallel embedding): "               \
       "TensorParallel<0>")

#define STRATA_DECLARE_RULE(Name, holds, sentence) using Name = rule<#Name, sentence, holds>;
STRATA_EVERY_RULE(STRATA_DECLARE_RULE)
#undef STRATA_DECLARE_RULE

/// Every rule, as a type list. ValidStrategy (strategy.hpp) names each of them too; a test
/// checks the two lists agree.
#define STRATA_RULE_AS_TUPLE(Name, holds, sentence) std::tuple<Name>{},
using every_rule = decltype(std::tuple_cat(STRATA_EVERY_RULE(STRATA_RULE_AS_TUPLE) std::tuple<>{}));
#undef STRATA_RULE_AS_TUPLE

/// A rule as run-time data.
struct checked_rule {
  std::string_view name;
  std::string_view message;
  bool (*holds)(const strategy_descriptor&);
};

/// The run-time form of a list of rules.
template <class Rules>
inline constexpr auto table = []<class... Rs>(std::tuple<Rs...>*) {
  return std::array<checked_rule, sizeof...(Rs)>{checked_rule{Rs::name, Rs::message, &Rs::holds}...};
}(static_cast<Rules*>(nullptr));

/// Every rule with the sentence a user reads when a strategy string breaks it.
inline constexpr const auto& all = table<every_rule>;

/// The first rule of `Rules` that `d` breaks, or nullptr.
template <class Rules = every_rule>
constexpr const checked_rule* first_broken(const strategy_descriptor& d) {
  for (const checked_rule& r : table<Rules>)
    if (!r.holds(d)) return &r;
  return nullptr;
}

}  // namespace strata::rules
