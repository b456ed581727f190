#pragma once
// Data-parallel synchronization of replicated SparseRows variables (`Replicate, AllReduce<A>,
// SparseRows`): every rank holds the whole table, and an update exchanges only the rows
// each rank touched. Ranks all-gather their row counts, then their rows and values (padded
// to the largest count, as the collective needs equal blocks); every rank then sums the
// same rows in the same rank order, so replicas stay bitwise equal, and applies the
// optimizer to the touched rows only (untouched rows keep their optimizer state: "lazy").
//
// The collective algorithm of the strategy does not matter here: an all-gather is one
// operation of the backend. The exchange is submitted to the communication thread from
// wait(), after every synchronizer's flush(), so it follows every all-reduce bucket of the
// same update on every rank whatever the order in which gradients were marked ready.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "strata/ckpt/state.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/model/variable.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/sync/comm_thread.hpp"
#include "strata/sync/dense_allreduce.hpp"
#include "strata/sync/resources.hpp"
#include "strata/sync/sparse_rows.hpp"
#include "strata/sync/stats.hpp"
#include "strata/trace/timeline.hpp"

namespace strata::sync {

template <class S>
concept SparseAllGatherStrategy =
    CanonicalStrategy<S> && S::descriptor.placement == placement_kind::replicate && S::descriptor.sparse_rows &&
    S::descriptor.codec == codec_kind::none;  // rows travel in fp32

template <CanonicalStrategy S, Communicator C, Optimizer O>
class sparse_allgather_synchronizer {
  static_assert(RowOptimizer<O>, "replicated SparseRows variables update only their touched rows: they need a RowOptimizer");

 public:
  /// Broadcasts rank 0's tables so every replica starts equal.
  sparse_allgather_synchronizer(const synchronizer_resources<C, O>& resources, const std::vector<std::size_t>& ids)
      : comm_(&resources.collectives), thread_(&resources.thread) {
    for (std::size_t id : ids) {
      variables_.push_back(resources.model_variables[id]);
      states_.push_back(make_state_for(resources.optimizer, variables_.back().elements(), optim::gradient_form::sparse_rows));
      comm_->broadcast(variables_.back().param, 0);
    }
    for (const variable_binding& v : variables_) tables_.emplace_back(row_width(v));
  }

  void gradient_ready(std::size_t, micro_step) {}  // the rows come with sparse_gradient
  void flush(micro_step) {}

  /// Exchanges every variable's rows of this update (on the last micro-batch) and sums them.
  sync_stats wait(micro_step m, std::optional<std::string>& nonfinite, std::chrono::steady_clock::time_point deadline) {
    sync_stats stats;
    if (!m.last) return stats;
    const auto start = std::chrono::steady_clock::now();
    std::future<void> done = thread_->submit([this, m] {
      const auto started = std::chrono::steady_clock::now();
      trace::span traced("all-gather rows", "collective", 0, [&] { return fmt::format("{} under {}", names(), strategy_name<S>()); });
      for (std::size_t k = 0; k < tables_.size(); ++k) exchange(k, m);
      for (const table& t : tables_) traced.add_bytes(t.bytes_sent);
      exchange_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    });
    if (done.wait_until(deadline) == std::future_status::timeout)
      throw stalled(fmt::format("the all-gather of the rows of {} under {}", names(), strategy_name<S>()));
    done.get();
    stats.wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats.comm_seconds = exchange_seconds_;
    for (std::size_t k = 0; k < tables_.size(); ++k) {
      stats.bytes_sent += tables_[k].bytes_sent;
      if (!nonfinite && !std::ranges::all_of(tables_[k].combined.sums(), [](float x) { return std::isfinite(x); }))
        nonfinite = variables_[k].name;
    }
    return stats;
  }

