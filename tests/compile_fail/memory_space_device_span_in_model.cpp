// expect: MemorySpace: a model's variables are read by the host synchronizers
#include "strata/model/model.hpp"
// GPU memory given to the host executor's model: its synchronizers would read it on the CPU.
void declare(float* w_on_gpu, float* g_on_gpu) {
  auto m = strata::make_model(strata::variable<strata::Strategy<>>("w", strata::device_span<float>(w_on_gpu, 2),
                                                                   strata::device_span<float>(g_on_gpu, 2), {2}));
}
