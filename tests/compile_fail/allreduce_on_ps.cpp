// expect: AllReduceNeedsReplicate
// expect: strata::PS<1>, strata::AllReduce<strata::Ring>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<1>, strata::AllReduce<strata::Ring>>;
S* s;
