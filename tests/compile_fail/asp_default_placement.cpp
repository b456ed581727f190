// The default placement is Replicate, so ASP alone is rejected too.
// expect: StaleConsistencyNeedsParameterServer
// expect: strata::Consistency<strata::ASP>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Consistency<strata::ASP>>;
S* s;
