// expect: Compress<FP16> and Compress<BF16> narrow fp32 gradients for the wire
#include "strata/model/device_variable.hpp"
using S = strata::Strategy<strata::Compress<strata::FP16>>;
auto v = strata::device_variable<S>("w", strata::device_span<strata::half>(), strata::device_span<strata::half>(), {1});
