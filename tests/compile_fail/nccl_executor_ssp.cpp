// expect: NcclStrategy
// expect: the nccl executor runs synchronous (BSP) PS<N> only
// expect: staged_executor (see docs/compatibility.md)
#include "strata/model/device_variable.hpp"
using S = strata::Strategy<strata::PS<2>, strata::Partition<0>, strata::Consistency<strata::SSP<3>>>;
auto v = strata::device_variable<S>("w", strata::device_span<float>(), strata::device_span<float>(), {2});
