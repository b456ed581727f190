#pragma once
// The device executor: data parallelism over device memory, for any device space. Gradients,
// buckets, the all-reduce and the optimizer stay on the device, and nothing in a step blocks
// the host:
//
//   auto exec = make_executor(comm, {device_variable<Dense>(...), ...}, optim::adam{.lr = 1e-3f},
//                             {.initialized_on = compute});
//   for (...) {
//     exec.parameters_ready(compute);               // forward waits for the last update
//     forward_backward(compute, [&](std::size_t v) { exec.grad_ready(v, compute); });
//     exec.step(compute);                           // enqueued; returns at once
//   }
//   exec.wait();                                    // the host waits (with a deadline)
//
// `Space` is where the memory and the work are, as a Kokkos execution space: cuda::space
// (CUDA streams and kernels, NCCL; exec/nccl_executor.cuh, whose nccl_executor<O> this is)
// or sim::space (the simulated device and the sim backend; sim/space.hpp), which runs the
// same code at several ranks in CI. A space supplies its communicator, stream, event,
// device_buffer<T> and bucket_packer<T> types and these operations, each enqueued on a
// stream: record, wait (an event), zero, copy, scaled_widen, scaled_narrow, accumulate,
// sgd_update, adam_update; and the checks require_current_device and
// require_device_memory.
//
// All of its work runs on the communicator's stream. grad_ready(v, stream) records an
// event on the user's stream; once every gradient of a fusion bucket is marked, the
// communication stream waits for those events, packs the bucket and starts its all-reduce,
// so communication overlaps the rest of backward. step() enqueues the averaging and the
// fused optimizer kernels behind the reductions and records the event parameters_ready()
// waits on. No call synchronizes the device; only wait(), the constructor and checkpoints
// block the host.
//
// fp16 and bf16 variables are reduced in their own type (a bucket holds one type) and
// updated in fp32: the executor keeps an fp32 master copy of their parameters, laid out
// like their bucket, and writes the rounded result back to the user's parameters after
// each update. Optimizer state is fp32, in device memory, laid out like the buckets.
//
// Compress<FP16> and Compress<BF16> (fp32 variables, replicated) narrow the packed
// gradients, already divided by the number of ranks, to the 16-bit type for the
// all-reduce, which moves half the bytes, and widen the sum back for the update; the
// parameters and the optimizer stay fp32.
//
// With accumulation_steps = K, step() ends a micro-batch: the packed gradients of each
// bucket are added to an fp32 sum on the communication stream, and only the K-th step()
// reduces (the micro-batches' mean, rounded once to the wire type) and updates.
//
// PS<N> variables (synchronous) are the parameter server on NCCL: their buckets are
// reduce-scattered instead of all-reduced, so each rank receives the summed gradient of
// its own slice of the bucket; it alone updates that slice, against its fp32 master copy
// of the slice and with the slice's optimizer state, and the updated slices are
// all-gathered into every rank's parameters. A rank holds 1/P of those buckets' optimizer
// state and master parameters (ZeRO's stage 1). NCCL moves equal slices, so the servers
// are always all P ranks, whatever N; the result is the same as the host parameter
// server's, since SGD and Adam update every element on its own.
//
// Checkpoints go through the host executor's ckpt::store (save_checkpoint,
// restore_checkpoint): the parameters in fp32 (master copies where there are), the optimizer
// state, the PS slices as sharded ranges, under the host executor's names.
//
// The user's gradient buffers are only read (by the pack), so they keep this step's
// local gradients. Plain C++ without fmt, since nvcc compiles it for cuda::space. The
// communicator's device must be the current device of the thread that drives it.
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "strata/ckpt/state.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/exec/device_signature.hpp"
#include "strata/exec/device_step.hpp"
#include "strata/exec/signature_check.hpp"
#include "strata/model/device_variable.hpp"
#include "strata/numeric/float16.hpp"
#include "strata/optim/adam.hpp"
#include "strata/optim/sgd.hpp"
#include "strata/sync/device_buckets.hpp"
#include "strata/sync/stats.hpp"

