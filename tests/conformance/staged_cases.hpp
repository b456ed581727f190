#pragma once
// Staged-executor cases, written against a stage and a source of its memory: the unit
// tests run them with host_stage on loopback ranks, the MPI tests under mpiexec, and the
// GPU test with cuda::pinned_stage over device memory. The user's buffers are only ever
// touched through the stage's copies, as a GPU program's would be.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "conformance/cases.hpp"
#include "strata/exec/staged_executor.hpp"

namespace strata::conformance {

/// Stage memory for a case: `n` floats of the stage's memory that live as long as the source.
template <StagingMemory Stage>
using stage_memory = std::function<typename Stage::span(std::size_t n)>;

/// Host memory standing in for a device's (host_stage): owned by the source, never moved.
inline stage_memory<host_stage> host_buffers() {
  auto buffers = std::make_shared<std::deque<std::vector<float>>>();
  return [buffers](std::size_t n) -> std::span<float> { return buffers->emplace_back(n, 0.0f); };
}

template <StagingMemory Stage>
std::vector<float> read_back(Stage& stage, typename Stage::span on_stage) {
  std::vector<float> host(on_stage.size());
  stage.to_host(on_stage, host);
  stage.wait();
  return host;
}

template <StagingMemory Stage>
void write(Stage& stage, std::span<const float> host, typename Stage::span on_stage) {
  stage.to_device(host, on_stage);
  stage.wait();
}

/// Host strategies through a stage train as the host executor on host buffers (up to the
/// order in which a server adds the ranks' pushes): a synchronous parameter server and a
/// TopK all-reduce with error feedback, SGD with momentum, over two micro-batches per
/// update. Gradients are computed from the
/// parameters read back from the stage, so the copies in both directions are checked.
template <StagingMemory Stage, CommContext Context>
void staged_equals_direct(Context& ctx, Stage stage, const stage_memory<Stage>& memory) {
  using Server = Strategy<PS<2>, Partition<0>>;
  using Sparsified = Strategy<AllReduce<Ring>, Compress<TopK<0.25>, ErrorFeedback>>;
  const int rank = ctx.collectives().rank();
  constexpr std::size_t rows = 6, cols = 4;
  std::vector<float> w(rows * cols), b(cols), gw(w.size()), gb(b.size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i % 7) + static_cast<float>(rank);
  std::ranges::fill(b, 0.5f);
  executor_options options;
  options.accumulation_steps = 2;
  const optim::sgd sgd{.lr = 0.05f, .momentum = 0.9f};  // not Adam: it would magnify the servers' rounding
  // A least-squares gradient against rank- and micro-batch-dependent targets.
  auto gradient = [&](std::span<const float> param, std::span<float> grad, int micro) {
    for (std::size_t i = 0; i < param.size(); ++i) grad[i] = param[i] - std::sin(static_cast<float>(i + micro + rank));
  };
  constexpr int micro_batches = 10;

  // The host executor first (two executors of one context would share its parameter-server
  // traffic), keeping the parameters after every micro-batch.
  std::vector<std::vector<float>> trajectory;
  {
    std::vector<float> dw = w, db = b;
    model_of<Server, Sparsified> m;
    m.add(variable<Server>("w", dw, gw, {rows, cols}));
    m.add(variable<Sparsified>("b", db, gb, {cols}));
    auto direct = make_executor(ctx, m, sgd, options);
    for (int micro = 0; micro < micro_batches; ++micro) {
      gradient(dw, gw, micro);
      gradient(db, gb, micro);
      expect(direct.step().updated == (micro % 2 == 1), "rank {}: the host executor's micro-batch {} updated out of turn",
             rank, micro);
      trajectory.push_back(dw);
      trajectory.back().insert(trajectory.back().end(), db.begin(), db.end());
    }
  }

  const typename Stage::span sw = memory(w.size()), sgw = memory(w.size()), sb = memory(b.size()), sgb = memory(b.size());
  write(stage, w, sw);
  write(stage, b, sb);
  auto staged = make_staged_executor(ctx, std::move(stage), sgd, options, variable<Server>("w", sw, sgw, {rows, cols}),
                                     variable<Sparsified>("b", sb, sgb, {cols}));
  // The gradients' mirrors share one buffer, the last declared first, as a tensor_arena.
  const auto& mirrored = staged.mirrors().variables();
  expect(mirrored[1].grad.data() + mirrored[1].grad.size() == mirrored[0].grad.data(),
         "rank {}: the gradients' mirrors do not follow each other backward in one buffer", rank);
  Stage& s = staged.stage();
  for (int micro = 0; micro < micro_batches; ++micro) {
    std::vector<float> staged_w = read_back(s, sw), staged_b = read_back(s, sb);
    gradient(staged_w, gw, micro);
    gradient(staged_b, gb, micro);
    write(s, gw, sgw);
    write(s, gb, sgb);
    expect(staged.step().updated == (micro % 2 == 1), "rank {}: the staged micro-batch {} updated out of turn", rank, micro);

    std::vector<float> now = read_back(s, sw);
    staged_b = read_back(s, sb);
    now.insert(now.end(), staged_b.begin(), staged_b.end());
    for (std::size_t i = 0; i < now.size(); ++i)
      expect(std::abs(now[i] - trajectory[micro][i]) <= 1e-5f, "rank {}: after micro-batch {} staged parameter {} is {}, the host executor's {}",
             rank, micro, i, now[i], trajectory[micro][i]);
  }
  expect(staged.updates() == micro_batches / 2, "rank {}: {} staged updates, expected {}", rank, staged.updates(),
         micro_batches / 2);
}

/// Consistency<SSP<S>> through a stage, under random per-rank delays: every read the
/// worker makes is within the staleness bound, and the parameters copied back to the stage
/// are exactly what that read reflected (plain SGD of gradient 1 on the servers: each push
/// applied steps the value by lr times the push's 1/P share). Returns the largest staleness seen.
template <int S, StagingMemory Stage, CommContext Context>
std::uint64_t staged_ssp_reads_within_bound(Context& ctx, Stage stage, const stage_memory<Stage>& memory, std::uint64_t seed,
                                            int updates) {
  const int rank = ctx.collectives().rank(), ranks = ctx.collectives().size();
  constexpr std::size_t n = 8;
  constexpr float lr = 0.5f;
  const float share = 1.0f / static_cast<float>(ranks);  // as the server scales a push
  const typename Stage::span w = memory(n), gw = memory(n);
  const std::vector<float> zeros(n, 0.0f), ones(n, 1.0f);
  write(stage, zeros, w);
  auto staged = make_staged_executor(ctx, std::move(stage), optim::sgd{.lr = lr}, {},
                                     variable<Strategy<PS<1>, Consistency<SSP<S>>>>("w", w, gw, {n}));
  staged.host().record_parameter_server_reads(true);
  std::mt19937_64 engine(seed * 7919 + static_cast<std::uint64_t>(rank));
  std::uint64_t largest_lag = 0;
  for (int u = 0; u < updates; ++u) {
    if (engine() % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5 + engine() % 20));  // a straggler
    write(staged.stage(), ones, gw);
    staged.step();
    const std::vector<sync::ps::read_record> reads = staged.host().parameter_server_reads();
    expect(!reads.empty(), "rank {} update {}: the step read nothing from the servers", rank, u + 1);
    for (const auto& read : reads) {
      if (auto violation = sync::ps::staleness_violation(read, S)) expect(false, "{}", *violation);
      for (std::uint64_t a : read.applied) largest_lag = std::max(largest_lag, read.clock > a ? read.clock - a : 0);
    }
    std::uint64_t pushes = 0;
    for (std::uint64_t a : reads.back().applied) pushes += a;
    // Replay the server's steps one push at a time: with P not a power of two, 1/P is
    // rounded and n steps of it differ from n times it in the last bit.
    float expected = 0.0f, velocity = 0.0f;
    for (std::uint64_t p = 0; p < pushes; ++p) optim::sgd_element{lr, 0.0f, 0.0f, false}(expected, share, velocity);
    const std::vector<float> value = read_back(staged.stage(), w);
    for (float x : value)
      expect(x == expected, "rank {} update {}: the stage holds {}, but the read reflected {} pushes, which give {}",
             rank, u + 1, x, pushes, expected);
  }
  return largest_lag;
}

