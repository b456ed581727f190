// expect: ShardedParameterServerNeedsPartition
// expect: strata::PS<4>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<4>>;
S* s;