namespace strata {

/// The options of a device executor; `Stream` is its space's stream (stream_t).
template <class Stream>
struct device_executor_options {
  sync::bucket_options buckets;
  /// The stream that initialized the parameters: the constructor's broadcast from rank 0
  /// waits for it. Required, as every stream the executor takes: a null stream is refused
  /// (on CUDA, cudaStreamLegacy names the legacy default stream, which waits for all
  /// blocking streams).
  Stream initialized_on{};
  /// Micro-batches per update: each bucket's gradients of the first K-1 micro-batches are
  /// summed in fp32 on the GPU, and only the K-th communicates; the update averages over
  /// all K × P micro-batches, as the host executor does.
  int accumulation_steps = 1;
};

namespace detail {

/// An optimizer's state in device memory, laid out like a bucket, and its fused update.
template <class Space, class O>
struct device_optimizer_state;

template <class Space>
struct device_optimizer_state<Space, optim::sgd> {
  using stream_t = typename Space::stream_t;
  typename Space::template device_buffer<float> velocity;

  device_optimizer_state(const optim::sgd& o, std::size_t n, stream_t stream)
      : velocity(o.momentum != 0.0f ? n : 0, stream) {
    Space::zero(velocity.data(), velocity.size() * sizeof(float), stream);
  }

  std::size_t bytes() const { return velocity.size() * sizeof(float); }
  /// The state's tensors under the host optimizer's names (optim::sgd::tensors).
  std::vector<std::pair<std::string_view, float*>> tensors() {
    if (velocity.span().empty()) return {};
    return {{"momentum_buffer", velocity.data()}};
  }

  /// Updates `param` with `grad`, whose state starts at element `offset`.
  void update(const optim::sgd& o, std::int64_t /*step*/, std::span<float> param, std::span<const float> grad,
              float grad_scale, std::size_t offset, stream_t stream) {
    const std::span<float> v = velocity.span().empty() ? std::span<float>() : velocity.span().subspan(offset, param.size());
    Space::sgd_update(param, grad, v, {o.lr, o.momentum, o.weight_decay, o.nesterov}, stream, grad_scale);
  }
};

template <class Space>
struct device_optimizer_state<Space, optim::adam> {
  using stream_t = typename Space::stream_t;
  typename Space::template device_buffer<float> m, v;

  device_optimizer_state(const optim::adam&, std::size_t n, stream_t stream) : m(n, stream), v(n, stream) {
    Space::zero(m.data(), n * sizeof(float), stream);
    Space::zero(v.data(), n * sizeof(float), stream);
  }

  std::size_t bytes() const { return (m.size() + v.size()) * sizeof(float); }
  /// The state's tensors under the host optimizer's names (optim::adam::tensors).
  std::vector<std::pair<std::string_view, float*>> tensors() {
    return {{"exp_avg", m.data()}, {"exp_avg_sq", v.data()}};
  }

  void update(const optim::adam& o, std::int64_t step, std::span<float> param, std::span<const float> grad,
              float grad_scale, std::size_t offset, stream_t stream) {
    Space::adam_update(param, grad, m.span().subspan(offset, param.size()), v.span().subspan(offset, param.size()),
                      o.element(step), stream, grad_scale);
  }
};

/// The optimizers with a fused device update (device_optimizer_state).
template <class O>
concept DeviceOptimizer = std::same_as<O, optim::sgd> || std::same_as<O, optim::adam>;

template <class T>
std::span<T> typed(void* data, std::size_t n) {
  return {static_cast<T*>(data), n};
}

}  // namespace detail

/// Data parallelism over device memory in `Space` (see the file comment). One thread drives it.
template <class Space, detail::DeviceOptimizer O>
class device_executor {
 public:
  using communicator_type = typename Space::communicator;
  using stream_t = typename Space::stream_t;
  using options_type = device_executor_options<stream_t>;

 private:
  template <class T>
  using buffer = typename Space::template device_buffer<T>;
  template <class T>
  using packer = typename Space::template bucket_packer<T>;
  using event = typename Space::event;

 public:
  /// Collective: every rank constructs its executor together, with the same variables in
  /// the same order. Checks that every buffer is memory of the communicator's GPU
  /// (binding_error naming the rank and variable otherwise) and that every rank declared
  /// the same model and buckets (signature_error on every rank, naming the first
  /// difference and the ranks, before any collective could pair unrelated buffers), then
  /// makes every replica start from rank 0's parameters; returns once that broadcast is
  /// done.
  device_executor(communicator_type comm, std::vector<device_variable_binding> variables, O optimizer,
                  options_type options = {})
      : comm_(std::move(comm)), variables_(std::move(variables)), optimizer_(std::move(optimizer)),
        driver_(names_of(variables_), options.accumulation_steps, " on rank " + std::to_string(comm_.rank())) {
    hyper_parameters_.check(optimizer_, 0);
    require_current_device();
    check_bindings();
    check_signatures(detail::gather_lines(comm_.size(), device_signature(variables_, comm_.size(), options.buckets,
                                                                         accumulation_steps(), optimizer_),
                                          [this](auto mine, auto all) { allgather_from_host(mine, all); }));
    events_.resize(variables_.size());
    comm_.depend_on(given(options.initialized_on, [] { return "the options' initialized_on"; }));
    for (device_variable_binding& v : variables_) broadcast(v);
    plan(options.buckets);
    record(updated_, comm_.stream(), [] { return std::string("the start-up"); });
    comm_.barrier();  // waits, within the communicator's deadline, for all of the above
  }

