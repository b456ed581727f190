#pragma once
// Parameter-server conformance cases, run on loopback ranks by the unit tests and in real
// processes under mpiexec. Gradients are small integers, so sums over ranks are exact in any
// order and expected values are known in closed form.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <time.h>
#include <vector>

#include "conformance/cases.hpp"

namespace strata::conformance {

using PSDense = Strategy<PS<3>, Partition<0>>;                             // uneven: 7 rows over 3 shards
using PSSparse = Strategy<PS<2>, Partition<0>, SparseRows>;               // BSP
template <int S>
using PSSparseSSP = Strategy<PS<2>, Partition<0>, SparseRows, Consistency<SSP<S>>>;
template <int S, CommContext Context>
std::uint64_t ssp_bound_holds(Context& ctx, std::uint64_t seed, int updates);

/// Dense push and pull over uneven shards with SGD on the servers: after each update every
/// rank holds value - lr * mean gradient, exactly.
template <CommContext Context>
void ps_push_pull_uneven_shards(Context& ctx) {
  const int ranks = ctx.collectives().size(), rank = ctx.collectives().rank();
  std::vector<float> w(7 * 5), gw(7 * 5), b(3), gb(3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);  // rank 0's start wins
  model_of<PSDense, Strategy<PS<1>>> m;
  m.add(variable<PSDense>("w", w, gw, {7, 5}));
  m.add(variable<Strategy<PS<1>>>("b", b, gb, {3}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f});
  const auto& plan = *exec.parameter_server_plan();
  expect(plan.variables[0].shards.size() == 3 && plan.variables[0].shards[0].rows == 3 &&
             plan.variables[0].shards[1].rows == 2 && plan.variables[0].shards[2].rows == 2,
         "7 rows over 3 shards should be 3, 2, 2");
  std::vector<float> expected(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) expected[i] = static_cast<float>(i);
  for (int u = 1; u <= 3; ++u) {
    // Rank r's gradient: (i % 4) * (r + 1), whose mean over ranks is (i % 4) * (ranks + 1) / 2.
    for (std::size_t i = 0; i < gw.size(); ++i) gw[i] = static_cast<float>((i % 4) * static_cast<std::size_t>(rank + 1));
    std::ranges::fill(gb, 1.0f);
    exec.step();
    for (std::size_t i = 0; i < w.size(); ++i) expected[i] -= static_cast<float>(i % 4) * static_cast<float>(ranks + 1) / 2.0f;
    for (std::size_t i = 0; i < w.size(); ++i)
      expect(w[i] == expected[i], "rank {} update {}: w[{}] = {}, expected {}", rank, u, i, w[i], expected[i]);
    expect(b[0] == -static_cast<float>(u), "rank {}: b[0] = {} after {} updates", rank, b[0], u);
  }
}

/// Adam and Adagrad on the servers (BSP) give what the same optimizer gives locally on the
/// mean gradient.
template <CommContext Context, class O>
void ps_server_optimizer_matches_reference(Context& ctx, O optimizer) {
  const int ranks = ctx.collectives().size(), rank = ctx.collectives().rank();
  std::vector<float> w(40, 0.5f), gw(40), reference(40, 0.5f);
  auto m = make_model(variable<Strategy<PS<2>, Partition<0>>>("w", w, gw, {8, 5}));
  auto exec = make_executor(ctx, m, optimizer);
  auto state = optimizer.make_state(reference.size());
  for (int u = 1; u <= 4; ++u) {
    std::vector<float> mean(40);
    for (std::size_t i = 0; i < gw.size(); ++i) {
      gw[i] = static_cast<float>(static_cast<int>(i % 5) - 2 + rank * u);
      float sum = 0;
      for (int r = 0; r < ranks; ++r) sum += static_cast<float>(static_cast<int>(i % 5) - 2 + r * u);
      mean[i] = sum * (1.0f / static_cast<float>(ranks));
    }
    exec.step();
    optimizer.update(reference, mean, state, u);
    for (std::size_t i = 0; i < w.size(); ++i)
      expect(std::abs(w[i] - reference[i]) <= 1e-6f * std::max(1.0f, std::abs(reference[i])),
             "rank {} update {}: w[{}] = {} but the local optimizer gives {}", rank, u, i, w[i], reference[i]);
  }
}

/// Sparse rows: only touched rows change; repeated rows of one rank add; rows from all
/// ranks are averaged. `Sparse` is a parameter-server strategy under BSP, or a replicated one
/// (an all-gather of rows).
template <class Sparse, CommContext Context>
void sparse_rows_combine_duplicates(Context& ctx) {
  const int ranks = ctx.collectives().size(), rank = ctx.collectives().rank();
  constexpr std::size_t rows = 10, width = 3;
  std::vector<float> table(rows * width, 0.0f);
  auto m = make_model(variable<Sparse>("emb", table, {}, {rows, width}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f});
  const variable_id emb{0};
  // Every rank: row 2 twice (values 1 and 2), row 7 once (value rank + 1); rank 0 also row 9.
  std::vector<std::uint32_t> touched = {2, 7, 2};
  std::vector<float> values = {1, 1, 1, static_cast<float>(rank + 1), static_cast<float>(rank + 1),
                               static_cast<float>(rank + 1), 2, 2, 2};
  if (rank == 0) {
    touched.push_back(9);
    values.insert(values.end(), {6, 6, 6});
  }
  exec.pull(emb, touched);
  exec.sparse_gradient(emb, touched, values);
  exec.step();
  const std::vector<std::uint32_t> all = {0, 2, 7, 9};
  exec.pull(emb, all);
  const float mean_rank = static_cast<float>(ranks + 1) / 2.0f;
  const std::map<std::uint32_t, float> expected = {
      {0, 0.0f}, {2, -3.0f}, {7, -mean_rank}, {9, -6.0f / static_cast<float>(ranks)}};
  for (const auto& [row, value] : expected)
    for (std::size_t c = 0; c < width; ++c)
      expect(table[row * width + c] == value, "rank {}: row {} is {}, expected {}", rank, row, table[row * width + c], value);
}

/// A BSP server merges a clock's pushes by row: rank r touches the rows with bit r set (12
/// rows over 2 shards), given in descending order, so pushes overlap in some rows, are
/// disjoint in others, and some rank's push to a shard is empty (rank 3's to rows 0-5;
/// with 3 ranks, none touches rows 8-11). Every row's value is exactly the mean of its
/// pushes: small integers, which sum alike in any arrival order.
template <CommContext Context>
void sparse_bsp_pushes_merge_by_row(Context& ctx) {
  const int ranks = ctx.collectives().size(), rank = ctx.collectives().rank();
  constexpr std::size_t rows = 12, width = 2;
  std::vector<float> table(rows * width, 0.0f);
  auto m = make_model(variable<PSSparse>("emb", table, {}, {rows, width}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f});
  const variable_id emb{0};
  auto touches = [](int r, std::size_t row) { return r < 8 && ((row >> r) & 1u) != 0; };
  auto value = [](int r, std::size_t row) { return static_cast<float>((r + 1) * static_cast<int>(row + 1)); };
  std::vector<std::uint32_t> touched;
  std::vector<float> values;
  for (std::size_t row = rows; row-- > 0;)
    if (touches(rank, row)) {
      touched.push_back(static_cast<std::uint32_t>(row));
      values.insert(values.end(), width, value(rank, row));
    }
  exec.sparse_gradient(emb, touched, values);
  exec.step();
  std::vector<std::uint32_t> all(rows);
  std::iota(all.begin(), all.end(), 0u);
  exec.pull(emb, all);
  for (std::size_t row = 0; row < rows; ++row) {
    float sum = 0.0f;
    for (int r = 0; r < ranks; ++r)
      if (touches(r, row)) sum += value(r, row);
    const float expected = 0.0f - 1.0f * (sum * (1.0f / static_cast<float>(ranks)));
    for (std::size_t c = 0; c < width; ++c)
      expect(table[row * width + c] == expected, "rank {}: row {} is {}, the mean of its pushes gives {}", rank, row,
             table[row * width + c], expected);
  }
}

/// A sparse step returns once its pushes are posted: many updates of pushes with no pull
/// between them all arrive and are applied, in order, by the time a pull answers. Rows of
/// `width` floats: wide ones make each push too large to be sent eagerly, so its buffer is
/// still in use while the next update writes its own.
template <class Sparse, CommContext Context>
void sparse_pushes_without_pulls_all_arrive(Context& ctx, std::size_t width = 3) {
  const int rank = ctx.collectives().rank();
  constexpr std::size_t rows = 10, updates = 50;
  std::vector<float> table(rows * width, 0.0f);
  auto m = make_model(variable<Sparse>("emb", table, {}, {rows, width}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f});
  const variable_id emb{0};
  for (std::size_t u = 0; u < updates; ++u) {  // update u: row u % rows, every rank's gradient 1 (rank 0's twice)
    std::vector<std::uint32_t> touched(rank == 0 ? 2 : 1, static_cast<std::uint32_t>(u % rows));
    exec.sparse_gradient(emb, touched, std::vector<float>(touched.size() * width, rank == 0 ? 0.5f : 1.0f));
    exec.step();
  }
  std::vector<std::uint32_t> all(rows);
  std::iota(all.begin(), all.end(), 0u);
  exec.pull(emb, all);
  const float expected = -static_cast<float>(updates / rows);  // each row: updates / rows updates of mean gradient 1
  for (std::size_t i = 0; i < table.size(); ++i)
    expect(table[i] == expected, "rank {}: element {} is {}, expected {}", rank, i, table[i], expected);
}

/// optim::dense_and_sparse: Adam for the dense variables and Adagrad for the SparseRows ones,
/// on the servers and on replicas alike. Every rank gives the same gradient, so the mean is
/// that gradient and the local reference is exact.
template <CommContext Context>
void dense_and_sparse_optimizers_by_variable(Context& ctx) {
  const int rank = ctx.collectives().rank();
  constexpr std::size_t rows = 6, width = 2;
  const optim::dense_and_sparse<optim::adam, optim::adagrad> optimizer{{.lr = 0.01f}, {.lr = 0.5f}};
  std::vector<float> w(4, 1.0f), gw(4), d(4, 1.0f), gd(4), e(rows * width, 1.0f), r(rows * width, 1.0f);
  using DensePS = Strategy<PS<1>>;
  using SparsePS = Strategy<PS<1>, SparseRows>;
  using DenseReplicated = Strategy<AllReduce<Ring>>;
  using SparseReplicated = Strategy<AllReduce<Ring>, SparseRows>;
  model_of<DensePS, SparsePS, DenseReplicated, SparseReplicated> m;
  m.add(variable<DensePS>("w", w, gw, {4}));
  m.add(variable<SparsePS>("e", e, {}, {rows, width}));
  m.add(variable<DenseReplicated>("d", d, gd, {4}));
  m.add(variable<SparseReplicated>("r", r, {}, {rows, width}));
  auto exec = make_executor(ctx, m, optimizer);
  std::vector<float> dense_reference(4, 1.0f), sparse_reference(rows * width, 1.0f);
  auto adam_state = optimizer.dense.make_state(4);
  auto adagrad_state = optimizer.sparse.make_state(rows * width);
  const std::vector<std::uint32_t> touched = {1, 4};
  for (int u = 1; u <= 3; ++u) {
    const std::vector<float> dense_grad = {0.5f, -1.0f, 2.0f, static_cast<float>(u)};
    const std::vector<float> row_grads = {1.0f, -2.0f, 0.25f * static_cast<float>(u), 4.0f};
    std::ranges::copy(dense_grad, gw.begin());
    std::ranges::copy(dense_grad, gd.begin());
    exec.pull(variable_id{1}, touched);
    exec.sparse_gradient(variable_id{1}, touched, row_grads);
    exec.sparse_gradient(variable_id{3}, touched, row_grads);
    exec.step();
    optimizer.dense.update(dense_reference, dense_grad, adam_state, u);
    for (std::size_t i = 0; i < touched.size(); ++i)
      optimizer.sparse.update(std::span<float>(sparse_reference).subspan(touched[i] * width, width),
                              std::span<const float>(row_grads).subspan(i * width, width), adagrad_state, u,
                              touched[i] * width);
  }
  exec.pull(variable_id{1}, std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5});
  auto close = [](float a, float b) { return std::abs(a - b) <= 1e-6f * std::max(1.0f, std::abs(b)); };
  for (std::size_t i = 0; i < 4; ++i) {
    expect(close(w[i], dense_reference[i]), "rank {}: PS w[{}] = {}, Adam gives {}", rank, i, w[i], dense_reference[i]);
    expect(close(d[i], dense_reference[i]), "rank {}: replicated d[{}] = {}, Adam gives {}", rank, i, d[i], dense_reference[i]);
  }
  for (std::size_t i = 0; i < e.size(); ++i) {
    expect(close(e[i], sparse_reference[i]), "rank {}: PS e[{}] = {}, Adagrad gives {}", rank, i, e[i], sparse_reference[i]);
    expect(close(r[i], sparse_reference[i]), "rank {}: replicated r[{}] = {}, Adagrad gives {}", rank, i, r[i],
           sparse_reference[i]);
  }
}

