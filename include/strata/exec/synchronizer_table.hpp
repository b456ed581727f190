#pragma once
// Which synchronizer implements a strategy on a backend: one partial specialization per
// supported combination. Everything else lands on the primary template, whose error names
// the strategy and the backend.
#include "strata/comm/communicator.hpp"
#include "strata/detail/always_false.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/strategy/strategy.hpp"
#include "strata/sync/dense_allreduce.hpp"
#include "strata/sync/ps_synchronizer.hpp"
#include "strata/sync/sparse_allgather.hpp"
#include "strata/sync/synchronizer.hpp"

namespace strata {

namespace diagnostic {
// Incomplete on purpose: the compiler prints both arguments when it is used.
template <class Strategy, class Backend>
struct no_synchronizer_for_strategy_on_backend;
}  // namespace diagnostic

template <ValidStrategy S, Collectives C, Optimizer O>
struct synchronizer_for {
  static_assert(detail::always_false<S, C>,
                "strata has no synchronizer for this strategy on this backend yet; the incomplete type "
                "diagnostic::no_synchronizer_for_strategy_on_backend<Strategy, Backend> below names both. The supported "
                "combinations are listed in docs/compatibility.md");
  using type = decltype(sizeof(diagnostic::no_synchronizer_for_strategy_on_backend<S, C>));
};

/// Replicate + AllReduce, dense gradients, any codec, partitioned or not: bucketed data
/// parallelism.
template <ValidStrategy S, Collectives C, Optimizer O>
  requires sync::DenseAllReduceStrategy<S>
struct synchronizer_for<S, C, O> {
  using type = sync::dense_allreduce_synchronizer<S, C, O>;
};

/// Replicate + AllReduce with SparseRows: an all-gather of each rank's touched rows.
template <ValidStrategy S, Collectives C, Optimizer O>
  requires sync::SparseAllGatherStrategy<S>
struct synchronizer_for<S, C, O> {
  using type = sync::sparse_allgather_synchronizer<S, C, O>;
};

/// The parameter server's servers find requests by probing (Probing); a backend that cannot
/// probe is refused with this sentence.
template <class C>
concept ProbingForParameterServer =
    Probing<C> ||
    detail::unsatisfied<"PS<N> needs a communicator that can probe, since requests arrive unasked; NCCL cannot (it "
                        "receives only what was posted): keep PS<N> variables on a host backend (mpi, loopback, or "
                        "nccl::context's parameter_server()), or train them with staged_executor">();

/// PS<N>, dense or sparse rows, any consistency: the parameter server.
template <ValidStrategy S, Collectives C, Optimizer O>
  requires sync::ParameterServerStrategy<S>
struct synchronizer_for<S, C, O> {
  static_assert(ProbingForParameterServer<C>);
  using type = sync::ps_synchronizer<S, C, O>;
};

template <ValidStrategy S, Collectives C, Optimizer O>
using synchronizer_t = typename synchronizer_for<S, C, O>::type;

namespace detail {
/// Every entry of the table models the Synchronizer concept (sync/synchronizer.hpp).
template <class S, class C, class O>
concept TableEntryIsSynchronizer = sync::Synchronizer<synchronizer_t<S, C, O>, O>;
}  // namespace detail

}  // namespace strata