  /// Waits (within the deadline) until the communicator's stream no longer runs this
  /// executor's work: the user's buffers, which that work reads and writes, may then be
  /// freed, even after an error ended the training early.
  ~device_executor() { comm_.quiesce(); }
  device_executor(const device_executor&) = delete;
  device_executor& operator=(const device_executor&) = delete;

  /// The index of the variable named `name` (declaration order); binding_error if none.
  std::size_t index(std::string_view name) const {
    for (std::size_t i = 0; i < variables_.size(); ++i)
      if (variables_[i].name == name) return i;
    throw binding_error(std::string(Space::executor_name) + " on rank " + std::to_string(comm_.rank()) + ": no variable is named \"" +
                        std::string(name) + "\"");
  }

  /// Marks variable `v`'s gradient final once the work queued so far on `stream` is done
  /// (an event is recorded there; the host does not wait). Its bucket's all-reduce starts
  /// once every member is marked. Optional: without it, step() takes every gradient from
  /// its stream; but once one variable of a step is marked, all must be.
  void grad_ready(std::size_t v, stream_t stream) {
    require_parameters_ready("grad_ready");
    launcher l{*this, given(stream, [&] { return "grad_ready(\"" + variables_[v].name + "\")"; })};
    driver_.grad_ready(v, l);
  }
  void grad_ready(std::string_view name, stream_t stream) { grad_ready(index(name), stream); }

  /// Ends a step (a micro-batch, with accumulation): if none was marked, every gradient is
  /// taken as produced by the work queued so far on `stream`; every remaining bucket is launched,
  /// then, on the last micro-batch, the averaging and the optimizer are enqueued behind the
  /// reductions. Returns at once, true when it enqueued an update: that is done, and the
  /// gradients were read, when the event parameters_ready() waits on has completed.
  ///
  /// At most two steps are in flight: step k first waits, within the communicator's
  /// deadline, until step k-2 has finished on the device. Unbounded, the host would enqueue
  /// until the device's launch queue filled and then block inside a CUDA call, where no
  /// deadline runs; bounded, a stalled peer ends in timeout_error here.
  bool step(stream_t stream) {
    require_parameters_ready("step");
    given(stream, [] { return "step()"; });
    event& ended = step_ends_[steps_taken_ % step_ends_.size()];
    if (steps_taken_ >= step_ends_.size()) comm_.wait_event(ended, "step()");
    launcher l{*this, stream};
    const bool last = driver_.step(l);
    record(updated_, comm_.stream(), [] { return std::string("step()"); });
    record(ended, comm_.stream(), [] { return std::string("step()"); });
    ++steps_taken_;
    parameters_ready_ = false;
    return last;
  }

  /// Orders the work queued on `stream` from now on after the last update: call it before
  /// the forward pass that reads the parameters. It also orders the next gradients' writes
  /// after this step's reads of them.
  void parameters_ready(stream_t stream) {
    Space::wait(given(stream, [] { return "parameters_ready()"; }), updated_,
                [] { return std::string("parameters_ready"); }, comm_.rank());
    parameters_ready_ = true;
  }

  /// Blocks the host until everything enqueued so far has finished, within the
  /// communicator's deadline (its options' timeout): a stalled peer aborts the
  /// communicator and throws timeout_error instead of hanging.
  void wait() {
    comm_.synchronize();
  }

  /// Everything a checkpoint keeps of this executor, as host tensors under the host
  /// executor's names: each variable's parameters in fp32 (its master copy where it has one:
  /// 16-bit variables, and the PS slices this rank owns, saved as sharded) and its optimizer
  /// state. Building it copies the device values into the tensors, and restoring copies
  /// them back, re-deriving the 16-bit and the all-gathered parameters from their master
  /// copies. Collective on restore (the PS all-gather); blocks the host; between updates.
  ckpt::state_set state() {
    driver_.bookkeeping().require_between_updates("state");
    return checkpoint_state(true);
  }

