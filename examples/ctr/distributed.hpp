#pragma once
// Data-parallel training of the Wide&Deep student with strata, shared by the ctr_train
// example and the ssp_straggler benchmark. A strategy builder chooses every variable's
// strategy: Parallax (default) all-reduces the MLP and puts the two tables on parameter
// servers; PartitionedPS puts everything on servers; AllReduce replicates everything (the
// tables' touched rows are all-gathered).
//
// Each update, every rank draws its shard of the global batch, pulls the table rows the
// shard reads, runs forward and backward, hands strata the tables' touched rows and steps.
// Dense tensors get Adam and the tables Adagrad (optim::dense_and_sparse), wherever the
// strategy runs the optimizer.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <strata/strata.hpp>

#include "auc.hpp"
#include "data.hpp"
#include "model.hpp"

namespace ctr {

/// The static shapes the builders see: the default model_config.
inline constexpr std::size_t table_rows = std::size_t{1} << 20, embedding_dim = 32, fields = 12, hidden1 = 256,
                             hidden2 = 128;

struct distributed_options {
  std::size_t global_batch = 512;  ///< split evenly over the ranks
  long updates = 3000;
  long updates_per_epoch = 750;  ///< between held-out evaluations (0: none)
  float embedding_lr = 0.1f;     ///< Adagrad on the tables
  float dense_lr = 1e-3f;        ///< Adam on the MLP
  std::uint64_t seed = 1;
  /// Transient stragglers: each rank's update is independently delayed, with this
  /// probability, by straggler_delay (seeded by seed and rank).
  double straggler_probability = 0.0;
  std::chrono::duration<double> straggler_delay{0.0};
};

/// One epoch's progress, as rank 0 saw it.
struct epoch_report {
  int epoch = 0;
  double loss = 0.0;  ///< mean training loss of the epoch over all ranks
  double auc = 0.0;   ///< held-out AUC after the epoch (rank 0)
  double samples_per_second = 0.0;
  double seconds = 0.0;  ///< training time of the epoch, evaluation excluded
};

struct distributed_result {
  double auc = 0.0;            ///< held-out AUC at the end (rank 0; 0 without evaluation)
  double train_seconds = 0.0;  ///< wall time of the updates, evaluations excluded
  long updates = 0;
  std::vector<std::string> strategies;  ///< "name: canonical strategy" per variable
  std::vector<std::string> servers;     ///< "name on ranks 0,2": the ranks serving each PS variable's shards
};

namespace detail {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double sum_over_ranks(strata::mpi::context& ctx, double value) {
  auto request = ctx.control().iallreduce_sum(std::span<double>(&value, 1));
  ctx.control().wait(request);
  return value;
}

/// The longest of every rank's `seconds`, on every rank (collective).
inline double slowest_over_ranks(strata::mpi::context& ctx, double seconds) {
  std::vector<double> all(static_cast<std::size_t>(ctx.size()));
  ctx.control().allgather(std::as_bytes(std::span<const double>(&seconds, 1)), std::as_writable_bytes(std::span<double>(all)));
  return *std::ranges::max_element(all);
}

/// The model's variables, their strategies chosen by builder B from their static shapes.
template <class B>
auto declare_model(wide_deep& net) {
  using strata::dims, strata::SparseRows;
  using V = strata::build<B>;
  const model_config& c = net.config();
  if (c.table_rows != table_rows || c.embedding_dim != embedding_dim || c.fields != fields || c.hidden1 != hidden1 ||
      c.hidden2 != hidden2)
    throw std::invalid_argument("ctr::train_distributed: the model's shapes must be the defaults the builders were given");
  const std::vector<sparse_table> tables = net.sparse_tables();
  const std::vector<examples::tensor> t = net.tensors();
  return strata::make_model(
      V::template variable<dims<table_rows, embedding_dim>, SparseRows>(tables[0].name, tables[0].param, {}),
      V::template variable<dims<table_rows, 1>, SparseRows>(tables[1].name, tables[1].param, {}),
      V::template variable<dims<hidden1, fields * embedding_dim>>(t[0].name, t[0].param, t[0].grad),
      V::template variable<dims<hidden1>>(t[1].name, t[1].param, t[1].grad),
      V::template variable<dims<hidden2, hidden1>>(t[2].name, t[2].param, t[2].grad),
      V::template variable<dims<hidden2>>(t[3].name, t[3].param, t[3].grad),
      V::template variable<dims<1, hidden2>>(t[4].name, t[4].param, t[4].grad),
      V::template variable<dims<1>>(t[5].name, t[5].param, t[5].grad));
}

}  // namespace detail

/// Trains the student on every rank of `ctx` (collective) with builder B's strategies and
/// returns what rank 0 measured. `held_out` may be empty (no evaluation); `on_epoch` is
/// called on rank 0 after each epoch's evaluation.
template <class B>
distributed_result train_distributed(strata::mpi::context& ctx, const generator& data, const batch& held_out,
                                     const distributed_options& o,
                                     const std::function<void(const epoch_report&)>& on_epoch = {}) {
  const int rank = ctx.rank(), ranks = ctx.size();
  wide_deep net(model_config{.fields = fields, .table_rows = table_rows, .seed = o.seed});
  auto model = detail::declare_model<B>(net);
  using optimizer = strata::optim::dense_and_sparse<strata::optim::adam, strata::optim::adagrad>;
  auto exec = strata::make_executor(ctx, model, optimizer{{.lr = o.dense_lr}, {.lr = o.embedding_lr}},
                                    strata::executor_options{.ps_servers = B::servers});
  const strata::variable_id embedding = model.id("embedding"), wide = model.id("wide");

  distributed_result result;
  for (const strata::variable_binding& v : model.variables()) result.strategies.push_back(v.name + ": " + v.strategy);
  if (const strata::sync::ps::plan* placed = exec.parameter_server_plan())
    for (const strata::sync::ps::variable_plan& v : placed->variables) {
      std::vector<int> ranks;
      for (const strata::sync::ps::shard_plan& s : v.shards) ranks.push_back(s.host);
      result.servers.push_back(fmt::format("{} on ranks {}", v.binding.name, fmt::join(ranks, ",")));
    }

  std::mt19937_64 straggler_engine(o.seed * 1'000'003 + static_cast<std::uint64_t>(rank));
  std::bernoulli_distribution straggles(o.straggler_probability);
  batch shard;
  std::vector<float> predictions(held_out.size());
  const std::vector<std::uint32_t> held_out_rows = held_out.size() > 0 ? wide_deep::rows_needed(held_out) : std::vector<std::uint32_t>{};
  const long per_epoch = o.updates_per_epoch > 0 ? o.updates_per_epoch : o.updates;
  double loss_sum = 0.0, epoch_seconds = 0.0;
  for (long u = 0; u < o.updates; ++u) {
    const auto start = std::chrono::steady_clock::now();
    data.draw_train_shard(static_cast<std::uint64_t>(u), o.global_batch, rank, ranks, shard);
    const std::vector<std::uint32_t> rows = wide_deep::rows_needed(shard);
    exec.pull(embedding, rows);
    exec.pull(wide, rows);
    loss_sum += net.forward_backward(shard);
    for (const sparse_table& table : net.sparse_tables())
      exec.sparse_gradient(table.name == "wide" ? wide : embedding, table.grad->rows, table.grad->values);
    if (o.straggler_probability > 0 && straggles(straggler_engine)) std::this_thread::sleep_for(o.straggler_delay);
    exec.step();
    epoch_seconds += detail::seconds_since(start);

    if ((u + 1) % per_epoch != 0 && u + 1 != o.updates) continue;
    const long epoch_updates = (u % per_epoch) + 1;
    const double loss = detail::sum_over_ranks(ctx, loss_sum / static_cast<double>(epoch_updates)) / ranks;
    result.train_seconds += epoch_seconds;
    if (rank == 0 && held_out.size() > 0) {
      exec.pull(embedding, held_out_rows);  // as fresh as this rank's consistency allows
      exec.pull(wide, held_out_rows);
      net.predict(held_out, predictions);
      result.auc = auc(predictions, held_out.labels);
    }
    if (rank == 0 && on_epoch)
      on_epoch({static_cast<int>(u / per_epoch) + 1, loss, result.auc,
                static_cast<double>(epoch_updates) * static_cast<double>(o.global_batch) / epoch_seconds, epoch_seconds});
    loss_sum = 0.0;
    epoch_seconds = 0.0;
  }
  result.updates = o.updates;
  return result;
}

}  // namespace ctr
