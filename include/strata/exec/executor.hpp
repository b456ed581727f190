#pragma once
// The executor drives one model: it owns a synchronizer per strategy, the communication
// thread they share, and the per-step bookkeeping (which gradients are ready, accumulation,
// statistics). The training loop stays the user's:
//
//   for (...) {
//     forward_backward(batch, [&](variable_id v) { exec.grad_ready(v); });  // optional overlap
//     exec.step();
//   }
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/exec/synchronizer_table.hpp"
#include "strata/model/model.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/sync/stats.hpp"

namespace strata {

struct executor_options {
  sync::bucket_options buckets;
  sync::allreduce_options allreduce;
  sync::compression_options compression;
  /// Micro-batches per update: gradients of K-1 micro-batches are accumulated locally and
  /// only the K-th communicates.
  int accumulation_steps = 1;
};

/// Statistics of one step plus whether it updated the parameters.
struct step_stats : sync_stats {
  bool updated = false;
  bool skipped = false;  ///< a non-finite gradient was found and on_nonfinite is skip_step
  double seconds = 0.0;  ///< wall time of step() itself
};

template <CommContext Context, class Model, Optimizer O>
class executor;

template <CommContext Context, CanonicalStrategy... Strategies, Optimizer O>
class executor<Context, model<Strategies...>, O> {
  using comm_type = std::remove_reference_t<decltype(std::declval<Context&>().collectives())>;

 public:
  using model_type = model<Strategies...>;

  executor(Context& context, model_type& m, O optimizer, executor_options options = {})
      : model_(&m), optimizer_(std::move(optimizer)), options_(options),
        thread_(std::make_unique<sync::comm_thread>()),
        synchronizers_(make_synchronizer<Strategies>(context, m)...), ready_(m.variables().size(), false) {
    if (options.accumulation_steps < 1)
      throw usage_error(fmt::format("executor: accumulation_steps must be at least 1, got {}", options.accumulation_steps));
    for (std::size_t i = 0; i < m.variables().size(); ++i) local_.push_back(count_before(i));
  }

  ~executor() { thread_.reset(); }  // drain communication before the buffers it uses go away
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  /// Marks variable `v`'s gradient final for this micro-batch, so its bucket can start
  /// communicating while backward goes on. Optional: step() handles unmarked variables, but
  /// once one variable of a step is marked, all must be.
  void grad_ready(variable_id v) {
    if (ready_.at(v.index))
      throw usage_error(fmt::format("grad_ready(\"{}\") called twice in one step; mark each gradient once between steps",
                                    (*model_)[v].name));
    ready_[v.index] = true;
    overlapping_ = true;
    visit(model_->strategy_of(v), [&](auto& s) { s.gradient_ready(local_[v.index], phase()); });
  }
  void grad_ready(std::string_view name) { grad_ready(model_->id(name)); }

  /// Ends a micro-batch: on the last of `accumulation_steps` it reduces, averages and
  /// updates the parameters (returns updated = true); otherwise it only accumulates.
  step_stats step() {
    const auto start = std::chrono::steady_clock::now();
    if (overlapping_) require_all_ready();
    const micro_step m = phase();
    std::apply([&](auto&... s) { (s.flush(m), ...); }, synchronizers_);
    step_stats stats;
    std::optional<std::string> nonfinite;
    std::apply([&](auto&... s) { ((static_cast<sync_stats&>(stats) += s.wait(m, nonfinite)), ...); }, synchronizers_);
    micro_ = m.last ? 0 : micro_ + 1;
    ready_.assign(ready_.size(), false);
    overlapping_ = false;
    total_ += stats;
    if (m.last && nonfinite) {
      // Every rank saw the same non-finite sum, so every rank decides the same way.
      if (options_.compression.on_nonfinite == sync::nonfinite_policy::raise)
        throw numeric_error(fmt::format("the averaged gradient of \"{}\" is NaN or infinite (some rank produced "
                                        "non-finite values); parameters were not updated. Lower the learning rate, check "
                                        "the loss, or set compression.on_nonfinite = skip_step",
                                        *nonfinite));
      stats.skipped = true;
    } else if (m.last) {
      ++updates_;
      std::apply([&](auto&... s) { (s.update(optimizer_, updates_), ...); }, synchronizers_);
      stats.updated = true;
    }
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
  }

  /// The optimizer's hyper-parameters may be changed between steps (learning-rate schedules).
  O& optimizer() { return optimizer_; }
  const sync_stats& total() const { return total_; }
  std::int64_t updates() const { return updates_; }

 private:
  template <class S>
  synchronizer_t<S, comm_type, O> make_synchronizer(Context& context, model_type& m) {
    std::vector<variable_binding> variables;
    for (variable_id id : m.template ids_of<S>()) variables.push_back(m[id]);
    return {context.collectives(), std::move(variables), {options_.buckets, options_.allreduce, options_.compression},
            optimizer_, *thread_};
  }

  std::size_t count_before(std::size_t i) const {
    std::size_t n = 0;
    for (std::size_t j = 0; j < i; ++j) n += model_->strategy_of({j}) == model_->strategy_of({i});
    return n;
  }

  micro_step phase() const {
    return {micro_ == 0, micro_ + 1 == options_.accumulation_steps, options_.accumulation_steps, updates_ + 1};
  }

  void require_all_ready() const {
    for (std::size_t i = 0; i < ready_.size(); ++i)
      if (!ready_[i])
        throw usage_error(fmt::format("step(): the gradient of \"{}\" was never marked ready, but others were; call "
                                      "grad_ready for every variable in a step, or for none",
                                      model_->variables()[i].name));
  }

  template <class F>
  void visit(std::size_t strategy, F&& f) {
    std::size_t k = 0;
    std::apply([&](auto&... s) { ((k++ == strategy ? f(s) : void()), ...); }, synchronizers_);
  }

  model_type* model_;
  O optimizer_;
  executor_options options_;
  std::unique_ptr<sync::comm_thread> thread_;
  std::tuple<synchronizer_t<Strategies, comm_type, O>...> synchronizers_;
  std::vector<bool> ready_;
  std::vector<std::size_t> local_;  // index of each variable within its synchronizer
  bool overlapping_ = false;
  int micro_ = 0;
  std::int64_t updates_ = 0;
  sync_stats total_;
};

/// Builds the executor for `m` on `context`'s backend.
template <CommContext Context, class Model, Optimizer O>
auto make_executor(Context& context, Model& m, O optimizer, executor_options options = {}) {
  return executor<Context, Model, O>(context, m, std::move(optimizer), options);
}

}  // namespace strata
