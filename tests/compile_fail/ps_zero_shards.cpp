// expect: Shards is the number of server shards and must be at least 1
// expect: strata::PS<0>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<0>>;
S* s;
