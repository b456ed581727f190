#pragma once
// Parameter-server synchronization of PS<N> variables: each update pushes every variable's
// gradient to the servers hosting its shards (dense variables as soon as grad_ready marks
// them, overlapping backward) and, for dense variables, pulls the new values before step()
// returns, as the variable's consistency allows. Sparse (SparseRows) variables push only the
// rows the batch touched, given with executor::sparse_gradient (step() returns once they are
// posted), and pull only the rows the next batch needs, with executor::pull. The optimizer
// runs on the servers (ps/server.hpp): its state lives only on the shard's host.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "strata/ckpt/state.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/sync/dense_allreduce.hpp"
#include "strata/sync/ps/service.hpp"
#include "strata/sync/resources.hpp"
#include "strata/sync/sparse_rows.hpp"
#include "strata/sync/stats.hpp"

namespace strata::sync {

template <class S>
concept ParameterServerStrategy = CanonicalStrategy<S> && S::descriptor.placement == placement_kind::ps &&
                                  S::descriptor.codec == codec_kind::none;  // pushes travel in fp32

template <CanonicalStrategy S, Communicator C, class O>
class ps_synchronizer {
  static constexpr bool sparse = S::descriptor.sparse_rows;

 public:
  /// Broadcasts rank 0's initial values, as data parallelism does, so that the servers
  /// start from them wherever the shards are placed.
  ps_synchronizer(const synchronizer_resources<C, O>& resources, const std::vector<std::size_t>& ids)
      : service_(resources.parameter_server), optimizer_(&resources.optimizer), rank_(resources.collectives.rank()),
        timeout_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(resources.timeout)) {
    for (std::size_t id : ids) {
      variables_.push_back(resources.model_variables[id]);
      plan_index_.push_back(service_->index_of(id));
      resources.collectives.broadcast(variables_.back().param, 0);
    }
    handled_.assign(variables_.size(), false);
    if constexpr (sparse) {
      for (const variable_binding& v : variables_) gradients_.emplace_back(row_width(v));
      pulled_.resize(variables_.size());
    }
    accumulated_.resize(variables_.size());
  }

  void gradient_ready(std::size_t k, micro_step m) {
    if constexpr (!sparse) take(k, m);
  }

  /// Takes what was not taken yet; on the last micro-batch, asks for the new values of
  /// dense variables.
  void flush(micro_step m) {
    for (std::size_t k = 0; k < variables_.size(); ++k)
      if (!handled_[k]) take(k, m);
    if constexpr (!sparse)
      if (m.last)
        for (std::size_t k = 0; k < variables_.size(); ++k)
          service_->worker().pull_dense(plan_index_[k], variables_[k].param, static_cast<std::uint64_t>(m.update));
  }

  sync_stats wait(micro_step m, std::optional<std::string>&, std::chrono::steady_clock::time_point deadline) {
    const auto start = std::chrono::steady_clock::now();
    handled_.assign(variables_.size(), false);
    sync_stats stats;
    if (!m.last) return stats;
    // Dense variables wait for their new values. Sparse pushes are left to complete in the
    // background (client::begin_pushes): a server handles a worker's messages in order, so
    // the worker's next pull is answered only after its pushes.
    if constexpr (!sparse) complete(deadline);
    completed_ = m.update;
    stats.wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
  }

  /// The servers applied the optimizer already.
  void update(const O&, std::int64_t) {}

  /// This micro-batch's gradient rows of sparse variable `k` (rows may repeat, within and
  /// across the micro-batches of one update; their values add).
  void sparse_gradient(std::size_t k, std::span<const std::uint32_t> rows, std::span<const float> values)
    requires sparse
  {
    check_sparse_gradient(variables_[k], rows, values);
    if (gradients_[k].empty() && pulled_[k].holds(rows)) gradients_[k].add_indexed(pulled_[k], values);
    else gradients_[k].add(rows, values);
  }

  /// Fetches rows of sparse variable `k` into its bound table, as fresh as the consistency
  /// model requires for the worker's next update `update`.
  void pull(std::size_t k, std::span<const std::uint32_t> rows, std::int64_t update,
            std::chrono::steady_clock::time_point deadline)
    requires sparse
  {
    check_rows(variables_[k], rows, "pull");
    pulled_[k].index(rows);  // kept for the gradient of these rows
    const std::vector<std::uint32_t> unique_rows = pulled_[k].sorted_rows();
    service_->worker().pull_sparse(plan_index_[k], unique_rows, variables_[k].param, static_cast<std::uint64_t>(update - 1));
    complete(deadline);
  }

  /// Nothing: values and optimizer state live on the servers (service::held).
  void add_memory(memory_use&) {}