  /// Collective: saves a checkpoint of the state after updates() updates, with the user's
  /// `meta` (data position, random state) and `extra` tensors of their own (host memory:
  /// state the executor does not hold, e.g. batch normalization's running statistics)
  /// beside it, through a ckpt::store: the host executor's format, atomic commit and
  /// checksums, and its refusal of a diverged model. Waits for the device; between updates.
  /// A template, so that only a program that checkpoints includes strata/ckpt/store.hpp
  /// (and links zlib).
  template <class Store>
  void save_checkpoint(const Store& store, const std::map<std::string, std::string>& meta = {},
                       std::span<const ckpt::tensor_state> extra = {}) {
    driver_.bookkeeping().require_between_updates("save_checkpoint");
    ckpt::state_set tensors = state();
    tensors.add_all(extra);
    checkpoint_group group{*this};
    store.save(group, updates(), tensors, meta);
  }

  /// Collective: restores the newest usable checkpoint in `store` (refusing corrupted ones)
  /// and continues counting updates from it; returns what was restored, with the user's
  /// metadata, or nullopt when the store holds none. Any world size may have saved it. The
  /// parameters are restored when it returns, and `extra` filled as they were saved.
  template <class Store>
  auto restore_checkpoint(const Store& store, std::span<const ckpt::tensor_state> extra = {}) {
    driver_.bookkeeping().require_between_updates("restore_checkpoint");
    ckpt::state_set tensors = checkpoint_state(false);
    tensors.add_all(extra);
    checkpoint_group group{*this};
    auto restored = store.restore_latest(group, tensors);
    if (restored) driver_.resume_at(restored->step, "restore_checkpoint");
    return restored;
  }

  /// The optimizer's hyper-parameters may change between steps (learning-rate schedules).
  O& optimizer() { return optimizer_; }
  std::int64_t updates() const { return driver_.updates(); }
  /// What this rank holds: the parameters it binds, the optimizer state, and (as
  /// server_values) the master copies of the PS slices it owns.
  memory_use memory() const {
    memory_use use;
    for (const device_variable_binding& v : variables_) use.parameters += v.bytes();
    for (const bucket& b : buckets_)
      std::visit(
          [&](const auto& data) {
            use.optimizer_state += data.state.bytes();
            if (b.sharded) use.server_values += master_bytes(data);
          },
          b.data);
    return use;
  }
  const std::vector<device_variable_binding>& variables() const { return variables_; }
  communicator_type& communicator() { return comm_; }

 private:
  /// A bucket's device buffers for gradients of type T. The updated range is the whole
  /// bucket, or for a sharded bucket this rank's slice.
  template <class T>
  struct bucket_data {
    packer<T> grads;
    buffer<T> wire;  // the packed gradients (padded to whole slices when sharded); reduced in place
    detail::device_optimizer_state<Space, O> state;  // of the updated range
    // fp32 gradients (fp16 and bf16 only) and master parameters of the updated range, and
    // the parameters' packer; fp32 buckets that are not sharded update the user's
    // parameters in place and need none of them.
    buffer<float> grad32, master32;
    std::optional<packer<T>> params;
  };

  template <class T>
  static std::size_t master_bytes(const bucket_data<T>& data) {
    return data.master32.size() * sizeof(float);
  }

  /// A compressed bucket's device buffers: the fp32 gradients are packed, narrowed to W for
  /// the all-reduce and widened back; the update runs on the user's parameters in place.
  template <class W>
  struct compressed_data {
    packer<float> grads;
    buffer<float> grad32;  // the packed gradients, then their average
    buffer<W> wire;
    detail::device_optimizer_state<Space, O> state;
  };

  template <class W>
  static std::size_t master_bytes(const compressed_data<W>&) {
    return 0;  // updates the user's fp32 parameters in place
  }

  struct bucket {
    std::vector<std::size_t> members, offsets;
    std::size_t elements;  // of the members; the wire may be longer
    bool sharded;
    sync::bucket_slices slices;  // sharded only
    buffer<float> accumulated;  // the earlier micro-batches' sum (accumulation only)
    std::variant<bucket_data<float>, bucket_data<half>, bucket_data<bfloat16>, compressed_data<half>,
                 compressed_data<bfloat16>>
        data;
  };