/// Gradient accumulation on PS variables: three micro-batches per update (dense gradients,
/// and sparse rows that repeat across micro-batches) update the servers as one batch of
/// their mean would.
template <CommContext Context>
void ps_accumulation_equals_mean(Context& ctx) {
  const int rank = ctx.collectives().rank();
  constexpr int micro = 3;
  auto dense_grad = [&](int j, int u, std::size_t i) { return static_cast<float>(static_cast<int>(i % 3) + j + u + rank); };
  auto rows_of = [](int j) { return std::vector<std::uint32_t>{static_cast<std::uint32_t>(j), 5, 2}; };
  auto run = [&](int accumulation) {
    using Dense = Strategy<PS<2>, Partition<0>>;
    std::vector<float> w(6 * 2, 1.0f), gw(6 * 2), table(8 * 2, 1.0f);
    model_of<Dense, PSSparse> m;
    m.add(variable<Dense>("w", w, gw, {6, 2}));
    m.add(variable<PSSparse>("emb", table, {}, {8, 2}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.5f}, {.accumulation_steps = accumulation});
    const variable_id emb{1};
    for (int u = 0; u < 2; ++u) {
      if (accumulation == 1) {  // one batch: the mean of the micro-batches
        for (std::size_t i = 0; i < gw.size(); ++i)
          gw[i] = (dense_grad(0, u, i) + dense_grad(1, u, i) + dense_grad(2, u, i)) * (1.0f / micro);
        std::vector<std::uint32_t> rows;
        std::vector<float> values;
        for (int j = 0; j < micro; ++j)
          for (std::uint32_t row : rows_of(j)) {
            rows.push_back(row);
            values.insert(values.end(), 2, static_cast<float>(j + 1) * (1.0f / micro));
          }
        exec.pull(emb, rows);
        exec.sparse_gradient(emb, rows, values);
        exec.step();
        continue;
      }
      for (int j = 0; j < micro; ++j) {
        for (std::size_t i = 0; i < gw.size(); ++i) gw[i] = dense_grad(j, u, i);
        exec.pull(emb, rows_of(j));
        exec.sparse_gradient(emb, rows_of(j), std::vector<float>(6, static_cast<float>(j + 1)));
        const step_stats stats = exec.step();
        expect(stats.updated == (j == micro - 1), "rank {}: micro-batch {} of update {} updated = {}", rank, j, u, stats.updated);
      }
    }
    std::vector<std::uint32_t> all(8);
    std::iota(all.begin(), all.end(), 0u);
    exec.pull(emb, all);
    w.insert(w.end(), table.begin(), table.end());
    return w;
  };
  const std::vector<float> accumulated = run(micro), mean = run(1);
  for (std::size_t i = 0; i < mean.size(); ++i)
    expect(std::abs(accumulated[i] - mean[i]) <= 1e-5f * std::max(1.0f, std::abs(mean[i])),
           "rank {}: value {} is {} with accumulation, {} with one batch of the mean", rank, i, accumulated[i], mean[i]);
}

