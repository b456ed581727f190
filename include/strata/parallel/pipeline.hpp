#pragma once
// Pipeline parallelism: a model's layers split into stages, one per rank of a pipeline
// group, and each batch split into micro-batches that flow through them. The driver calls
// the user's forward and backward of this rank's stage, micro-batch by micro-batch, in the
// order a schedule gives, and moves the activations between neighbouring stages (forward)
// and their gradients back (backward) by point-to-point messages:
//
//   strata::pipeline::driver pipe(mesh.pipeline().collectives(), {hidden * micro_rows, ...});
//   pipe.run(strata::pipeline::one_f_one_b{}, micro_batches,
//            [&](int i, std::span<const float> in, std::span<float> out) { ... },    // forward
//            [&](int i, std::span<const float> dout, std::span<float> din) { ... });  // backward
//   exec.step();  // or one step() per backward with accumulation_steps = micro-batches
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
#include <deque>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"

namespace strata::pipeline {

enum class pass { forward, backward };

/// One unit of a stage's work: the forward or backward of one micro-batch.
struct work {
  pass kind;
  int micro_batch;
  friend bool operator==(const work&, const work&) = default;
};

struct gpipe {
  static constexpr std::string_view name = "GPipe";
};
struct one_f_one_b {
  static constexpr std::string_view name = "1F1B";
};

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
  double seconds = 0.0;          ///< the whole run, from the first work to the last send's completion
  double compute_seconds = 0.0;  ///< inside the user's forward and backward
  int max_in_flight = 0;         ///< micro-batches forwarded and not yet backwarded, at most at once

  /// The fraction of the run not spent computing: waiting for neighbours, and messages.
  double idle_fraction() const { return seconds > 0 ? 1.0 - compute_seconds / seconds : 0.0; }
};

/// Template for the user's callbacks (see the file comment).
template <class F>
concept StageFunction = requires(F& f, int micro_batch, std::span<const float> in, std::span<float> out) { f(micro_batch, in, out); };

/// Runs one stage of a pipeline over `stages`, the pipeline group (rank i is stage i).
template <PointToPoint C>
class driver {
 public:
  /// `boundaries[s]`: the elements of one micro-batch's activation that stage s hands to
  /// stage s + 1 (one entry per boundary: stages - 1 of them, equal on every stage).
  driver(C& stages, std::vector<std::size_t> boundaries) : group_(&stages), boundaries_(std::move(boundaries)) {
    if (boundaries_.size() + 1 != static_cast<std::size_t>(stages.size()))
      throw usage_error(fmt::format("pipeline::driver: {} activation sizes for {} stages; give one per boundary between "
                                    "neighbouring stages ({})",
                                    boundaries_.size(), stages.size(), stages.size() - 1));
  }

  int stage() const { return group_->rank(); }
  int stages() const { return group_->size(); }
  bool first() const { return stage() == 0; }
  bool last() const { return stage() + 1 == stages(); }

  /// Runs one step of `micro_batches` micro-batches under `schedule`.
  /// forward(i, input, output): input is what the previous stage sent (empty on the first
  /// stage, which reads its own data); fill output (empty on the last stage, which computes
  /// the loss). input stays valid until backward(i) returns, so the stage may keep it.
  /// backward(i, output_grad, input_grad): output_grad is the next stage's (empty on the
  /// last stage); fill input_grad (empty on the first stage).
  /// Every stage of the group must run with the same schedule and micro_batches.
  template <class Schedule, StageFunction Forward, StageFunction Backward>
  run_stats run(Schedule schedule, int micro_batches, Forward&& forward, Backward&& backward) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    run_stats stats;
    std::vector<std::vector<float>> inputs(static_cast<std::size_t>(micro_batches));  // held from forward to backward
    int in_flight = 0;
    const std::size_t in_size = first() ? 0 : boundaries_[static_cast<std::size_t>(stage() - 1)];
    const std::size_t out_size = last() ? 0 : boundaries_[static_cast<std::size_t>(stage())];
    auto timed = [&](auto&& f) {
      const auto t = clock::now();
      f();
      stats.compute_seconds += std::chrono::duration<double>(clock::now() - t).count();
    };
    for (const work& w : order(schedule, stages(), stage(), micro_batches)) {
      std::vector<float>& input = inputs[static_cast<std::size_t>(w.micro_batch)];
      if (w.kind == pass::forward) {
        input.resize(in_size);
        if (!first()) receive(input, stage() - 1, forward_tag);
        std::vector<float>& output = outgoing(out_size);
        timed([&] { forward(w.micro_batch, std::span<const float>(input), std::span<float>(output)); });
        if (!last()) send(output, stage() + 1, forward_tag);
        stats.max_in_flight = std::max(stats.max_in_flight, ++in_flight);
      } else {
        std::vector<float> output_grad(out_size);
        if (!last()) receive(output_grad, stage() + 1, backward_tag);
        std::vector<float>& input_grad = outgoing(in_size);
        timed([&] { backward(w.micro_batch, std::span<const float>(output_grad), std::span<float>(input_grad)); });
        if (!first()) send(input_grad, stage() - 1, backward_tag);
        std::vector<float>().swap(input);  // the activation is no longer needed
        --in_flight;
      }
    }
    for (auto& request : sends_) group_->wait(request);
    sends_.clear();
    sent_.clear();
    stats.seconds = std::chrono::duration<double>(clock::now() - start).count();
    return stats;
  }

 private:
  // One tag per direction: between two stages, messages of one tag arrive in send order,
  // which is micro-batch order in both schedules.
  static constexpr int forward_tag = 0x5046, backward_tag = 0x5042;

  void receive(std::vector<float>& into, int from, int tag) {
    auto request = group_->irecv(std::span<float>(into), from, tag);
    group_->wait(request);
  }

  /// A buffer for a message to send, alive until the run's end: a stage does not wait for
  /// its sends as it goes, since its neighbour may be waiting for it to receive first.
  std::vector<float>& outgoing(std::size_t elements) { return sent_.emplace_back(elements); }

  void send(const std::vector<float>& data, int to, int tag) {
    sends_.push_back(group_->isend(std::span<const float>(data), to, tag));
  }

  C* group_;
  std::vector<std::size_t> boundaries_;
  std::deque<std::vector<float>> sent_;  // a deque: growing it keeps earlier buffers in place
  std::vector<typename C::request> sends_;
};

}  // namespace strata::pipeline