/// A checkpoint of a staged executor restores the parameters into the stage's memory (and
/// the optimizer state, so training resumes where it was saved). Every rank passes the same
/// empty folder.
template <StagingMemory Stage, CommContext Context>
void staged_checkpoint_restores_stage(Context& ctx, Stage stage, const stage_memory<Stage>& memory,
                                      const std::filesystem::path& folder) {
  const int rank = ctx.collectives().rank();
  constexpr std::size_t n = 12;
  const typename Stage::span w = memory(n), gw = memory(n), b = memory(3), gb = memory(3);
  write(stage, std::vector<float>(n, 1.0f), w);
  write(stage, std::vector<float>(3, -1.0f), b);
  auto staged = make_staged_executor(ctx, std::move(stage), optim::sgd{.lr = 0.1f, .momentum = 0.9f}, {},
                                     variable<Strategy<PS<2>, Partition<0>>>("w", w, gw, {4, 3}),
                                     variable<Strategy<AllReduce<Ring>>>("b", b, gb, {3}));
  Stage& s = staged.stage();
  auto train = [&](int updates) {
    for (int u = 0; u < updates; ++u) {
      std::vector<float> g(n);
      for (std::size_t i = 0; i < n; ++i) g[i] = static_cast<float>((i + static_cast<std::size_t>(u)) % 5) - 2.0f;
      write(s, g, gw);
      write(s, std::span<const float>(g).first(3), gb);
      staged.step();
    }
  };
  auto parameters = [&] {
    std::vector<float> all = read_back(s, w), tail = read_back(s, b);
    all.insert(all.end(), tail.begin(), tail.end());
    return all;
  };
  const ckpt::store store(folder);
  train(2);
  staged.save_checkpoint(store);
  const std::vector<float> saved = parameters();
  train(2);
  const std::vector<float> trained = parameters();
  expect(trained != saved, "rank {}: two more updates left the parameters as saved", rank);
  expect(staged.restore_checkpoint(store).has_value(), "rank {}: the checkpoint was not found", rank);
  expect(staged.updates() == 2, "rank {}: restored to update {}, saved at 2", rank, staged.updates());
  expect(parameters() == saved, "rank {}: the stage does not hold the restored parameters", rank);
  train(2);  // the momentum was restored too: the same two updates give the same values
  expect(parameters() == trained, "rank {}: training on from the checkpoint differs from the first run", rank);
}

}  // namespace strata::conformance