  /// One tensor of a checkpoint's state: its values on the device and their host copy.
  struct device_copy {
    float* device;
    std::span<float> host;
  };

  /// The ranks as a checkpoint group (ckpt::Group): host data through device memory.
  struct checkpoint_group {
    device_executor& exec;
    int rank() const { return exec.comm_.rank(); }
    int size() const { return exec.comm_.size(); }
    void broadcast(std::span<std::byte> data, int root) {
      buffer<std::byte> staged(data.size(), exec.comm_.stream());
      exec.copy(staged.data(), data.data(), data.size(), "a checkpoint's agreement");
      exec.comm_.broadcast(staged.span(), root);
      exec.copy(data.data(), staged.data(), data.size(), "a checkpoint's agreement");
      exec.comm_.synchronize();
    }
    template <class T>
    void allgather(std::span<const T> mine, std::span<T> all) {
      exec.allgather_from_host(mine, all);
    }
  };

  /// state(), whose host tensors hold the device values when `read` (a restore overwrites
  /// them, so it skips the copies).
  ckpt::state_set checkpoint_state(bool read) {
    ckpt::state_set set;
    std::vector<device_copy> copies;
    for (bucket& b : buckets_) std::visit([&](auto& data) { describe_state(b, data, set, copies); }, b.data);
    const stream_t stream = comm_.stream();
    if (read) {
      for (const device_copy& c : copies) copy(c.host.data(), c.device, c.host.size_bytes(), "a checkpoint");
      // The copies wait behind the last step's collectives: within the communicator's
      // deadline, so that a stalled peer ends in timeout_error rather than a hang.
      comm_.synchronize();
    }
    set.after_restore([this, copies, stream] {
      for (const device_copy& c : copies) copy(c.device, c.host.data(), c.host.size_bytes(), "a checkpoint");
      for (bucket& b : buckets_)
        std::visit(
            [&](auto& data) {
              if constexpr (requires { data.params; })
                if (data.params) publish(b, data);
            },
            b.data);
      record(updated_, stream, [] { return std::string("restoring a checkpoint"); });
      comm_.synchronize();
    });
    return set;
  }

  /// Adds bucket `b`'s parameters and optimizer state to `set`, member by member, with
  /// where each lives on the device.
  template <class Data>
  void describe_state(bucket& b, Data& data, ckpt::state_set& set, std::vector<device_copy>& copies) {
    std::vector<std::size_t> sizes;
    for (std::size_t m : b.members) sizes.push_back(variables_[m].elements);
    const std::size_t begin = b.sharded ? b.slices.offset(comm_.rank()) : 0,
                      count = b.sharded ? b.slices.slice : b.elements;
    const ckpt::sharing how = b.sharded ? ckpt::sharing::sharded : ckpt::sharing::replicated;
    float* master = nullptr;
    if constexpr (requires { data.master32; }) master = data.master32.span().empty() ? nullptr : data.master32.data();
    const auto state = data.state.tensors();
    for (const sync::member_part& p : sync::parts_in_range(b.offsets, sizes, begin, count)) {
      const device_variable_binding& v = variables_[b.members[p.member]];
      auto add = [&](std::string name, float* device) {
        const std::span<float> host = set.scratch(p.count);
        set.add({std::move(name), v.shape, how, host, false, p.begin});
        copies.push_back({device, host});
      };
      // Without a master copy the parameters are the user's fp32 ones, whole (replicated).
      add(v.name, master ? master + p.at : static_cast<float*>(v.param) + p.begin);
      for (const auto& [name, values] : state) add(v.name + "/" + std::string(name), values + p.at);
    }
  }

  void copy(void* to, const void* from, std::size_t bytes, const char* what) {
    Space::copy(to, from, bytes, comm_.stream(), what, comm_.rank());
  }


  /// The next step's gradients must not be written while this step still reads the last
  /// ones (the pack runs on the communicator's stream, later): parameters_ready orders them.
  /// Without it the data would be corrupted silently, so its absence is an error.
  void require_parameters_ready(const char* call) const {
    if (steps_taken_ > 0 && !parameters_ready_)
      throw usage_error(std::string(Space::executor_name) + " on rank " + std::to_string(comm_.rank()) + ": " + call +
                        "() of a new step without parameters_ready(stream) since the last step(); call it before the "
                        "forward pass (or the next micro-batch), so that the new gradients are written only after "
                        "the last ones were read");
  }

