// expect: ReplicateNeedsAllReduce
// expect: strata::Replicate, strata::NoCollective
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Replicate, strata::NoCollective>;
S* s;
