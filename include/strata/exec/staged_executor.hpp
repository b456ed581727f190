#pragma once
// Device variables whose strategies the nccl executor does not run (the parameter server
// under Consistency<ASP> or Consistency<SSP<S>>, TopK, PowerSGD, error feedback,
// partitioned replicas) train with the host executor, staged through host memory. Each
// step copies the gradients from the device into host mirrors, runs the host executor's
// step on the mirrors (pushes and pulls, or the compressed all-reduce, on the CPU
// backend), and copies back the parameters an update changed:
//
//   cuda::pinned_stage stage(compute);  // copies on the compute stream, via pinned memory
//   auto staged = make_staged_executor(mpi, std::move(stage), optim::adam{}, {},
//       variable<Strategy<PS<2>, Partition<0>, Consistency<SSP<3>>>>("fc1.weight", w.memory(), gw.memory(),
//                                                                   {256, 3136}));
//   for (...) {
//     forward_backward(compute);  // writes gw on the stage's stream
//     staged.step();              // the host waits for gw, then for the servers
//   }
//
// The declarations bind the stage's memory (device_spans for cuda::pinned_stage, whose
// memory space is device_memory), with the shapes and compile-time rules of any variable;
// a declaration over another memory space than the stage's is a compile error (MemorySpace). It costs a round trip through host
// memory and a host wait per step, so it is for the variables that need a host strategy;
// an nccl_executor beside it keeps the rest on the GPU.
//
// A stage is the memory the user's buffers live in and how to copy between it and the
// host: cuda::pinned_stage (strata/cuda/pinned_stage.cuh) for a GPU, and host_stage for
// buffers that are already host memory, which the tests use to check staging on the CPU.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/exec/executor.hpp"
#include "strata/model/huge_pages.hpp"
#include "strata/model/memory.hpp"
#include "strata/model/tensor_arena.hpp"

namespace strata {

/// Where staged variables' buffers live: `memory_space` (host_memory or device_memory) and
/// `span`, a span of its memory (std::span<float> or device_span<float>). Copies are enqueued
/// in call order; wait() returns once all enqueued so far are done. host_buffer(n) gives
/// memory for asynchronous copies that lives as long as the stage. check() throws
/// binding_error, naming the variable, when `memory` is not the stage's.
template <class S>
concept StagingMemory = std::movable<S> && requires(S& stage, std::size_t n, typename S::span on_stage,
                                                     std::span<float> host, std::string_view name) {
  typename S::memory_space;
  { stage.host_buffer(n) } -> std::same_as<std::span<float>>;
  stage.check(name, on_stage, name);
  stage.to_host(on_stage, host);
  stage.to_device(std::span<const float>(host), on_stage);
  stage.wait();
};

/// The stage for buffers in host memory: copies are plain copies, done when called.
class host_stage {
 public:
  using memory_space = host_memory;
  using span = std::span<float>;

  std::span<float> host_buffer(std::size_t n) { return buffers_.emplace_back(n, 0.0f); }
  void check(std::string_view, span, std::string_view) const {}
  void to_host(span on_stage, std::span<float> host) { std::ranges::copy(on_stage, host.begin()); }
  void to_device(std::span<const float> host, span on_stage) { std::ranges::copy(host, on_stage.begin()); }
  void wait() {}

 private:
  std::vector<host_vector<float>> buffers_;  // moving a host_vector keeps its memory where it is
};

template <CommContext Context, StagingMemory Stage, class Model, Optimizer O>
class staged_executor;

/// The host executor over host mirrors of variables that live in a stage's memory: see the
/// file comment. One thread drives it.
template <CommContext Context, StagingMemory Stage, ValidStrategy... Strategies, Optimizer O>
class staged_executor<Context, Stage, model<Strategies...>, O> {
  static_assert((!Strategies::descriptor.sparse_rows && ...),
                "staged_executor stages dense gradients; a SparseRows table's rows are pulled and pushed by the host "
                "executor (make_executor) over host memory");

 public:
  using model_type = model<Strategies...>;
  using executor_type = executor<Context, model_type, O>;

  /// Collective, as the host executor's constructor: binds `on_stage`, declarations whose
  /// buffers are the stage's memory, to host mirrors holding their values; then the host
  /// executor starts every replica (and server) from rank 0's values, which are copied
  /// back before the constructor returns.
  template <class... Declarations>
  staged_executor(Context& context, Stage stage, O optimizer, executor_options options, Declarations... on_stage)
      : stage_(std::move(stage)), model_(mirror(std::move(on_stage)...)),
        executor_(context, model_, std::move(optimizer), options) {
    try {
      parameters_to_stage();
      stage_.wait();
    } catch (...) {
      settle();
      throw;
    }
  }
  staged_executor(const staged_executor&) = delete;
  staged_executor& operator=(const staged_executor&) = delete;
  ~staged_executor() { settle(); }

  /// Ends a micro-batch: waits for the gradients written so far (on the stage's stream),
  /// runs the host executor's step on their copies and, on the last micro-batch of an
  /// update, enqueues the copy of the parameters back to the stage. Work enqueued on the
  /// stage's stream after this reads them. The stage's gradient buffers keep the local
  /// gradients: averages are made in the mirrors.
  step_stats step() {
    for (const staged_buffers& b : staged_) stage_.to_host(b.grad, b.host_grad);
    stage_.wait();  // also completes the last update's copies, before the mirrors change
    step_stats stats;
    try {
      stats = executor_.step();
    } catch (const numeric_error&) {
      parameters_to_stage();  // the parameter server's variables were pulled before the guard raised
      throw;
    }
    // A step skipped by the NaN/Inf guard still pulled the parameter server's variables.
    if (stats.updated || stats.skipped) parameters_to_stage();
    return stats;
  }

