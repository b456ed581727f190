#pragma once
// Which synchronizer implements a strategy on a backend: one partial specialization per
// supported combination. Everything else lands on the primary template, whose error names
// the strategy and the backend.
#include <type_traits>

#include "strata/comm/communicator.hpp"
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

/// No entry: the type is the incomplete diagnostic, which HasSynchronizer tests for and whose
/// `sizeof` error, raised by make_executor, names the strategy and the backend.
template <ValidStrategy S, Collectives C, Optimizer O>
struct synchronizer_for {
  using type = diagnostic::no_synchronizer_for_strategy_on_backend<S, C>;
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

namespace detail {
template <class S, class C, class O>
struct ps_synchronizer_of : std::type_identity<sync::ps_synchronizer<S, C, O>> {};
}  // namespace detail

/// PS<N>, dense or sparse rows, any consistency: the parameter server. Its servers find
/// requests by probing (Probing); a backend that cannot probe is refused with this sentence,
/// and `void` stands in after it so that the one error is not followed by others.
template <ValidStrategy S, Collectives C, Optimizer O>
  requires sync::ParameterServerStrategy<S>
struct synchronizer_for<S, C, O> {
  static_assert(Probing<C>,
                "ProbingForParameterServer: PS<N> needs a communicator that can probe, since requests arrive unasked; "
                "NCCL cannot (it receives only what was posted): keep PS<N> variables on a host backend (mpi, "
                "loopback, or nccl::context's parameter_server()), or train them with staged_executor");
  using type = typename std::conditional_t<Probing<C>, detail::ps_synchronizer_of<S, C, O>, std::type_identity<void>>::type;
};

template <ValidStrategy S, Collectives C, Optimizer O>
using synchronizer_t = typename synchronizer_for<S, C, O>::type;

/// The table has an entry for strategy `S` on communicator `C`.
template <class S, class C, class O>
concept HasSynchronizer = !std::is_same_v<synchronizer_t<S, C, O>, diagnostic::no_synchronizer_for_strategy_on_backend<S, C>>;

namespace detail {
/// Every entry of the table models the Synchronizer concept (sync/synchronizer.hpp).
template <class S, class C, class O>
concept TableEntryIsSynchronizer = !HasSynchronizer<S, C, O> || sync::Synchronizer<synchronizer_t<S, C, O>, O>;
}  // namespace detail

}  // namespace strata
