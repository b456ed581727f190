// expect: StaleConsistencyNeedsParameterServer
// expect: need placement PS<N>
// expect: strata::Replicate, strata::Consistency<strata::SSP<3> >
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Replicate, strata::Consistency<strata::SSP<3>>>;
S* s;
