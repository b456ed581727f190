// A type that is not a policy is named in the error.
// expect: not_a_strata_policy<int>
// expect: every argument must be a strata policy
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Replicate, int>;
S* s;
