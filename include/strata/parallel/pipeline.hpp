#pragma once
// Pipeline parallelism: a model's layers split into stages, one per rank of a pipeline
// group, and each batch split into micro-batches that flow through them. The driver calls
// the user's forward and backward of this rank's stage, micro-batch by micro-batch, in the
// order a schedule gives, and moves the activations between neighbouring stages (forward)
// and their gradients back (backward) by point-to-point messages:
//
//   auto pipe = strata::pipeline::make_driver(mesh, {hidden * micro_rows, ...});
//   pipe.run(strata::pipeline::one_f_one_b{}, micro_batches,
//            [&](int i, std::span<const float> in, std::span<float> out) { ... },    // forward
//            [&](int i, std::span<const float> dout, std::span<float> din) { ... });  // backward
//   exec.step();  // or one step() per backward with accumulation_steps = micro-batches
//
// On a backend whose buffers are device memory (nccl, sim) the driver also takes the
// stream the callbacks' kernels run on, make_driver(mesh, sizes, compute): a message is
// received before its callback is called (the host has seen it land, so kernels on any
// stream read it whole); after each callback the communicator's stream waits for the
// compute stream's work so far, so a send reads the finished output and a buffer is freed
// (in order on the communicator's stream) only after the kernels that read it.
//
// Schedules (the order of one stage's work; every stage does each micro-batch's forward
// and backward once):
// - gpipe: every forward, then every backward. A stage holds the activations of all m
//   micro-batches at once.
// - one_f_one_b (PipeDream-Flush): stage s of p runs p-s-1 forwards ahead, then alternates
//   one forward and one backward, then drains. At most p-s micro-batches are in flight on
//   stage s, so at most p, whatever m.
// Both leave each stage idle for (p-1)/(m+p-1) of a step in theory (ideal_bubble), when
// every stage's forward and backward take equal time and messages none.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <type_traits>
#include <span>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/exec/bounded_collective.hpp"
#include "strata/exec/timeout.hpp"
#include "strata/exec/wait_chain.hpp"
#include "strata/parallel/mesh.hpp"

namespace strata::pipeline {

enum class pass { forward, backward };

/// One unit of a stage's work: the forward or backward of one micro-batch.
struct work {
  pass kind;
  int micro_batch;
  friend bool operator==(const work&, const work&) = default;
};

struct gpipe {};
struct one_f_one_b {};

namespace detail {
inline void require_shape(int stages, int stage, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages)
    throw usage_error(fmt::format("pipeline: stage {} of {} stages does not exist", stage, stages));
  if (micro_batches < 1)
    throw usage_error(fmt::format("pipeline: {} micro-batches; a step needs at least 1", micro_batches));
}
}  // namespace detail

/// Stage `stage`'s work under GPipe: all forwards, then all backwards (both in micro-batch
/// order, so gradients accumulate in the same order as without a pipeline).
inline std::vector<work> order(gpipe, int stages, int stage, int micro_batches) {
  detail::require_shape(stages, stage, micro_batches);
  std::vector<work> out;
  for (pass p : {pass::forward, pass::backward})
    for (int i = 0; i < micro_batches; ++i) out.push_back({p, i});
  return out;
}

/// Stage `stage`'s work under 1F1B: a warm-up of forwards that fills the pipeline below it,
/// then one forward and one backward in turn, then the remaining backwards.
inline std::vector<work> order(one_f_one_b, int stages, int stage, int micro_batches) {
  detail::require_shape(stages, stage, micro_batches);
  const int warm_up = std::min(stages - stage - 1, micro_batches);
  const int steady = micro_batches - warm_up;
  std::vector<work> out;
  for (int i = 0; i < warm_up; ++i) out.push_back({pass::forward, i});
  for (int i = 0; i < steady; ++i) {
    out.push_back({pass::forward, warm_up + i});
    out.push_back({pass::backward, i});
  }
  for (int i = steady; i < micro_batches; ++i) out.push_back({pass::backward, i});
  return out;
}

