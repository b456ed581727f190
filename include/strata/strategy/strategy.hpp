#pragma once
// Strategy<Policies...>: policies in any order -> one canonical type per distinct strategy.
//
// Checks run in three levels, each naming its culprit:
//   1. each policy static_asserts its own arguments (policy/*.hpp);
//   2. the list: every type must be a policy, at most one per category;
//   3. the combination: one named concept per rule in rules.hpp.
#include <type_traits>

#include "strata/detail/fixed_string.hpp"
#include "strata/strategy/descriptor.hpp"
#include "strata/strategy/rules.hpp"

namespace strata {

/// The one type all spellings of a strategy normalize to.
template <class Placement, class PartitionPolicy, class Collective, class Compression, class ConsistencyPolicy,
          class Gradient, class Tensor = WholeTensor>
struct canonical_strategy {
  using placement = Placement;
  using partition = PartitionPolicy;
  using collective = Collective;
  using compression = Compression;
  using consistency = ConsistencyPolicy;
  using gradient = Gradient;
  using tensor = Tensor;
  static constexpr strategy_descriptor descriptor =
      describe<Placement, PartitionPolicy, Collective, Compression, ConsistencyPolicy, Gradient, Tensor>();
};

template <class S>
inline constexpr bool is_canonical_strategy = false;
template <class... Ps>
inline constexpr bool is_canonical_strategy<canonical_strategy<Ps...>> = true;

/// A type produced by Strategy<...>.
template <class S>
concept CanonicalStrategy = is_canonical_strategy<S>;

// Level 3: one concept per cross-policy rule (rules.hpp). The rule's sentence sits in the
// failing expression so the compiler prints it, and the "[with S = ...]" note shows the
// offending policies.
template <class S, class Rule>
concept Obeys = Rule::holds(S::descriptor) || detail::unsatisfied<Rule::message_text>();

template <class S>
concept StaleConsistencyNeedsParameterServer = Obeys<S, rules::StaleConsistencyNeedsParameterServer>;
template <class S>
concept AllReduceNeedsReplicate = Obeys<S, rules::AllReduceNeedsReplicate>;
template <class S>
concept ReplicateNeedsAllReduce = Obeys<S, rules::ReplicateNeedsAllReduce>;
template <class S>
concept ShardedParameterServerNeedsPartition = Obeys<S, rules::ShardedParameterServerNeedsPartition>;
template <class S>
concept PartitionShardsFollowParameterServer = Obeys<S, rules::PartitionShardsFollowParameterServer>;
template <class S>
concept SparseRowsPartitionByRows = Obeys<S, rules::SparseRowsPartitionByRows>;
template <class S>
concept LowRankCompressionNeedsDenseGradient = Obeys<S, rules::LowRankCompressionNeedsDenseGradient>;
template <class S>
concept TopKNeedsDenseGradient = Obeys<S, rules::TopKNeedsDenseGradient>;
template <class S>
concept TensorParallelNeedsReplicate = Obeys<S, rules::TensorParallelNeedsReplicate>;
template <class S>
concept SparseRowsSplitByRows = Obeys<S, rules::SparseRowsSplitByRows>;

/// Every rule, as a conjunction so that a compiler names the first one broken. A test checks
/// that it agrees with rules::all on every enumerated descriptor.
template <class S>
concept ObeysEveryRule = StaleConsistencyNeedsParameterServer<S> && AllReduceNeedsReplicate<S> &&
                         ReplicateNeedsAllReduce<S> && ShardedParameterServerNeedsPartition<S> &&
                         PartitionShardsFollowParameterServer<S> && SparseRowsPartitionByRows<S> &&
                         LowRankCompressionNeedsDenseGradient<S> && TopKNeedsDenseGradient<S> &&
                         TensorParallelNeedsReplicate<S> && SparseRowsSplitByRows<S>;

/// One strategy has one type: a hand-made canonical_strategy<PS<N>, Partition<Axis, N>, ...>
/// is the strategy of Partition<Axis> spelled a second way (canonical_form).
template <class S>
concept CanonicalSpelling =
    S::descriptor == canonical_form(S::descriptor) ||
    detail::unsatisfied<"under PS<N> a partition is written Partition<Axis>, not Partition<Axis, N>: one strategy has "
                        "one type; form it with Strategy<...>">();

/// A canonical strategy that obeys every rule, in its one spelling: what models, variables
/// and executors take. Strategy<...> only forms valid ones; a canonical_strategy<...>
/// spelled out by hand is checked here.
template <class S>
concept ValidStrategy = CanonicalStrategy<S> && ObeysEveryRule<S> && CanonicalSpelling<S>;

namespace diagnostic {
// Incomplete on purpose: the compiler's "incomplete type" error spells out the arguments.
template <class T>
struct not_a_strata_policy;
template <class Category, class... PoliciesOfThatCategory>
struct more_than_one_policy_for_category;
}  // namespace diagnostic

namespace detail {

template <class P>
consteval bool check_is_policy() {
  if constexpr (Policy<P>) {
    return true;
  } else {
    static_assert(Policy<P>,
                  "Strategy<...>: every argument must be a strata policy: Replicate, PS<N>, Partition<Axis>, "
                  "AllReduce<Algorithm>, Compress<Codec>, Consistency<Model>, SparseRows, TensorParallel<Axis>");
    return sizeof(diagnostic::not_a_strata_policy<P>) > 0;
  }
}

template <class Category, class P>
inline constexpr int in_category = std::is_same_v<category_of<P>, Category> ? 1 : 0;

template <class Category, class... Ps>
struct filter_category;  // -> diagnostic::more_than_one_policy_for_category<Category, matches...>
template <class Category>
struct filter_category<Category> {
  using type = diagnostic::more_than_one_policy_for_category<Category>;
};
template <class Category, class P, class... Ps>
struct filter_category<Category, P, Ps...> {
  template <class... Ms>
  static auto prepend(diagnostic::more_than_one_policy_for_category<Category, Ms...>*)
      -> diagnostic::more_than_one_policy_for_category<Category, P, Ms...>;
  using rest = typename filter_category<Category, Ps...>::type;
  using type = std::conditional_t<in_category<Category, P> == 1, decltype(prepend(static_cast<rest*>(nullptr))), rest>;
};

template <class Category, class... Ps>
consteval bool check_at_most_one() {
  if constexpr ((in_category<Category, Ps> + ... + 0) <= 1) {
    return true;
  } else {
    static_assert((in_category<Category, Ps> + ... + 0) <= 1,
                  "Strategy<...>: at most one policy per category (placement, partition, collective, compression, "
                  "consistency, gradient, tensor); the incomplete type below names the category and the competing "
                  "policies");
    return sizeof(typename filter_category<Category, Ps...>::type) > 0;
  }
}

template <class Category, class Default, class... Ps>
struct select_policy {
  using type = Default;
};
template <class Category, class Default, class P, class... Ps>
struct select_policy<Category, Default, P, Ps...>
    : std::conditional_t<in_category<Category, P> == 1, std::type_identity<P>, select_policy<Category, Default, Ps...>> {
};
template <class Category, class Default, class... Ps>
using select_t = typename select_policy<Category, Default, Ps...>::type;

/// Replicated variables default to the library's own all-reduce; PS variables use none.
template <class Placement>
using default_collective = std::conditional_t<std::is_same_v<Placement, Replicate>, AllReduce<Native>, NoCollective>;

/// Under PS<N> a partition's shard count is N's, so Partition<Axis, N> is spelled
/// Partition<Axis>: one strategy, one type (canonical_form does the same to descriptors).
template <class Placement, class PartitionPolicy>
struct canonical_partition : std::type_identity<PartitionPolicy> {};
template <int N, int Axis>
struct canonical_partition<PS<N>, Partition<Axis, N>> : std::type_identity<Partition<Axis>> {};

template <class... Ps>
struct make_strategy_from_policies {
  using placement = select_t<category::placement, Replicate, Ps...>;
  using type = canonical_strategy<placement,
                                  typename canonical_partition<placement, select_t<category::partition, Unpartitioned, Ps...>>::type,
                                  select_t<category::collective, default_collective<placement>, Ps...>,
                                  select_t<category::compression, Compress<None>, Ps...>,
                                  select_t<category::consistency, Consistency<BSP>, Ps...>,
                                  select_t<category::gradient, DenseGradient, Ps...>,
                                  select_t<category::tensor, WholeTensor, Ps...>>;
  static_assert(ObeysEveryRule<type>);
  static_assert(type::descriptor == canonical_form(type::descriptor), "a strategy type and its canonical string disagree");
};

template <class... Ps>
struct make_strategy {
  static_assert((check_is_policy<Ps>() && ...));
};
template <class... Ps>
  requires(Policy<Ps> && ...)
struct make_strategy<Ps...> {
  static_assert(check_at_most_one<category::placement, Ps...>() && check_at_most_one<category::partition, Ps...>() &&
                check_at_most_one<category::collective, Ps...>() && check_at_most_one<category::compression, Ps...>() &&
                check_at_most_one<category::consistency, Ps...>() && check_at_most_one<category::gradient, Ps...>() &&
                check_at_most_one<category::tensor, Ps...>());
  using type = typename make_strategy_from_policies<Ps...>::type;
};

}  // namespace detail

/// A strategy: policies in any order, defaults filled in, validated, canonical.
/// `Strategy<A, B>` and `Strategy<B, A>` are the same type.
template <class... Policies>
using Strategy = typename detail::make_strategy<Policies...>::type;

namespace detail {
/// A vector has only axis 0: a partition along another axis becomes one along axis 0 where
/// the placement needs a partition (PS<N>, N > 1), and none elsewhere.
template <CanonicalStrategy S>
using vector_partition =
    std::conditional_t<(S::descriptor.partition_axis <= 0), typename S::partition,
                       std::conditional_t<(S::descriptor.placement == placement_kind::ps && S::descriptor.ps_shards > 1),
                                          Partition<0>, Unpartitioned>>;
/// A vector keeps a split along axis 0 (a column-parallel layer's bias is split with its
/// rows) and is whole otherwise (a row-parallel layer's bias follows the sum).
template <CanonicalStrategy S>
using vector_tensor = std::conditional_t<(S::descriptor.tensor_axis <= 0), typename S::tensor, WholeTensor>;
}  // namespace detail

/// The strategy for vectors (biases) that sit next to matrices declared with `S`: `S` less
/// what needs a second dimension (PowerSGD, which factorizes matrices; a partition or a
/// tensor-parallel split along an axis other than 0), formed and checked like any Strategy<...>.
template <ValidStrategy S>
using vector_strategy_t = typename detail::make_strategy_from_policies<
    typename S::placement, detail::vector_partition<S>, typename S::collective,
    std::conditional_t<S::descriptor.codec == codec_kind::powersgd, Compress<None>, typename S::compression>,
    typename S::consistency, typename S::gradient, detail::vector_tensor<S>>::type;

}  // namespace strata