/// Sharded optimizer state (ZeRO's idea): Adam's two moments of a PS variable exist once
/// over all ranks, beside the shards on their hosts, while a replicated variable's exist on
/// every rank. Balanced placement spreads the shards evenly; first_server (builder::PS)
/// puts all of them on rank 0. Either way the update is the local optimizer's.
template <CommContext Context>
void ps_optimizer_state_is_sharded(Context& ctx, server_assignment servers) {
  const int ranks = ctx.collectives().size(), rank = ctx.collectives().rank();
  using Sharded = Strategy<PS<4>, Partition<0>>;
  using Replicated = Strategy<AllReduce<Ring>>;
  std::vector<float> w(16 * 8, 0.5f), gw(w.size()), b(10, 0.5f), gb(b.size()), reference(w.size(), 0.5f);
  model_of<Sharded, Replicated> m;
  m.add(variable<Sharded>("w", w, gw, {16, 8}));
  m.add(variable<Replicated>("b", b, gb, {10}));
  const optim::adam adam{.lr = 0.01f};
  auto exec = make_executor(ctx, m, adam, {.ps_servers = servers});

  constexpr std::size_t moments = 2;  // Adam's m and v
  const memory_use use = exec.memory();
  expect(use.optimizer_state == moments * (b.size() * sizeof(float) + use.server_values),
         "rank {}: optimizer state {} B, expected two moments of b (replicated) and of the {} B of shards hosted here", rank,
         use.optimizer_state, use.server_values);
  const std::uint64_t mine = use.server_values;
  std::vector<std::uint64_t> hosted(static_cast<std::size_t>(ranks));
  ctx.control().allgather(std::span<const std::uint64_t>(&mine, 1), std::span<std::uint64_t>(hosted));
  const std::uint64_t total = std::accumulate(hosted.begin(), hosted.end(), std::uint64_t{0});
  expect(total == w.size() * sizeof(float), "the ranks host {} B of shards together, w has {} B", total, w.size() * sizeof(float));
  const std::uint64_t shard = total / 4, most_shards = (4 + static_cast<std::uint64_t>(ranks) - 1) / static_cast<std::uint64_t>(ranks);
  for (int r = 0; r < ranks; ++r) {
    const std::uint64_t expected_most = servers == server_assignment::first_server ? (r == 0 ? total : 0) : most_shards * shard;
    expect(hosted[static_cast<std::size_t>(r)] <= expected_most, "rank {} hosts {} B of shards, at most {} B expected", r,
           hosted[static_cast<std::size_t>(r)], expected_most);
  }

  for (std::size_t i = 0; i < gw.size(); ++i) gw[i] = static_cast<float>(i % 3) + static_cast<float>(rank);
  std::ranges::fill(gb, 1.0f);
  exec.step();
  std::vector<float> mean(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) mean[i] = static_cast<float>(i % 3) + static_cast<float>(ranks - 1) / 2.0f;
  auto state = adam.make_state(reference.size());
  adam.update(reference, mean, state, 1);
  for (std::size_t i = 0; i < w.size(); ++i)
    expect(std::abs(w[i] - reference[i]) <= 1e-6f, "rank {}: w[{}] = {} but the local optimizer gives {}", rank, i, w[i],
           reference[i]);
}