/// The fraction of a step each stage idles, in theory: (p-1)/(m+p-1).
constexpr double ideal_bubble(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

/// What one run() measured on this stage.
struct run_stats {
  /// This stage's run, from its start to its last send's completion. The last stage ends
  /// before the first (which still runs its last backward): a bubble is measured against
  /// the slowest stage's time (benchmarks/pipeline.cpp).
  double seconds = 0.0;
  double compute_seconds = 0.0;  ///< inside the user's forward and backward
  int max_in_flight = 0;         ///< micro-batches forwarded and not yet backwarded, at most at once
};

/// Template for the user's callbacks (see the file comment).
template <class F>
concept StageFunction = requires(F& f, int micro_batch, std::span<const float> in, std::span<float> out) { f(micro_batch, in, out); };

struct driver_options {
  /// How long a stage waits for a neighbour's message before it names the neighbour and
  /// ends the job (as the executor's deadline does).
  std::chrono::duration<double> timeout = default_timeout();
  /// How messages name the rank of stage s; by default the group's own describe(s) (a
  /// mesh's pipeline group names the stage, world rank and coordinates), else "stage s".
  std::function<std::string(int stage)> describe;
};

namespace detail {
/// The stream the user's callbacks run on: a device backend's stream type; nothing for a
/// host backend, whose callbacks are done when they return.
template <class C>
struct compute_stream {
  using type = std::monostate;
};
template <class C>
  requires(!HostBuffers<C>)
struct compute_stream<C> {
  using type = decltype(std::declval<C&>().stream());
};
}  // namespace detail

/// Runs one stage of a pipeline over `stages`, the pipeline group (a CommContext whose rank
/// i is stage i; mesh::pipeline()).
template <CommContext Context>
class driver {
  using comm_type = std::remove_reference_t<decltype(std::declval<Context&>().collectives())>;

 public:
  using stream_type = typename detail::compute_stream<comm_type>::type;

  /// `boundaries[s]`: the elements of one micro-batch's activation that stage s hands to
  /// stage s + 1 (one entry per boundary: stages - 1 of them, equal on every stage).
  driver(Context& stages, std::vector<std::size_t> boundaries, driver_options options = {})
    requires HostBuffers<comm_type>
      : driver(stages, std::move(boundaries), stream_type{}, std::move(options)) {}

  /// On a device backend: `compute` is the stream the callbacks' kernels run on.
  driver(Context& stages, std::vector<std::size_t> boundaries, stream_type compute, driver_options options = {})
      : group_(&stages), boundaries_(std::move(boundaries)), options_(std::move(options)), compute_(compute) {
    if constexpr (!HostBuffers<comm_type>)
      require_stream(compute, "pipeline::driver", "the stream the forward and backward callbacks launch their kernels on");
    if (!options_.describe) {
      if constexpr (requires { stages.describe(0); }) options_.describe = [&stages](int s) { return stages.describe(s); };
      else options_.describe = [](int s) { return fmt::format("stage {}", s); };
    }
    checked_timeout(options_.timeout.count(), "pipeline::driver_options::timeout");
    if (boundaries_.size() + 1 != static_cast<std::size_t>(size()))
      throw usage_error(fmt::format("pipeline::driver: {} activation sizes for {} stages; give one per boundary between "
                                    "neighbouring stages ({})",
                                    boundaries_.size(), size(), size() - 1));
  }

  int stage() const { return group_->collectives().rank(); }
  int stages() const { return size(); }
  bool first() const { return stage() == 0; }
  bool last() const { return stage() + 1 == stages(); }

  /// Runs one step of `micro_batches` micro-batches under `schedule`.
  /// forward(i, input, output): input is what the previous stage sent (empty on the first
  /// stage, which reads its own data); fill output (empty on the last stage, which computes
  /// the loss). input stays valid until backward(i) returns, so the stage may keep it.
  /// backward(i, output_grad, input_grad): output_grad is the next stage's (empty on the
  /// last stage); fill input_grad (empty on the first stage).
  /// Every stage of the group must run with the same schedule and micro_batches. A message
  /// that does not come within the timeout ends the job, naming the stage it waited for.
  template <class Schedule, StageFunction Forward, StageFunction Backward>
  run_stats run(Schedule schedule, int micro_batches, Forward&& forward, Backward&& backward) {
    detail::require_shape(stages(), stage(), micro_batches);  // before the buffers are sized by it
    const auto start = std::chrono::steady_clock::now();
    run_stats stats;
    std::vector<buffer> inputs(static_cast<std::size_t>(micro_batches));  // held from forward to backward
    int in_flight = 0;
    const std::size_t in_size = input_size(), out_size = output_size();
    ++runs_;
    for (const work& w : order(schedule, stages(), stage(), micro_batches)) {
      buffer& input = inputs[static_cast<std::size_t>(w.micro_batch)];
      if (w.kind == pass::forward) {
        input = make_buffer(in_size);
        if (!first()) receive(input, stage() - 1, forward_tag, w);
        buffer& output = outgoing(out_size);
        timed(stats, [&] { forward(w.micro_batch, const_view(input), view(output)); });
        after_compute();
        if (!last()) send(output, stage() + 1, forward_tag, w);
        stats.max_in_flight = std::max(stats.max_in_flight, ++in_flight);
      } else {
        buffer output_grad = make_buffer(out_size);
        if (!last()) receive(output_grad, stage() + 1, backward_tag, w);
        buffer& input_grad = outgoing(in_size);
        timed(stats, [&] { backward(w.micro_batch, const_view(output_grad), view(input_grad)); });
        after_compute();
        if (!first()) send(input_grad, stage() - 1, backward_tag, w);
        input = make_buffer(0);  // the activation is no longer needed
        --in_flight;
      }
    }
    return finish(stats, start);
  }

  /// Runs the forwards of `micro_batches` micro-batches only (an evaluation): each stage
  /// receives, calls forward(i, input, output) and sends, in micro-batch order, and keeps
  /// nothing for a backward. Every stage of the group must call it with the same count.
  template <StageFunction Forward>
  run_stats run_forward(int micro_batches, Forward&& forward) {
    detail::require_shape(stages(), stage(), micro_batches);
    const auto start = std::chrono::steady_clock::now();
    run_stats stats;
    ++runs_;
    buffer input = make_buffer(input_size());
    for (int i = 0; i < micro_batches; ++i) {
      if (!first()) receive(input, stage() - 1, forward_tag, {pass::forward, i});
      buffer& output = outgoing(output_size());
      timed(stats, [&] { forward(i, const_view(input), view(output)); });
      after_compute();  // before the next receive overwrites input
      if (!last()) send(output, stage() + 1, forward_tag, {pass::forward, i});
    }
    return finish(stats, start);
  }

 private:
  // One tag per direction: between two stages, messages of one tag arrive in send order,
  // which is micro-batch order in both schedules.
  static constexpr int forward_tag = 0x5046, backward_tag = 0x5042;

  comm_type& comm() const { return group_->collectives(); }

  /// Elements of one micro-batch's activation this stage receives, and sends (0 at the ends).
  std::size_t input_size() const { return first() ? 0 : boundaries_[static_cast<std::size_t>(stage() - 1)]; }
  std::size_t output_size() const { return last() ? 0 : boundaries_[static_cast<std::size_t>(stage())]; }

  /// After a callback, on a device backend: the communicator's stream waits for the compute
  /// stream's work so far, before it sends the callback's output or frees or overwrites a
  /// buffer the callback's kernels read.
  void after_compute() {
    if constexpr (!HostBuffers<comm_type>) comm().depend_on(compute_);
  }

  /// Runs `f`, one of the user's callbacks, adding its time to stats.compute_seconds.
  template <class F>
  static void timed(run_stats& stats, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    stats.compute_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  /// A message buffer in the memory the backend's buffers live in: host memory, or the
  /// backend's device memory (nccl), which the user's callbacks then see as spans of it.
  auto make_buffer(std::size_t elements) const {
    if constexpr (HostBuffers<comm_type>) return std::vector<float>(elements);
    else return comm().allocate(elements);
  }
  using buffer = decltype(std::declval<const driver&>().make_buffer(0));
  static std::span<float> view(buffer& b) { return {b.data(), b.size()}; }
  static std::span<const float> const_view(const buffer& b) { return {b.data(), b.size()}; }

  /// Waits for the run's sends and times it.
  run_stats finish(run_stats stats, std::chrono::steady_clock::time_point start) {
    for (pending_send& s : sends_) wait_sent(s);
    sends_.clear();
    sent_.clear();
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
  }
  int size() const { return group_->collectives().size(); }

  /// Receives `into` from stage `from`. Where the backend can probe, waits for the message
  /// only until the deadline; then names the stage that did not send it and ends the job.
  void receive(buffer& into, int from, int tag, const work& w) {
    if constexpr (Probing<comm_type>)
      wait_within_deadline(*group_, job_rank(*group_, from), options_.timeout, [&] { return comm().iprobe(from, tag); },
                           [&] { give_up(from, w, direction::receiving); });
    auto request = comm().irecv(view(into), from, tag);
    comm().wait(request);
  }

  /// A message sent, until it is received: a send completes only once its neighbour takes
  /// it (a large one always; a small one, too, where the neighbour is stopped).
  struct pending_send {
    typename comm_type::request request;
    int to;
    work w;
  };

  /// Waits for a send to be taken, within the deadline where the backend can test.
  void wait_sent(pending_send& s) {
    if constexpr (Testable<comm_type>)
      wait_within_deadline(*group_, job_rank(*group_, s.to), options_.timeout, [&] { return comm().test(s.request); },
                           [&] { give_up(s.to, s.w, direction::sending); });
    else comm().wait(s.request);
  }

  enum class direction { receiving, sending };
  /// Names the stage that did not send (or take) a message, and, where that stage itself
  /// waits for a rank (a tensor partner, say), the rank at the end of the waits.
  [[noreturn]] void give_up(int peer, const work& w, direction d) {
    const auto end = wait_chains(job_control(*group_)).at_end_of(job_rank(*group_, peer));
    const bool received = d == direction::receiving;
    const std::string message = fmt::format(
        "strata ({}): no progress for {:.1f} s: in run {} of the pipeline, the {} of micro-batch {} waited for {} {} "
        "{}, which {} ({}). Raise pipeline::driver_options::timeout or STRATA_TIMEOUT_SECONDS if the stages are only "
        "slow",
        options_.describe(stage()), options_.timeout.count(), runs_, w.kind == pass::forward ? "forward" : "backward",
        w.micro_batch, w.kind == pass::forward ? "the activation" : "the gradient", received ? "from" : "it sent to",
        options_.describe(peer), received ? "did not send it" : "did not take it",
        end.via.empty() ? std::string("stopped, or too slow")
                        : fmt::format("it waits for {}, which is stopped or too slow", describe_job_rank(*group_, end.rank)));
    abort_after_deadline(*group_, message);
  }

  /// A buffer for a message to send, alive until the run's end: a stage does not wait for
  /// its sends as it goes, since its neighbour may be waiting for it to receive first.
  buffer& outgoing(std::size_t elements) { return sent_.emplace_back(make_buffer(elements)); }

  void send(const buffer& data, int to, int tag, const work& w) {
    sends_.push_back({comm().isend(const_view(data), to, tag), to, w});
  }

  Context* group_;
  std::vector<std::size_t> boundaries_;
  driver_options options_;
  [[no_unique_address]] stream_type compute_;
  std::int64_t runs_ = 0;
  std::deque<buffer> sent_;  // a deque: growing it keeps earlier buffers in place
  std::vector<pending_send> sends_;
};

/// The driver of this rank's stage of `grid`'s pipeline; messages name ranks by stage,
/// world rank and mesh coordinates.
template <class Mesh>
auto make_driver(Mesh& grid, std::vector<std::size_t> boundaries, driver_options options = {}) {
  return driver(grid.pipeline(), std::move(boundaries), std::move(options));
}
/// On a device backend (nccl, sim): `compute` is the stream the callbacks' kernels run on.
template <class Mesh, class Stream>
auto make_driver(Mesh& grid, std::vector<std::size_t> boundaries, Stream compute, driver_options options = {})
  requires(!std::is_same_v<Stream, driver_options>)
{
  return driver(grid.pipeline(), std::move(boundaries), compute, std::move(options));
}

}  // namespace strata::pipeline
