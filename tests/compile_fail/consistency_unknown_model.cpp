// expect: Model must be one of BSP, ASP, SSP<S>
// expect: strata::Consistency<int>
// leads by line: 8 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<1>, strata::Consistency<int>>;
S* s;
