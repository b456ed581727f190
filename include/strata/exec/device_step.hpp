#pragma once
// The nccl executor's step, without CUDA: what happens, in which order, when a gradient is
// marked ready and when step() ends a micro-batch. The device work itself (events, packing,
// collectives, the optimizer's kernels) is the launcher's; the nccl executor is driven by
// this class with its CUDA launcher, and tests/unit/device_path_test.cpp with a fake one,
// so the GPU path's decisions are tested on the CPU. Plain C++ without fmt (nvcc).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/exec/step_bookkeeping.hpp"
#include "strata/sync/launch_order.hpp"
#include "strata/sync/stats.hpp"

namespace strata {

/// What a device step asks of its launcher.
template <class L>
concept DeviceLauncher = requires(L& launcher, std::size_t i, micro_step m, bool marked, std::int64_t update) {
  launcher.gradient_marked(i);       // variable i's gradient is final on the caller's stream
  launcher.gradients_from_caller();  // step() with nothing marked: every gradient is the caller's work so far
  launcher.start_bucket(i, m, marked);  // pack bucket i, accumulate, and reduce it on the last micro-batch
  launcher.update(update);           // average and apply the optimizer to every reduced bucket
};

class device_step {
 public:
  /// `where` ends the subject of error messages (" on rank 3").
  device_step(std::vector<std::string> names, int accumulation_steps, std::string where = "")
      : steps_(std::move(names), accumulation_steps, std::move(where)) {}

  /// The buckets of `variables` variables, in launch order, each with `layout.members`, the
  /// indices of its variables (what sync::plan_device_buckets gives).
  template <class Buckets>
  void plan(const Buckets& buckets, std::size_t variables) {
    bucket_of_.assign(variables, 0);
    std::vector<std::size_t> members;
    for (const auto& b : buckets) {
      for (std::size_t v : b.layout.members) bucket_of_.at(v) = members.size();
      members.push_back(b.layout.members.size());
    }
    order_ = sync::launch_order(std::move(members));
  }

  /// Marks variable `v` (usage_error for a second mark), then starts every bucket that is
  /// complete and next in order.
  template <DeviceLauncher L>
  void grad_ready(std::size_t v, L& launcher) {
    steps_.mark_ready(v);
    launcher.gradient_marked(v);
    order_.member_ready(bucket_of_.at(v));
    start_ready(launcher);
  }

  /// Ends a micro-batch: starts the remaining buckets (all of them, from the caller's work,
  /// if nothing was marked), and on the last micro-batch of an update enqueues the update.
  /// Returns whether it did.
  template <DeviceLauncher L>
  bool step(L& launcher) {
    if (steps_.marking()) {
      steps_.require_all_ready();
    } else {
      launcher.gradients_from_caller();
      order_.all_ready();
      start_ready(launcher);
    }
    const bool last = steps_.phase(updates_).last;
    if (last) launcher.update(++updates_);
    order_.reset();
    steps_.end_micro_batch();
    return last;
  }

  const step_bookkeeping& bookkeeping() const { return steps_; }
  std::int64_t updates() const { return updates_; }

  /// Continues counting from `updates` (a restored checkpoint's): the next update is
  /// `updates` + 1, which Adam's bias correction reads. Between updates only (usage_error
  /// naming `call` otherwise).
  void resume_at(std::int64_t updates, std::string_view call) {
    steps_.require_between_updates(call);
    updates_ = updates;
  }

 private:
  template <DeviceLauncher L>
  void start_ready(L& launcher) {
    const micro_step m = steps_.phase(updates_);
    order_.start_ready([&](std::size_t b) { launcher.start_bucket(b, m, steps_.marking()); });
  }

  step_bookkeeping steps_;
  std::vector<std::size_t> bucket_of_;
  sync::launch_order order_;
  std::int64_t updates_ = 0;
};

}  // namespace strata
