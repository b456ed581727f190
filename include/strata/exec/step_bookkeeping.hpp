#pragma once
// What every executor counts the same way, whatever memory its variables live in: which
// gradients were marked ready in this micro-batch, which micro-batch of an update this is,
// and the usage errors of marking. The host executor and the nccl executor both keep one.
// Plain C++ without fmt, so nvcc compiles it and the CPU tests cover the GPU path's rules.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/error.hpp"
#include "strata/sync/stats.hpp"

namespace strata {

class step_bookkeeping {
 public:
  /// `names` of the variables, in declaration order (for messages); `accumulation_steps`
  /// micro-batches make one update. `where` ends the subject of messages (" on rank 3").
  step_bookkeeping(std::vector<std::string> names, int accumulation_steps, std::string where = "")
      : names_(std::move(names)), where_(std::move(where)), accumulation_steps_(accumulation_steps),
        ready_(names_.size(), false) {
    if (accumulation_steps_ < 1)
      throw usage_error("accumulation_steps" + where_ + " is " + std::to_string(accumulation_steps_) +
                        "; it must be at least 1");
  }

  /// Marks variable `v` ready in this micro-batch; throws usage_error for an unknown
  /// variable or a second mark.
  void mark_ready(std::size_t v) {
    if (v >= ready_.size())
      throw usage_error("grad_ready(" + std::to_string(v) + ")" + where_ + ": the model has " +
                        std::to_string(ready_.size()) + " variables");
    if (ready_[v])
      throw usage_error("grad_ready(\"" + names_[v] + "\")" + where_ +
                        " called twice in one step; mark each gradient once between steps");
    ready_[v] = true;
    marking_ = true;
  }

  /// Whether some gradient was marked in this micro-batch: then step() requires them all.
  bool marking() const { return marking_; }

  /// Throws usage_error naming the first unmarked variable when some, but not all, were marked.
  void require_all_ready() const {
    if (!marking_) return;
    for (std::size_t i = 0; i < ready_.size(); ++i)
      if (!ready_[i])
        throw usage_error("step()" + where_ + ": the gradient of \"" + names_[i] +
                          "\" was never marked ready, but others were; call grad_ready for every variable in a step, "
                          "or for none");
  }

  /// This micro-batch's place in update `updates_done + 1`.
  micro_step phase(std::int64_t updates_done) const {
    return {micro_ == 0, micro_ + 1 == accumulation_steps_, accumulation_steps_, updates_done + 1};
  }

  /// Ends the micro-batch: nothing is marked any more, and the next one starts (a new update
  /// after the last).
  void end_micro_batch() {
    micro_ = micro_ + 1 == accumulation_steps_ ? 0 : micro_ + 1;
    ready_.assign(ready_.size(), false);
    marking_ = false;
  }

  /// Throws usage_error unless the executor is between updates (checkpoints need it).
  void require_between_updates(std::string_view call) const {
    if (micro_ != 0 || marking_)
      throw usage_error(std::string(call) + "() in the middle of an update (" + std::to_string(micro_) + " of " +
                        std::to_string(accumulation_steps_) +
                        " micro-batches done); call it after the step() that updates the parameters");
  }

  const std::string& name(std::size_t v) const { return names_.at(v); }
  int accumulation_steps() const { return accumulation_steps_; }

 private:
  std::vector<std::string> names_;
  std::string where_;
  int accumulation_steps_;
  std::vector<bool> ready_;
  bool marking_ = false;
  int micro_ = 0;  // micro-batches of this update already stepped
};

/// The names of bindings (anything with a `name`), in order: what step_bookkeeping reports.
template <class Bindings>
std::vector<std::string> names_of(const Bindings& bindings) {
  std::vector<std::string> names;
  for (const auto& b : bindings) names.push_back(b.name);
  return names;
}

}  // namespace strata