/// The parameter server's checkpoint model: a dense variable on uneven shards and a sparse
/// table, both BSP, Adam and Adagrad on the servers. Every rank gives the same gradients, so
/// the trajectory is the same on any number of ranks (up to rounding). Trains `before`
/// updates, saves (if `save`), trains `after` more, and returns the final values (the whole
/// table pulled). With `restore`, it first restores and counts from there.
template <CommContext Context>
std::vector<float> train_ps_checkpointed(Context& ctx, int before, int after, const ckpt::store* restore,
                                         const ckpt::store* save,
                                         server_assignment servers = server_assignment::least_loaded) {
  using Dense = Strategy<PS<3>, Partition<0>>;
  using Sparse = Strategy<PS<2>, Partition<0>, SparseRows>;
  std::vector<float> w(7 * 5, 0.25f), gw(7 * 5), table(10 * 3, 0.5f);
  model_of<Dense, Sparse> m;
  m.add(variable<Dense>("w", w, gw, {7, 5}));
  m.add(variable<Sparse>("emb", table, {}, {10, 3}));
  auto exec = make_executor(ctx, m, optim::dense_and_sparse<optim::adam, optim::adagrad>{{.lr = 0.05f}, {.lr = 0.2f}},
                            {.ps_servers = servers});
  if (restore && !exec.restore_checkpoint(*restore)) throw std::runtime_error("no checkpoint to restore");
  const std::vector<std::uint32_t> rows = {1, 4, 4, 7};
  auto update = [&] {
    const auto u = static_cast<float>(exec.updates() + 1);
    for (std::size_t i = 0; i < gw.size(); ++i) gw[i] = std::sin(static_cast<float>(i) + u);
    std::vector<float> values(rows.size() * 3);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::cos(static_cast<float>(i) * u);
    exec.pull(variable_id{1}, rows);
    exec.sparse_gradient(variable_id{1}, rows, values);
    exec.step();
  };
  for (int u = 0; u < before; ++u) update();
  if (save) exec.save_checkpoint(*save);
  for (int u = 0; u < after; ++u) update();
  std::vector<std::uint32_t> all(10);
  std::iota(all.begin(), all.end(), 0u);
  exec.pull(variable_id{1}, all);
  w.insert(w.end(), table.begin(), table.end());
  return w;
}

