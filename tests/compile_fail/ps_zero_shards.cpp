// expect: Shards is the number of server shards and must be at least 1
// expect: strata::PS<0>
// leads by line: 8 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<0>>;
S* s;
