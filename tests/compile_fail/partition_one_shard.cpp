// expect: Shards must be at least 2
// expect: strata::Partition<0, 1>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Partition<0, 1>>;
S* s;