/// A PS checkpoint taken with the shards balanced over the ranks restores into an executor
/// that hosts them all on rank 0, and the run continues exactly as if never interrupted;
/// a fresh start ends elsewhere. `folder` must be empty and seen by every rank.
template <CommContext Context>
void ps_checkpoint_restores_into_another_placement(Context& ctx, const std::filesystem::path& folder) {
  const int rank = ctx.collectives().rank();
  const ckpt::store store(folder);
  const std::vector<float> uninterrupted = train_ps_checkpointed(ctx, 3, 3, nullptr, &store);
  const std::vector<float> resumed =
      train_ps_checkpointed(ctx, 0, 3, &store, nullptr, server_assignment::first_server);
  for (std::size_t i = 0; i < uninterrupted.size(); ++i)
    expect(resumed[i] == uninterrupted[i], "rank {}: value {} is {} after the restore, {} uninterrupted", rank, i,
           resumed[i], uninterrupted[i]);
  const std::vector<float> fresh = train_ps_checkpointed(ctx, 0, 3, nullptr, nullptr, server_assignment::first_server);
  expect(fresh != uninterrupted, "rank {}: a fresh start ended where the restored run did: the restore did nothing", rank);
}

/// A worker held back by SSP sleeps: rank 0 runs ahead until SSP<1> blocks it while the last
/// rank stalls for 0.4 s. Returns rank 0's share of one core over that blocked step (its
/// thread's CPU time over the step's wall time); 0 on the other ranks.
template <CommContext Context>
double blocked_worker_cpu_share(Context& ctx) {
  const int ranks = ctx.collectives().size(), rank = ctx.collectives().rank();
  std::vector<float> w(64, 0.0f), gw(64, 1.0f);
  auto m = make_model(variable<Strategy<PS<1>, Consistency<SSP<1>>>>("w", w, gw, {64}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.01f});
  exec.step();  // update 1: every rank's first push is in before anyone's update 2 pulls
  if (rank == ranks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  exec.step();  // update 2 pulls at clock 2: needs every rank's first push only
  if (rank != 0) {
    exec.step();
    return 0.0;
  }
  auto thread_cpu = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  const double cpu_before = thread_cpu();
  const auto wall_before = std::chrono::steady_clock::now();
  exec.step();  // update 3 pulls at clock 3: waits for the stalled rank's second push
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
  const double share = (thread_cpu() - cpu_before) / wall;
  expect(ranks == 1 || wall > 0.1, "rank 0's update 3 took {:.3f} s: it should have waited for the stalled rank", wall);
  return share;
}

/// PS under BSP trains to the same parameters as all-reduce on the same data.
template <CommContext Context>
void ps_bsp_equals_allreduce(Context& ctx) {
  const int rank = ctx.collectives().rank();
  auto train = [&]<class S>(std::type_identity<S>) {
    std::vector<float> w(6 * 4), gw(6 * 4), b(4), gb(4);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i % 7);
    model_of<S> m;
    m.add(variable<S>("w", w, gw, {6, 4}));
    m.add(variable<S>("b", b, gb, {4}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.05f, .momentum = 0.9f});
    for (int u = 0; u < 8; ++u) {
      // A least-squares gradient of w against rank-dependent targets.
      for (std::size_t i = 0; i < w.size(); ++i) gw[i] = w[i] - std::sin(static_cast<float>(i + u + rank));
      for (std::size_t i = 0; i < b.size(); ++i) gb[i] = b[i] - static_cast<float>(rank);
      exec.step();
    }
    w.insert(w.end(), b.begin(), b.end());
    return w;
  };
  const auto ps = train(std::type_identity<Strategy<PS<2>, Partition<0>>>{});
  const auto allreduce = train(std::type_identity<Strategy<AllReduce<Ring>>>{});
  for (std::size_t i = 0; i < ps.size(); ++i)
    expect(std::abs(ps[i] - allreduce[i]) <= 1e-5f, "rank {}: parameter {} is {} under PS-BSP, {} under all-reduce", rank, i,
           ps[i], allreduce[i]);
}