  /// `stream`, refused when null (require_stream); `what()` names the call.
  template <class What>
  stream_t given(stream_t stream, What&& what) const {
    const auto caller = [&] {
      return std::string(Space::executor_name) + " on rank " + std::to_string(comm_.rank()) + ": " + std::string(what());
    };
    return require_stream(stream, caller, "the stream whose work it orders against");
  }

  // Kernels launch on the current device, which must be the communicator's.
  void require_current_device() const { Space::require_current_device(comm_); }

  void check_bindings() const {
    std::unordered_set<std::string_view> names;
    for (const device_variable_binding& v : variables_) {
      if (!names.insert(v.name).second)
        throw binding_error("variable \"" + v.name + "\" on rank " + std::to_string(comm_.rank()) +
                            " is declared twice; give every variable its own name");
      for (const auto& [data, what] : {std::pair{v.param, "parameter"}, std::pair{v.grad, "gradient"}})
        Space::require_device_memory(comm_, data, v.bytes(),
                                     "variable \"" + v.name + "\" on rank " + std::to_string(comm_.rank()) + ": the " + what);
    }
  }

  /// The communicator's all-gather for host data (the signature), copied through
  /// device memory; blocks the host.
  template <class T>
  void allgather_from_host(std::span<const T> mine, std::span<T> all) {
    const stream_t stream = comm_.stream();
    buffer<T> gathered(all.size(), stream);
    const std::span<T> own = gathered.span().subspan(static_cast<std::size_t>(comm_.rank()) * mine.size(), mine.size());
    Space::copy(own.data(), mine.data(), mine.size_bytes(), stream, "the model signature", comm_.rank());
    comm_.allgather(std::span<const T>(own), gathered.span());
    Space::copy(all.data(), gathered.data(), all.size_bytes(), stream, "the model signature", comm_.rank());
    comm_.synchronize();  // within the communicator's deadline
  }

  /// `during()` names the call in an error; built only then, since grad_ready and step()
  /// record on every step.
  template <class Context>
  void record(event& e, stream_t stream, Context&& during) const {
    Space::record(e, stream, std::forward<Context>(during), comm_.rank());
  }

  void broadcast(device_variable_binding& v) {
    auto bytes = detail::typed<std::byte>(v.param, v.bytes());
    comm_.broadcast(bytes, 0);
  }

  template <class T>
  std::vector<std::span<T>> spans_of(const std::vector<std::size_t>& members, void* device_variable_binding::*buffer) const {
    std::vector<std::span<T>> spans;
    for (std::size_t m : members) spans.push_back(detail::typed<T>(variables_[m].*buffer, variables_[m].elements));
    return spans;
  }

  void plan(const sync::bucket_options& options) {
    const std::vector<sync::typed_bucket> planned_buckets = sync::plan_device_buckets(variables_, options);
    driver_.plan(planned_buckets, variables_.size());
    for (const sync::typed_bucket& planned : planned_buckets) {
      if (planned.wire != planned.type) {  // fp32 narrowed by Compress<...>
        buckets_.push_back(planned.wire == element_type::fp16 ? make_compressed_bucket<half>(planned)
                                                              : make_compressed_bucket<bfloat16>(planned));
        continue;
      }
      switch (planned.type) {
        case element_type::fp32: buckets_.push_back(make_bucket<float>(planned)); break;
        case element_type::fp16: buckets_.push_back(make_bucket<half>(planned)); break;
        case element_type::bf16: buckets_.push_back(make_bucket<bfloat16>(planned)); break;
      }
    }
  }

  template <class T>
  bucket make_bucket(const sync::typed_bucket& planned) {
    const stream_t stream = comm_.stream();
    const sync::bucket_layout& layout = planned.layout;
    const std::size_t n = layout.elements;
    const sync::bucket_slices slices = planned.sharded ? sync::slice_bucket(n, comm_.size()) : sync::bucket_slices{n, n};
    const bool master = planned.sharded || !std::is_same_v<T, float>;
    bucket_data<T> data{packer<T>(spans_of<T>(layout.members, &device_variable_binding::grad), stream),
                        buffer<T>(slices.padded, stream),
                        detail::device_optimizer_state<Space, O>(optimizer_, slices.slice, stream),
                        buffer<float>(master && !std::is_same_v<T, float> ? slices.slice : 0, stream),
                        buffer<float>(master ? slices.slice : 0, stream),
                        {}};
    if (master) {
      // The padding past the members is zero, and its gradients stay zero.
      if (slices.padded > n) Space::zero(data.wire.data(), slices.padded * sizeof(T), stream);
      data.params.emplace(spans_of<T>(layout.members, &device_variable_binding::param), stream);
      // The master copy starts as the (broadcast) parameters, exactly: widening is exact.
      data.params->pack(data.wire.span().first(n), stream);
      Space::scaled_widen(updated_range(planned.sharded, slices, data.wire.span()), data.master32.span(), 1.0f, stream);
    }
    return {layout.members, layout.offsets, n, planned.sharded, slices, accumulator(n), std::move(data)};
  }