  /// The values and optimizer state of the shards this rank hosts, as sharded tensors named
  /// as data parallelism names them ("w", "w/exp_avg"), so a restore intersects ranges: any
  /// world size, shard layout or replicated strategy restores them. Taken at a consistent
  /// cut, once every worker's pushes of the updates completed so far are applied. A worker's
  /// own copy (dense values, a sparse table's rows) is a cache and is not saved.
  void collect_state(ckpt::state_set& set) {
    snapshots_.clear();
    const ps::plan& plan = service_->layout();
    for (std::size_t k = 0; k < variables_.size(); ++k) {
      const ps::variable_plan& var = plan.variables[plan_index_[k]];
      // A state of one element: optimizers list only the state tensors that hold something
      // (SGD without momentum has none), and an empty state would hold nothing.
      auto names_of = make_state_for(*optimizer_, 1, sparse ? optim::gradient_form::sparse_rows : optim::gradient_form::dense);
      const std::vector<optim::named_state> state = O::tensors(names_of);
      for (std::size_t j = 0; j < var.shards.size(); ++j) {
        const ps::shard_plan& shard = var.shards[j];
        if (shard.host != rank_) continue;
        const std::span<float> buffer = set.scratch(shard.elements * (1 + state.size()));
        service_->worker().snapshot(plan_index_[k], j, buffer, static_cast<std::uint64_t>(completed_));
        snapshots_.push_back({plan_index_[k], j, buffer});
        std::size_t at = 0;  // of this block within the shard
        for (const element_range& r : shard.blocks) {
          for (std::size_t t = 0; t <= state.size(); ++t)
            set.add({t == 0 ? var.binding.name : fmt::format("{}/{}", var.binding.name, state[t - 1].name), var.binding.shape,
                     ckpt::sharing::sharded, buffer.subspan(t * shard.elements + at, r.size), false, r.offset});
          at += r.size;
        }
      }
    }
    complete(std::chrono::steady_clock::now() + timeout_);
  }

  /// After a restore filled the buffers of the last collect_state(): hands every hosted shard
  /// its values and state, with every worker's clock set to `update`.
  void restore_servers(std::int64_t update, std::chrono::steady_clock::time_point deadline) {
    for (const snapshot& s : snapshots_)
      service_->worker().restore(s.variable, s.shard, s.buffer, static_cast<std::uint64_t>(update));
    complete(deadline);
    completed_ = update;
  }

  /// Once every rank's servers are restored: dense variables fetch their restored values.
  void refresh(std::chrono::steady_clock::time_point deadline) {
    if constexpr (!sparse) {
      for (std::size_t k = 0; k < variables_.size(); ++k)
        service_->worker().pull_dense(plan_index_[k], variables_[k].param, static_cast<std::uint64_t>(completed_));
      complete(deadline);
    }
  }

  std::span<const variable_binding> variables() const { return variables_; }

 private:
  // Variable k's gradient of this micro-batch: accumulated, or, on the last micro-batch,
  // pushed with what was accumulated, as the mean over the micro-batches.
  void take(std::size_t k, micro_step m) {
    handled_[k] = true;
    const auto clock = static_cast<std::uint64_t>(m.update - 1);
    const float share = 1.0f / static_cast<float>(m.micro_batches);
    if constexpr (sparse) {
      if (!m.last) return;  // rows accumulate in sparse_gradient
      if (m.micro_batches > 1)
        for (float& x : gradients_[k].sums()) x *= share;
      service_->worker().push_sparse(plan_index_[k], gradients_[k], clock, *optimizer_);
      gradients_[k].clear();
    } else if (m.micro_batches == 1) {
      service_->worker().push_dense(plan_index_[k], variables_[k].grad, clock, *optimizer_);
    } else {
      std::vector<float>& sum = accumulated_[k];
      const std::span<const float> grad = variables_[k].grad;
      if (m.first) sum.assign(grad.begin(), grad.end());
      else
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += grad[i];
      if (!m.last) return;
      for (float& x : sum) x *= share;
      service_->worker().push_dense(plan_index_[k], sum, clock, *optimizer_);
    }
  }

  void complete(std::chrono::steady_clock::time_point deadline) {
    try {
      service_->worker().complete(deadline);
    } catch (const ps::no_reply& e) {
      throw stalled(fmt::format("{} under {}", e.what(), strategy_name<S>()), e.servers);
    }
  }

  struct snapshot {
    std::size_t variable, shard;  // in the plan
    std::span<float> buffer;      // values, then each optimizer state tensor
  };

  ps::service<C, O>* service_;
  const O* optimizer_;
  int rank_;
  std::chrono::steady_clock::duration timeout_;
  std::int64_t completed_ = 0;       // updates this worker completed
  std::vector<snapshot> snapshots_;  // of the last collect_state; they live in its state_set
  std::vector<variable_binding> variables_;
  std::vector<std::size_t> plan_index_;
  std::vector<bool> handled_;  // this micro-batch's gradient was taken
  std::vector<row_sums> gradients_;  // sparse: this update's rows, combined as they are given
  std::vector<indexed_ids> pulled_;  // sparse: the ids of each variable's last pull
  std::vector<std::vector<float>> accumulated_;  // dense: the micro-batches' sum so far
};

}  // namespace strata::sync
