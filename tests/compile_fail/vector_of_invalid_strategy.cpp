// expect: StaleConsistencyNeedsParameterServer
// expect: Consistency<ASP> and Consistency<SSP<S>> need placement PS<N>
#include "strata/strategy/strategy.hpp"
using namespace strata;
using S = canonical_strategy<Replicate, Unpartitioned, AllReduce<Native>, Compress<None>, Consistency<ASP>, DenseGradient>;
using V = vector_strategy_t<S>;
V* v;
