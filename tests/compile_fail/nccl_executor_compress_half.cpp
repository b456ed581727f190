// expect: Compress<FP16> and Compress<BF16> narrow fp32 gradients for the wire
#include <span>

#include "strata/model/device_variable.hpp"
using S = strata::Strategy<strata::Compress<strata::FP16>>;
auto v = strata::device_variable<S>("w", std::span<strata::half>(), std::span<strata::half>(), {1});
