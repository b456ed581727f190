// expect: ShardedParameterServerNeedsPartition
// expect: PS<N> with N > 1 needs Partition<Axis> to say how the variable is split
#include <vector>
#include "strata/model/variable.hpp"
using namespace strata;
// Spelled out by hand, bypassing Strategy<...>: a variable still refuses it.
using S = canonical_strategy<PS<2>, Unpartitioned, NoCollective, Compress<None>, Consistency<BSP>, DenseGradient>;
void declare(std::vector<float>& w, std::vector<float>& g) { auto v = variable<S>("w", w, g, {4, 2}); }