  template <class W>
  bucket make_compressed_bucket(const sync::typed_bucket& planned) {
    const stream_t stream = comm_.stream();
    const sync::bucket_layout& layout = planned.layout;
    const std::size_t n = layout.elements;
    compressed_data<W> data{
        packer<float>(spans_of<float>(layout.members, &device_variable_binding::grad), stream),
        buffer<float>(n, stream), buffer<W>(n, stream),
        detail::device_optimizer_state<Space, O>(optimizer_, n, stream)};
    return {layout.members, layout.offsets, n, false, {n, n}, accumulator(n), std::move(data)};
  }

  buffer<float> accumulator(std::size_t n) const {
    return buffer<float>(accumulation_steps() > 1 ? n : 0, comm_.stream());
  }

  int accumulation_steps() const { return driver_.bookkeeping().accumulation_steps(); }

  /// Folds this micro-batch's packed gradients into the bucket's sum; on the last one the
  /// mean over the micro-batches replaces them (before any 16-bit rounding, so the wire
  /// keeps the headroom of one gradient). Returns whether they are now ready to reduce.
  template <class T>
  bool accumulate(bucket& b, std::span<T> packed, micro_step m) {
    if (m.micro_batches == 1) return true;
    const stream_t stream = comm_.stream();
    if (m.first) Space::scaled_widen(packed, b.accumulated.span(), 1.0f, stream);
    else Space::accumulate(packed, b.accumulated.span(), stream);
    if (!m.last) return false;
    Space::scaled_narrow(b.accumulated.span(), packed, 1.0f / static_cast<float>(m.micro_batches), stream);
    return true;
  }

  /// The part of a bucket's wire this rank updates.
  template <class T>
  std::span<T> updated_range(bool sharded, const sync::bucket_slices& slices, std::span<T> wire) const {
    return sharded ? wire.subspan(slices.offset(comm_.rank()), slices.slice) : wire;
  }

  /// The device work of a step, for device_step (exec/device_step.hpp), which decides when.
  struct launcher {
    device_executor& exec;
    stream_t stream;  // the caller's

    void gradient_marked(std::size_t v) {
      exec.record(exec.events_[v], stream, [&] { return "grad_ready(\"" + exec.variables_[v].name + "\")"; });
    }
    void gradients_from_caller() { exec.comm_.depend_on(stream); }  // one event orders them all
    void start_bucket(std::size_t i, micro_step m, bool marked) { exec.start_bucket(exec.buckets_[i], m, marked); }
    void update(std::int64_t update) {
      exec.hyper_parameters_.check(exec.optimizer_, update);  // a schedule may have changed them
      for (bucket& b : exec.buckets_) std::visit([&](auto& data) { exec.update(b, data, update); }, b.data);
    }
  };

  /// Starts bucket `b`: after its members' grad_ready events when they were marked (else
  /// step() has ordered the stream already), packs it and accumulates or reduces it.
  void start_bucket(bucket& b, micro_step m, bool marked) {
    if (marked)
      for (std::size_t v : b.members)
        Space::wait(comm_.stream(), events_[v], [&] { return "the gradient of \"" + variables_[v].name + "\""; },
                    comm_.rank());
    std::visit([&](auto& data) { start_reduction(b, data, m); }, b.data);
  }

  /// fp32 gradients are summed and averaged inside the optimizer's kernel (a pass fewer);
  /// 16-bit ones are averaged by NCCL as they are reduced, for their sum over 8 ranks can
  /// overflow where their mean does not.
  template <class T>
  void start_reduction(bucket& b, bucket_data<T>& data, micro_step m) {
    data.grads.pack(data.wire.span().first(b.elements), comm_.stream());
    if (!accumulate(b, data.wire.span().first(b.elements), m)) return;
    const std::span<T> wire = data.wire.span();
    if constexpr (std::is_same_v<T, float>) {
      if (b.sharded) comm_.ireduce_scatter_sum(wire);
      else comm_.iallreduce_sum(wire);
    } else {
      if (b.sharded) comm_.ireduce_scatter_average(wire);
      else comm_.iallreduce_average(wire);
    }
  }

