// expect: NcclStrategy
// expect: TensorParallel<Axis> variables train with the host executor over a mesh
#include "strata/model/device_variable.hpp"
using S = strata::Strategy<strata::TensorParallel<0>>;
auto v = strata::device_variable<S>("w", strata::device_span<float>(), strata::device_span<float>(), {1});
