// expect: MemorySpace: a staged variable must live in its stage's memory
#include "strata/comm/loopback/loopback.hpp"
#include "strata/exec/staged_executor.hpp"
// A variable over GPU memory with a stage of host memory: the stage would copy from it on the CPU.
void train(strata::loopback::context& ctx, float* w_on_gpu, float* g_on_gpu) {
  strata::make_staged_executor(ctx, strata::host_stage{}, strata::optim::sgd{}, {},
                               strata::variable<strata::Strategy<strata::PS<1>>>(
                                   "w", strata::device_span<float>(w_on_gpu, 2), strata::device_span<float>(g_on_gpu, 2), {2}));
}
