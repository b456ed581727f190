// expect: SSP<0> is BSP
// expect: strata::SSP<0>
// leads by line: 9 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<1>, strata::Consistency<strata::SSP<0>>>;
S* s;
