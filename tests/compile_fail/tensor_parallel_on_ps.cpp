// expect: TensorParallelNeedsReplicate
// expect: strata::TensorParallel<0>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<2>, strata::Partition<0>, strata::TensorParallel<0>>;
S* s;
