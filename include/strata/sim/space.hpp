#pragma once
// The simulated device as the device executor's space (exec/device_executor.hpp), beside
// cuda::space: the same executor code, with sim streams, events and memory
// (sim/device.hpp) and the sim backend's communicator (comm/sim/sim.hpp). Its kernels are
// the CUDA kernels' element functions (kernels/cast.hpp, optim::sgd_element,
// optim::adam_element) looped over on the stream's worker, and its bucket packer is
// kernels::pack's, so its results are the host math's.
//
//   sim::run(ranks, {}, [&](sim::communicator& comm, sim::device& gpu) {
//     sim::owned_stream compute(gpu, "compute");
//     auto exec = make_executor(comm, {device_variable<Dense>(...)}, optim::sgd{...}, {.initialized_on = compute});
//     ...
//   });
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "strata/comm/sim/sim.hpp"
#include "strata/error.hpp"
#include "strata/exec/device_executor.hpp"
#include "strata/kernels/cast.hpp"
#include "strata/kernels/pack.hpp"
#include "strata/optim/adam.hpp"
#include "strata/optim/sgd.hpp"
#include "strata/sim/device.hpp"

namespace strata::sim {

/// kernels::pack and unpack for a fixed list of device buffers, on a stream (as
/// cuda::bucket_packer).
template <class T>
class bucket_packer {
 public:
  bucket_packer(std::span<const std::span<T>> buffers, stream_t) : parts_(kernels::bucket_parts(buffers)) {}

  std::size_t size() const { return kernels::bucket_size<T>(parts_); }

  void pack(std::span<T> bucket, stream_t s) const {
    kernels::detail::require_size("sim::bucket_packer::pack", "bucket", bucket.size(), size());
    launch(s, "pack", [parts = parts_, bucket] { kernels::pack<T>(parts, bucket); });
  }
  void unpack(std::span<const T> bucket, stream_t s) const {
    kernels::detail::require_size("sim::bucket_packer::unpack", "bucket", bucket.size(), size());
    launch(s, "unpack", [parts = parts_, bucket] { kernels::unpack<T>(parts, bucket); });
  }

 private:
  std::vector<kernels::bucket_part<T>> parts_;
};

/// The simulated device and the sim backend as a device space.
struct space {
  static constexpr const char* executor_name = "sim executor";
  using communicator = sim::communicator;
  using stream_t = sim::stream_t;
  using event = sim::event;
  template <class T>
  using device_buffer = sim::device_buffer<T>;
  template <class T>
  using bucket_packer = sim::bucket_packer<T>;

  // (The executor refuses a null stream before it gets here.)
  template <class During>
  static void record(event& e, stream_t stream, During&&, int) {
    e.record(stream);
  }
  template <class During>
  static void wait(stream_t on, const event& e, During&&, int) {
    on->owner().wait_event(on, e);
  }
  static void zero(void* data, std::size_t bytes, stream_t stream) { memset_async(data, 0, bytes, stream); }
  static void copy(void* to, const void* from, std::size_t bytes, stream_t stream, const char*, int) {
    copy_async(to, from, bytes, stream);
  }
  template <class W>
  static void scaled_widen(std::span<W> in, std::span<float> out, float scale, stream_t stream) {
    kernels::detail::require_size("sim::scaled_widen", "out", out.size(), in.size());
    launch(stream, "scaled_widen", [=] { kernels::scaled_widen<W>(in, out, scale); });
  }
  template <class W>
  static void scaled_narrow(std::span<float> in, std::span<W> out, float scale, stream_t stream) {
    kernels::detail::require_size("sim::scaled_narrow", "out", out.size(), in.size());
    launch(stream, "scaled_narrow", [=] { kernels::scaled_narrow<W>(in, out, scale); });
  }
  template <class W>
  static void accumulate(std::span<W> in, std::span<float> sum, stream_t stream) {
    kernels::detail::require_size("sim::accumulate", "sum", sum.size(), in.size());
    launch(stream, "accumulate", [=] { kernels::accumulate<W>(in, sum); });
  }
  /// cuda::sgd_update's loop: the gradient times `grad_scale` into the element function.
  static void sgd_update(std::span<float> param, std::span<const float> grad, std::span<float> velocity,
                         const optim::sgd_element& op, stream_t stream, float grad_scale) {
    kernels::detail::require_size("sim::sgd_update", "grad", grad.size(), param.size());
    kernels::detail::require_size("sim::sgd_update", "velocity", velocity.size(), op.momentum != 0.0f ? param.size() : 0);
    launch(stream, "sgd_update", [=] {
      for (std::size_t i = 0; i < param.size(); ++i) {
        float none = 0.0f;
        op(param[i], grad_scale * grad[i], velocity.empty() ? none : velocity[i]);
      }
    });
  }
  static void adam_update(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                          const optim::adam_element& op, stream_t stream, float grad_scale) {
    kernels::detail::require_size("sim::adam_update", "grad", grad.size(), param.size());
    kernels::detail::require_size("sim::adam_update", "m", m.size(), param.size());
    kernels::detail::require_size("sim::adam_update", "v", v.size(), param.size());
    launch(stream, "adam_update", [=] {
      for (std::size_t i = 0; i < param.size(); ++i) op(param[i], grad_scale * grad[i], m[i], v[i]);
    });
  }

  static void require_current_device(const communicator&) {}  // one device per rank thread
  static void require_device_memory(const communicator& comm, const void* data, std::size_t bytes,
                                    const std::string& what) {
    if (bytes == 0) return;
    if (data == nullptr) throw binding_error(what + " pointer is null");
    if (!comm.device().owns(data, bytes))
      throw binding_error(what + " buffer is not memory of rank " + std::to_string(comm.rank()) +
                          "'s simulated device; allocate it there (sim::device_buffer)");
  }
};

}  // namespace strata::sim

namespace strata {

/// The device executor on the simulated device (the nccl executor's code, run in CI).
template <class O>
using sim_executor = device_executor<sim::space, O>;

/// Builds it; collective, as the constructor.
template <detail::DeviceOptimizer O>
sim_executor<O> make_executor(sim::communicator comm, std::vector<device_variable_binding> variables, O optimizer,
                              device_executor_options<sim::stream_t> options = {}) {
  return sim_executor<O>(std::move(comm), std::move(variables), std::move(optimizer), options);
}

}  // namespace strata
