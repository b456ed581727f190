// A type that is not a policy is named in the error.
// expect: every argument must be a strata policy
// expect: [with P = int]
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Replicate, int>;
S* s;
