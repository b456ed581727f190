// expect: MemorySpace: device_variable binds GPU memory, given as device_span<T>
#include <span>
#include <vector>

#include "strata/model/device_variable.hpp"
// A std::span is host memory: the nccl executor would hand it to NCCL and its kernels.
void declare(std::vector<float>& w, std::vector<float>& g) {
  auto v = strata::device_variable<strata::Strategy<>>("w", std::span<float>(w), std::span<float>(g), {2});
}