  /// Collective: saves what the host executor keeps (parameters, optimizer state, residuals,
  /// the servers' shards) after `updates()` updates, with the user's `meta` and `extra`.
  void save_checkpoint(const ckpt::store& store, const ckpt::metadata& meta = {},
                       std::span<const ckpt::tensor_state> extra = {}) {
    stage_.wait();
    executor_.save_checkpoint(store, meta, extra);
  }

  /// Collective: restores the newest usable checkpoint, as the host executor does, and
  /// copies the restored parameters to the stage.
  std::optional<ckpt::restored_checkpoint> restore_checkpoint(const ckpt::store& store,
                                                              std::span<const ckpt::tensor_state> extra = {}) {
    stage_.wait();
    auto restored = executor_.restore_checkpoint(store, extra);
    if (restored) parameters_to_stage();
    return restored;
  }

  /// Blocks until the copies enqueued so far (the last update's parameters) are done.
  void wait() { stage_.wait(); }

  O& optimizer() { return executor_.optimizer(); }
  std::int64_t updates() const { return executor_.updates(); }
  /// The host executor over the mirrors (statistics, memory, parameter-server reads). Its
  /// step() and checkpoints would skip the copies: call this executor's.
  executor_type& host() { return executor_; }
  const model_type& mirrors() const { return model_; }
  Stage& stage() { return stage_; }

 private:
  using stage_span = typename Stage::span;
  struct staged_buffers {
    stage_span param, grad;                  // the stage's memory
    std::span<float> host_param, host_grad;  // their mirrors
  };

  template <class... Declarations>
  model_type mirror(Declarations... on_stage) {
    // The gradients' mirrors in one buffer, laid out as a tensor_arena lays gradients out,
    // so that a bucket of them is one range of memory.
    const std::size_t sizes[] = {on_stage.binding.grad.size()..., 0};  // (a 0 after them: no empty array)
    const std::vector<std::size_t> offsets =
        packed_offsets(std::span(sizes).first(sizeof...(on_stage)), arena_layout::backward);
    const std::span<float> grads = stage_.host_buffer(std::accumulate(std::begin(sizes), std::end(sizes), std::size_t{0}));
    std::size_t k = 0;
    auto next_grad = [&] {
      const std::span<float> grad = grads.subspan(offsets[k], sizes[k]);
      ++k;
      return grad;
    };
    model_type m;
    try {
      (m.add(mirror_one(on_stage, next_grad())), ...);
      stage_.wait();  // the executor's start-up reads the initial values
    } catch (...) {
      settle();  // a later declaration was refused: no copy may outlive its mirror
      throw;
    }
    return m;
  }

  template <ValidStrategy S, std::size_t Rank, class Space>
  variable_declaration<S, Rank> mirror_one(const variable_declaration<S, Rank, Space>& declaration,
                                          std::span<float> host_grad) {
    static_assert(std::is_same_v<Space, typename Stage::memory_space>,
                  "MemorySpace: a staged variable must live in its stage's memory (make_staged_executor says more)");
    const variable_binding& v = declaration.binding;
    staged_buffers b{{v.param.data(), v.param.size()}, {v.grad.data(), v.grad.size()}, stage_.host_buffer(v.param.size()),
                     host_grad};
    stage_.check(v.name, b.param, "parameter");
    stage_.check(v.name, b.grad, "gradient");
    stage_.to_host(b.param, b.host_param);
    staged_.push_back(b);
    return {variable_binding{v.name, v.shape, b.host_param, b.host_grad, v.strategy}};  // the mirrors, in host memory
  }

  void parameters_to_stage() {
    for (const staged_buffers& b : staged_) stage_.to_device(b.host_param, b.param);
  }

  /// Waits for the copies in flight where nothing may throw (or an error is on its way).
  void settle() noexcept {
    try {
      stage_.wait();
    } catch (...) {
      // A copy fails only on a broken device, which the next call on it reports.
    }
  }

  Stage stage_;
  std::vector<staged_buffers> staged_;
  model_type model_;
  executor_type executor_;  // holds the address of model_: staged_executor does not move
};

/// Builds the staged executor for declarations over `stage`'s memory; its model's
/// strategies are the distinct ones declared.
template <CommContext Context, StagingMemory Stage, Optimizer O, class... Declarations>
auto make_staged_executor(Context& context, Stage stage, O optimizer, executor_options options,
                          Declarations... on_stage) {
  // Checked here, one call from the user's line, and the executor not formed after it: one error.
  constexpr bool on_the_stage = (std::is_same_v<typename Declarations::memory_space, typename Stage::memory_space> && ...);
  static_assert(on_the_stage,
                "MemorySpace: a staged variable must live in its stage's memory: declare it over device_span "
                "buffers for a stage of GPU memory (cuda::pinned_stage), over host memory for host_stage");
  if constexpr (on_the_stage)
    return staged_executor<Context, Stage, model_of<typename Declarations::strategy...>, O>(
        context, std::move(stage), std::move(optimizer), options, std::move(on_stage)...);
}

}  // namespace strata