/// The SSP property: under randomized per-rank delays, every read reflects every update of
/// clocks <= c - S - 1 and all of the reader's own (BSP: S = 0). Returns the largest staleness seen, so
/// callers can check that the schedule did make ranks drift apart.
template <class Strategy, int S, CommContext Context>
std::uint64_t staleness_bound_holds(Context& ctx, std::uint64_t seed, int updates) {
  const int rank = ctx.collectives().rank();
  constexpr std::size_t rows = 16, width = 2;
  std::vector<float> table(rows * width, 0.0f);
  auto m = make_model(variable<Strategy>("emb", table, {}, {rows, width}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f});
  exec.record_parameter_server_reads(true);
  std::mt19937_64 engine(seed * 7919 + static_cast<std::uint64_t>(rank));
  std::vector<std::uint32_t> touched(rows);
  std::iota(touched.begin(), touched.end(), 0u);
  std::vector<float> ones(rows * width, 1.0f);
  std::uint64_t largest_lag = 0;
  for (int u = 0; u < updates; ++u) {
    if (engine() % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5 + engine() % 20));  // a transient straggler
    exec.pull(variable_id{0}, touched);
    exec.sparse_gradient(variable_id{0}, touched, ones);
    exec.step();
    for (const auto& read : exec.parameter_server_reads()) {
      if (auto violation = sync::ps::staleness_violation(read, S)) expect(false, "{}", *violation);
      for (std::uint64_t a : read.applied) largest_lag = std::max(largest_lag, read.clock > a ? read.clock - a : 0);
    }
  }
  return largest_lag;
}

template <int S, CommContext Context>
std::uint64_t ssp_bound_holds(Context& ctx, std::uint64_t seed, int updates) {
  return staleness_bound_holds<PSSparseSSP<S>, S>(ctx, seed, updates);
}

}  // namespace strata::conformance
