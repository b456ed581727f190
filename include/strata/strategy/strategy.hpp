#pragma once
// Strategy<Policies...>: policies in any order -> one canonical type per distinct strategy.
//
// Checks run in three levels, each naming its culprit:
//   1. each policy static_asserts its own arguments (policy/*.hpp);
//   2. the list: every type must be a policy, at most one per category;
//   3. the combination: one named concept per rule in rules.hpp.
#include <type_traits>

// The policies first: a policy's own argument check then shows a shorter include chain.
#include "strata/policy/policies.hpp"
//
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
template <class Category, class... PoliciesOfThatCategory>
struct more_than_one_policy_for_category;
}  // namespace diagnostic

namespace detail {

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
inline constexpr bool at_most_one = (in_category<Category, Ps> + ... + 0) <= 1;

template <class... Ps>
inline constexpr bool at_most_one_per_category =
    at_most_one<category::placement, Ps...> && at_most_one<category::partition, Ps...> &&
    at_most_one<category::collective, Ps...> && at_most_one<category::compression, Ps...> &&
    at_most_one<category::consistency, Ps...> && at_most_one<category::gradient, Ps...> &&
    at_most_one<category::tensor, Ps...>;

/// A complete type where `Category` has at most one policy among `Ps`; otherwise the
/// incomplete more_than_one_policy_for_category<Category, competing...>, whose `sizeof` error
/// spells out the category and the competing policies.
template <class Category, class... Ps>
using competing_policies =
    std::conditional_t<at_most_one<Category, Ps...>, std::true_type, typename filter_category<Category, Ps...>::type>;
template <class... Ps>
inline constexpr bool competing_policies_named =
    sizeof(competing_policies<category::placement, Ps...>) + sizeof(competing_policies<category::partition, Ps...>) +
        sizeof(competing_policies<category::collective, Ps...>) + sizeof(competing_policies<category::compression, Ps...>) +
        sizeof(competing_policies<category::consistency, Ps...>) + sizeof(competing_policies<category::gradient, Ps...>) +
        sizeof(competing_policies<category::tensor, Ps...>) >
    0;

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

/// The canonical type of a list of policies, unchecked: defaults filled in, one per category.
template <class... Ps>
struct canonical_of {
  using placement = select_t<category::placement, Replicate, Ps...>;
  using type = canonical_strategy<placement,
                                  typename canonical_partition<placement, select_t<category::partition, Unpartitioned, Ps...>>::type,
                                  select_t<category::collective, default_collective<placement>, Ps...>,
                                  select_t<category::compression, Compress<None>, Ps...>,
                                  select_t<category::consistency, Consistency<BSP>, Ps...>,
                                  select_t<category::gradient, DenseGradient, Ps...>,
                                  select_t<category::tensor, WholeTensor, Ps...>>;
};

/// One static_assert per rule on the strategy type named `checked` in the enclosing scope,
/// its message the rule's name and sentence (GCC before 14 prints only a string literal).
/// Used where a strategy type is formed (Strategy<...>) and where a hand-spelled one enters
/// (variable<S>), so that the broken rule is the first error and not a note below a
/// concept's failure; a test holds the sentence to the first 5 lines (tests/compile_fail).
#define STRATA_CHECK_RULE(Name, holds, sentence) \
  static_assert(::strata::rules::holds(checked::descriptor), #Name ": " sentence);
#define STRATA_CHECK_EVERY_RULE STRATA_EVERY_RULE(STRATA_CHECK_RULE)

template <class... Ps>
struct make_strategy {
  static_assert((Policy<Ps> && ...),
                "Strategy<...>: every argument must be a strata policy: Replicate, PS<N>, Partition<Axis>, "
                "AllReduce<Algorithm>, Compress<Codec>, Consistency<Model>, SparseRows, TensorParallel<Axis>");
  using type = typename canonical_of<>::type;  // after the error (whose note names the type): no cascade
};

// The rules are checked in the struct that Strategy<...> names and not one level deeper:
// each level adds a "required from" line above the error. After an error the default
// strategy stands in, so that one mistake is one error and not a cascade through every
// variable, model and executor that uses the type.
template <class... Ps>
  requires(Policy<Ps> && ...)
struct make_strategy<Ps...> {
  static_assert(at_most_one_per_category<Ps...>,
                "Strategy<...>: at most one policy per category (placement, partition, collective, compression, "
                "consistency, gradient, tensor); the incomplete type in the next error names the category and the "
                "competing policies");
  static_assert(competing_policies_named<Ps...>);
  using checked = typename std::conditional_t<at_most_one_per_category<Ps...> && (arguments_accepted_of<Ps> && ...),
                                              canonical_of<Ps...>, canonical_of<>>::type;
  STRATA_CHECK_EVERY_RULE
  static_assert(checked::descriptor == canonical_form(checked::descriptor),
                "a strategy type and its canonical string disagree");
  using type = std::conditional_t<rules::first_broken(checked::descriptor) == nullptr, checked, canonical_of<>::type>;
};

}  // namespace detail

namespace detail {
/// `S` where it is valid, the default strategy where it is not: after a static_assert has
/// named the broken rule, the code that goes on compiling raises no further errors.
template <class S>
using valid_or_default = std::conditional_t<ValidStrategy<S>, S, typename canonical_of<>::type>;
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

namespace detail {
template <CanonicalStrategy S>
struct vector_strategy_of {
  using checked = S;  // a hand-spelled S is checked here, one level from the user's line
  STRATA_CHECK_EVERY_RULE
  using valid = valid_or_default<S>;
  using type = typename make_strategy<
      typename valid::placement, vector_partition<valid>, typename valid::collective,
      std::conditional_t<valid::descriptor.codec == codec_kind::powersgd, Compress<None>, typename valid::compression>,
      typename valid::consistency, typename valid::gradient, vector_tensor<valid>>::type;
};
}  // namespace detail

/// The strategy for vectors (biases) that sit next to matrices declared with `S`: `S` less
/// what needs a second dimension (PowerSGD, which factorizes matrices; a partition or a
/// tensor-parallel split along an axis other than 0), formed and checked like any Strategy<...>.
template <CanonicalStrategy S>
using vector_strategy_t = typename detail::vector_strategy_of<S>::type;

}  // namespace strata
