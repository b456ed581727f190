// expect: Axis must be a non-negative dimension index
// expect: strata::Partition<-1>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Partition<-1>>;
S* s;
