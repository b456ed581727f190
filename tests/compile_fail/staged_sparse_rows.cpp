// expect: staged_executor stages dense gradients
#include <span>

#include "strata/comm/loopback/loopback.hpp"
#include "strata/exec/staged_executor.hpp"
#include "strata/optim/sgd.hpp"
using S = strata::Strategy<strata::PS<2>, strata::Partition<0>, strata::SparseRows>;
void stage_a_table(strata::loopback::context& ctx, std::span<float> table) {
  strata::make_staged_executor(ctx, strata::host_stage{}, strata::optim::sgd{}, {},
                               strata::variable<S>("emb", table, {}, {8, 4}));
}
