// expect: Model must be one of BSP, ASP, SSP<S>
// expect: strata::Consistency<int>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<1>, strata::Consistency<int>>;
S* s;