  /// Averages before narrowing: the sum of P averages stays in range wherever the
  /// gradients themselves do, and fp32 does the division.
  template <class W>
  void start_reduction(bucket& b, compressed_data<W>& data, micro_step m) {
    data.grads.pack(data.grad32.span(), comm_.stream());
    if (!accumulate(b, data.grad32.span(), m)) return;
    Space::scaled_narrow(data.grad32.span(), data.wire.span(), average_scale(), comm_.stream());
    comm_.iallreduce_sum(data.wire.span());
  }

  /// The average over the ranks (accumulate() has already taken the micro-batches' mean).
  float average_scale() const { return 1.0f / static_cast<float>(comm_.size()); }

  /// Updates each member of `b` in place from its part of `grads` times `grad_scale` (the
  /// bucket's average).
  void update_members(const bucket& b, detail::device_optimizer_state<Space, O>& state, std::span<const float> grads,
                      float grad_scale, std::int64_t update) {
    for (std::size_t k = 0; k < b.members.size(); ++k) {
      const device_variable_binding& v = variables_[b.members[k]];
      state.update(optimizer_, update, detail::typed<float>(v.param, v.elements), grads.subspan(b.offsets[k], v.elements),
                   grad_scale, b.offsets[k], comm_.stream());
    }
  }

  template <class W>
  void update(const bucket& b, compressed_data<W>& data, std::int64_t update) {  // averaged before narrowing
    Space::scaled_widen(data.wire.span(), data.grad32.span(), 1.0f, comm_.stream());
    update_members(b, data.state, data.grad32.span(), 1.0f, update);
  }

  /// Enqueues a reduced bucket's averaging and update, and for a sharded bucket the
  /// all-gather of the updated slices. fp32 sums are averaged inside the optimizer's kernel
  /// (grad_scale): a pass over the bucket fewer; 16-bit buckets arrive averaged.
  template <class T>
  void update(const bucket& b, bucket_data<T>& data, std::int64_t update) {
    const float scale = std::is_same_v<T, float> ? average_scale() : 1.0f;
    const stream_t stream = comm_.stream();
    const std::span<T> wire = data.wire.span();
    if (!data.params) {  // fp32, replicated: the user's parameters are the master copy
      if constexpr (std::is_same_v<T, float>) update_members(b, data.state, wire, scale, update);
      return;
    }
    // One launch per range: master parameters, fp32 gradients and state share its layout.
    const std::span<T> range = updated_range(b.sharded, b.slices, wire);
    std::span<float> grad32;
    float grad_scale = scale;
    if constexpr (std::is_same_v<T, float>) {
      grad32 = range;
    } else {
      Space::scaled_widen(range, data.grad32.span(), scale, stream);
      grad32 = data.grad32.span();
      grad_scale = 1.0f;
    }
    data.state.update(optimizer_, update, data.master32.span(), grad32, grad_scale, 0, stream);
    publish(b, data);
  }

  /// Writes the master copy of a bucket's updated range to the user's parameters, rounded
  /// to T, and for a sharded bucket all-gathers every rank's slice first.
  template <class T>
  void publish(const bucket& b, bucket_data<T>& data) {
    const stream_t stream = comm_.stream();
    const std::span<T> wire = data.wire.span();
    Space::scaled_narrow(data.master32.span(), updated_range(b.sharded, b.slices, wire), 1.0f, stream);
    if (b.sharded) comm_.iallgather_blocks(wire);
    data.params->unpack(wire.first(b.elements), stream);
  }

  communicator_type comm_;
  std::vector<device_variable_binding> variables_;
  O optimizer_;
  hyper_parameter_check<O> hyper_parameters_;
  device_step driver_;  // ready marks, micro-batches, bucket order: tested on the CPU
  std::vector<event> events_;  // one per variable: its gradient is final
  event updated_;              // the last update (or the start-up) is done
  std::array<event, 2> step_ends_;  // the last two steps' ends: the bound on run-ahead
  std::size_t steps_taken_ = 0;
  bool parameters_ready_ = false;  // called since the last step()
  std::vector<bucket> buckets_;      // in launch order
};

}  // namespace strata
