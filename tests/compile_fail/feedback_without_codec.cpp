// expect: an uncompressed gradient loses nothing to feed back
// expect: strata::Compress<strata::None, strata::ErrorFeedback>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::None, strata::ErrorFeedback>>;
S* s;