  /// Applies the optimizer to the rows some rank touched, with their averaged gradient.
  void update(const O& optimizer, std::int64_t update) {
    for (std::size_t k = 0; k < variables_.size(); ++k) {
      const row_sums& combined = tables_[k].combined;
      const std::size_t width = combined.width();
      const std::span<const std::uint32_t> order = combined.slots_by_row();  // the table is walked forwards
      const auto offset_of = [&](std::size_t i) { return static_cast<std::size_t>(combined.rows()[order[i]]) * width; };
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (i + rows_ahead < order.size())
          prefetch_row<true>(variables_[k].param.data() + offset_of(i + rows_ahead), width);
        optimizer.update(variables_[k].param.subspan(offset_of(i), width), combined.sum(order[i]), states_[k], update,
                         offset_of(i));
      }
    }
  }

  /// This micro-batch's gradient rows of variable `k` (rows may repeat: their values add).
  void sparse_gradient(std::size_t k, std::span<const std::uint32_t> rows, std::span<const float> values) {
    check_sparse_gradient(variables_[k], rows, values);
    tables_[k].mine.add(rows, values);
  }

  /// Every rank holds the whole table, always current after step(): nothing to fetch.
  void pull(std::size_t k, std::span<const std::uint32_t> rows, std::int64_t, std::chrono::steady_clock::time_point) {
    check_rows(variables_[k], rows, "pull");
  }

  void collect_state(ckpt::state_set& set) { add_replicated_state<O>(set, variables_, states_); }
  void add_memory(memory_use& use) { add_replicated_memory<O>(use, states_); }

  std::span<const variable_binding> variables() const { return variables_; }

 private:
  struct table {
    explicit table(std::size_t width) : mine(width), combined(width) {}
    row_sums mine;      // this update's rows, combined as they are given (micro-batches add)
    row_sums combined;  // after the exchange: every rank's rows, once each, and their averaged gradient
    std::uint64_t bytes_sent = 0;
    // Buffers of the exchange, kept from update to update: it runs every update.
    std::vector<std::uint64_t> counts;
    std::vector<std::byte> send, gathered;
  };

  // On the communication thread.
  void exchange(std::size_t k, micro_step m) {
    table& t = tables_[k];
    const std::size_t width = t.mine.width();
    const auto ranks = static_cast<std::size_t>(comm_->size());
    std::vector<std::uint64_t>& counts = t.counts;
    counts.resize(ranks);
    const std::uint64_t count = t.mine.size();
    comm_->allgather(std::as_bytes(std::span(&count, 1)), std::as_writable_bytes(std::span(counts)));
    const std::size_t most = *std::ranges::max_element(counts);
    // One block per rank: `most` rows, then `most` rows of values; unused slots stay zero.
    const std::size_t block = most * (sizeof(std::uint32_t) + width * sizeof(float));
    t.send.assign(block, std::byte{0});
    if (!t.mine.empty()) {  // (memcpy of nothing from an empty vector's null data is undefined)
      std::memcpy(t.send.data(), t.mine.rows().data(), t.mine.rows().size_bytes());
      std::memcpy(t.send.data() + most * sizeof(std::uint32_t), t.mine.sums().data(), t.mine.sums().size_bytes());
    }
    t.mine.clear();
    t.gathered.resize(block * ranks);
    if (block > 0) comm_->allgather(std::span<const std::byte>(t.send), std::span<std::byte>(t.gathered));
    t.bytes_sent = (ranks - 1) * (block + sizeof(count));

    // Every rank's rows combined in rank order: the same order, so the same sums, everywhere.
    t.combined.clear();
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::byte* from = t.gathered.data() + r * block;
      const std::size_t n = counts[r];
      t.combined.add(std::span(reinterpret_cast<const std::uint32_t*>(from), n),
                     std::span(reinterpret_cast<const float*>(from + most * sizeof(std::uint32_t)), n * width));
    }
    const float scale = 1.0f / static_cast<float>(ranks * static_cast<std::size_t>(m.micro_batches));
    for (float& x : t.combined.sums()) x *= scale;
  }

  std::string names() const {
    std::vector<std::string> n;
    for (const variable_binding& v : variables_) n.push_back(fmt::format("\"{}\"", v.name));
    return fmt::format("{}", fmt::join(n, ", "));
  }

  C* comm_;
  comm_thread* thread_;
  std::vector<variable_binding> variables_;
  std::vector<typename O::state> states_;
  std::vector<table> tables_;
  double exchange_seconds_ = 0.0;
};

}  // namespace strata::sync
