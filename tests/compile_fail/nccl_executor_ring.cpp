// expect: NcclStrategy
// expect: the nccl executor runs AllReduce<Native> (ncclAllReduce) only
#include <span>

#include "strata/model/device_variable.hpp"
using S = strata::Strategy<strata::AllReduce<strata::Ring>>;
auto v = strata::device_variable<S>("w", std::span<float>(), std::span<float>(), {1});
