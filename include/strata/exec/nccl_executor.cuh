#pragma once
// The nccl backend's executor: the device executor (exec/device_executor.hpp) over CUDA
// memory, streams and kernels and an NCCL communicator (cuda::space):
//
//   auto exec = make_executor(nccl::communicator::single_process(0), {device_variable<Dense>(...), ...},
//                             optim::adam{.lr = 1e-3f});
//   for (...) {
//     exec.parameters_ready(compute);               // forward waits for the last update
//     forward_backward(compute, [&](std::size_t v) { exec.grad_ready(v, compute); });
//     exec.step(compute);                           // enqueued; returns at once
//   }
//   exec.wait();                                    // the host waits (with a deadline)
//
// Host code, compiled by nvcc because it launches strata's kernels; like the nccl backend,
// it builds its messages without fmt.
#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "strata/comm/nccl/nccl.hpp"
#include "strata/cuda/buffer.cuh"
#include "strata/cuda/cast.cuh"
#include "strata/cuda/device.cuh"
#include "strata/cuda/optimizer.cuh"
#include "strata/cuda/pack.cuh"
#include "strata/exec/device_executor.hpp"

namespace strata {

namespace cuda {

/// A CUDA event owned by an object, without timing (cheaper to record).
class owned_event {
 public:
  owned_event() { STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~owned_event() {
    if (event_) static_cast<void>(cudaEventDestroy(event_));  // CUDA releases it once it completes
  }
  owned_event(owned_event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  owned_event& operator=(owned_event&&) = delete;
  operator cudaEvent_t() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// The CUDA device and NCCL as the device executor's space (exec/device_executor.hpp).
struct space {
  static constexpr const char* executor_name = "nccl_executor";
  using communicator = nccl::communicator;
  using stream_t = cudaStream_t;
  using event = owned_event;
  template <class T>
  using device_buffer = cuda::device_buffer<T>;
  template <class T>
  using bucket_packer = cuda::bucket_packer<T>;

  /// `during()` names the call in an error; built only then, since grad_ready and step()
  /// record on every step.
  template <class During>
  static void record(event& e, stream_t stream, During&& during, int rank) {
    if (const cudaError_t status = cudaEventRecord(e, stream); status != cudaSuccess)
      nccl::detail::check_cuda(status, "cudaEventRecord (" + during() + ")", rank);
  }
  template <class During>
  static void wait(stream_t on, const event& e, During&& during, int rank) {
    if (const cudaError_t status = cudaStreamWaitEvent(on, e, 0); status != cudaSuccess)
      nccl::detail::check_cuda(status, "cudaStreamWaitEvent (" + during() + ")", rank);
  }
  static void zero(void* data, std::size_t bytes, stream_t stream) {
    if (bytes != 0) STRATA_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, stream));
  }
  static void copy(void* to, const void* from, std::size_t bytes, stream_t stream, const char* what, int rank) {
    nccl::detail::check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream),
                             std::string("cudaMemcpyAsync (") + what + ")", rank);
  }
  template <class W>
  static void scaled_widen(std::span<W> in, std::span<float> out, float scale, stream_t stream) {
    cuda::scaled_widen<W>(in, out, scale, stream);
  }
  template <class W>
  static void scaled_narrow(std::span<float> in, std::span<W> out, float scale, stream_t stream) {
    cuda::scaled_narrow<W>(in, out, scale, stream);
  }
  template <class W>
  static void accumulate(std::span<W> in, std::span<float> sum, stream_t stream) {
    cuda::accumulate<W>(in, sum, stream);
  }
  static void sgd_update(std::span<float> param, std::span<const float> grad, std::span<float> velocity,
                         const optim::sgd_element& op, stream_t stream, float grad_scale) {
    cuda::sgd_update(param, grad, velocity, op, stream, grad_scale);
  }
  static void adam_update(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                          const optim::adam_element& op, stream_t stream, float grad_scale) {
    cuda::adam_update(param, grad, m, v, op, stream, grad_scale);
  }

  static void require_current_device(const communicator& comm) {
    int current = 0;
    nccl::detail::check_cuda(cudaGetDevice(&current), "cudaGetDevice", comm.rank());
    if (current != comm.device())
      throw usage_error("nccl_executor on rank " + std::to_string(comm.rank()) + ": the current CUDA device is " +
                        std::to_string(current) + " but the communicator's is " + std::to_string(comm.device()) +
                        "; call cudaSetDevice(" + std::to_string(comm.device()) + ") first");
  }
  static void require_device_memory(const communicator& comm, const void* data, std::size_t bytes,
                                    const std::string& what) {
    cuda::require_device_memory(data, bytes, comm.device(), what);
  }
};

}  // namespace cuda

/// Data parallelism on the nccl backend (exec/device_executor.hpp).
template <class O>
using nccl_executor = device_executor<cuda::space, O>;
using nccl_executor_options = device_executor_options<cudaStream_t>;

/// Builds the executor for device variables on the nccl backend (`comm`: a rank's
/// communicator, e.g. nccl::context::collectives() or communicator::single_process()).
/// Collective, as the constructor. The host variables' make_executor is in executor.hpp.
template <detail::DeviceOptimizer O>
nccl_executor<O> make_executor(nccl::communicator comm, std::vector<device_variable_binding> variables, O optimizer,
                               nccl_executor_options options = {}) {
  return nccl_executor<O>(std::move(comm), std::move(variables), std::move(optimizer), options);
}

/// The same from the nccl backend's context (nccl::context, comm/nccl/mpi_bootstrap.hpp),
/// as the host executor is built from mpi::context: device variables go to its
/// collectives.
template <class Context, detail::DeviceOptimizer O>
  requires requires(Context& context) {
    { context.collectives() } -> std::same_as<nccl::communicator&>;
  }
nccl_executor<O> make_executor(Context& context, std::vector<device_variable_binding> variables, O optimizer,
                               nccl_executor_options options = {}) {
  return make_executor(context.collectives(), std::move(variables), std::move(optimizer), options);
}

}  // namespace strata
