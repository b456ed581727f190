// expect: NcclStrategy
// expect: the nccl executor runs AllReduce<Native> (ncclAllReduce) only
#include "strata/model/device_variable.hpp"
using S = strata::Strategy<strata::AllReduce<strata::Ring>>;
auto v = strata::device_variable<S>("w", strata::device_span<float>(), strata::device_span<float>(), {1});
