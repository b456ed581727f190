// expect: SSP<0> is BSP
// expect: strata::SSP<0>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<1>, strata::Consistency<strata::SSP<0>>>;
S* s;
