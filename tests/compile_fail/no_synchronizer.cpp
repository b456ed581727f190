// A valid strategy with no synchronizer on the backend names both and the table in docs.
// expect: strata has no synchronizer for this strategy on this backend yet
// expect: no_synchronizer_for_strategy_on_backend<strata::canonical_strategy<strata::Replicate
// expect: strata::mpi::communicator
// expect: docs/compatibility.md
#include "strata/strata.hpp"
void build(strata::mpi::context& ctx, std::vector<float>& w, std::vector<float>& g) {
  // Compressed rows of a replicated sparse variable have no synchronizer yet.
  using S = strata::Strategy<strata::AllReduce<strata::Ring>, strata::SparseRows, strata::Compress<strata::FP16>>;
  auto m = strata::make_model(strata::variable<S>("w", w, g, {4}));
  auto exec = strata::make_executor(ctx, m, strata::optim::sgd{});
}
