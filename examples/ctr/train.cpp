// Trains the Wide&Deep student on synthetic click data over MPI ranks with strata, and
// checks the held-out AUC against the planted model's own:
//
//   mpirun -np 2 ./ctr_train                                  # Parallax: MLP all-reduced, tables on the PS
//   mpirun -np 4 ./ctr_train --builder ps --consistency ssp:3 # everything on the PS, bounded staleness
//   mpirun -np 2 ./ctr_train --builder allreduce              # everything replicated (tables: all-gathered rows)
//   mpirun -np 2 ./ctr_train --builder auto --trials 2        # the cost model scores the builders, trials decide
//
// A progress line per epoch (loss, held-out AUC, samples/s), then a `summary:` line; exits
// non-zero when the AUC ends more than --max-auc-gap below the planted AUC.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/plan/auto_strategy.hpp>
#include <strata/plan/calibrate.hpp>

#include "../common/blas.hpp"
#include "../common/rank_main.hpp"
#include "distributed.hpp"

namespace {

struct options {
  std::string builder = "parallax";
  std::string consistency = "bsp";
  int epochs = 4;
  long steps_per_epoch = 750;
  std::size_t held_out = 100'000;
  double max_auc_gap = 0.02;
  double straggler_factor = 5.0;
  std::string calibration;  // --builder auto: the job's calibration (else measured at start)
  int trials = 2;           // --builder auto: builders timed before the fastest is kept (0: the model alone)
  ctr::distributed_options run;
};

// Calls f with the builder type that `builder` and `consistency` name.
template <class F>
void with_builder(const std::string& builder, const std::string& consistency, F&& f) {
  using namespace strata;
  const std::map<std::string, int> builder_index = {{"parallax", 0}, {"ps", 1}, {"allreduce", 2}};
  if (!builder_index.contains(builder))
    throw std::invalid_argument(fmt::format("--builder \"{}\": choose parallax, ps or allreduce", builder));
  const int b = builder_index.at(builder);
  if (b == 2) {
    if (consistency != "bsp")
      throw std::invalid_argument(fmt::format("--consistency {}: --builder allreduce has no servers, so only bsp applies",
                                              consistency));
    return f(std::type_identity<builder::AllReduce<Ring>>{});
  }
  auto pick = [&]<class C>(std::type_identity<C>) {
    if (b == 0) f(std::type_identity<builder::Parallax<Ring, C>>{});
    else f(std::type_identity<builder::PartitionedPS<C>>{});
  };
  if (consistency == "bsp") pick(std::type_identity<Consistency<BSP>>{});
  else if (consistency == "asp") pick(std::type_identity<Consistency<ASP>>{});
  else if (consistency == "ssp:1") pick(std::type_identity<Consistency<SSP<1>>>{});
  else if (consistency == "ssp:3") pick(std::type_identity<Consistency<SSP<3>>>{});
  else throw std::invalid_argument(fmt::format("--consistency \"{}\": choose bsp, asp, ssp:1 or ssp:3", consistency));
}

/// --builder auto: the cost model scores each builder this program offers (AllReduce only
/// under bsp: it has no servers) on the CTR model's shapes and its measured touched rows; the
/// --trials best are timed for 20 updates each, twice (compute included, which the model
/// leaves out), and the fastest trains. Every rank decides alike: the calibration, rank 0's
/// shard and the slowest rank's times are common to all.
std::string automatic_builder(strata::mpi::context& ctx, const options& o, const ctr::generator& data) {
  namespace plan = strata::plan;
  if (o.calibration.empty() && ctx.rank() == 0)
    fmt::print("--builder auto: calibrating (give --calibration FILE from strata-calibrate to skip this)\n");
  const plan::calibration calibration = plan::load_or_calibrate(ctx, o.calibration);
  ctr::batch shard;
  data.draw_train_shard(0, o.run.global_batch, 0, ctx.size(), shard);
  const double touched = static_cast<double>(ctr::wide_deep::rows_needed(shard).size()) / ctr::table_rows;
  using ctr::embedding_dim, ctr::fields, ctr::hidden1, ctr::hidden2;
  const std::vector<plan::variable_profile> variables = {
      {"embedding", {ctr::table_rows, embedding_dim}, true, touched},
      {"wide", {ctr::table_rows, 1}, true, touched},
      {"fc1.weight", {hidden1, fields * embedding_dim}},
      {"fc1.bias", {hidden1}},
      {"fc2.weight", {hidden2, hidden1}},
      {"fc2.bias", {hidden2}},
      {"fc3.weight", {1, hidden2}},
      {"fc3.bias", {1}}};
  std::vector<plan::scored_plan> scored;
  for (const char* name : {"parallax", "ps", "allreduce"})
    if (std::string_view(name) != "allreduce" || o.consistency == "bsp")
      with_builder(name, o.consistency, [&]<class B>(std::type_identity<B>) {
        scored.push_back(plan::builder_plan<B>(name, variables, calibration, plan::this_job(ctx)));
      });
  std::ranges::sort(scored, {}, &plan::scored_plan::predicted_s);
  if (ctx.rank() == 0) {
    fmt::print("--builder auto: {:.2f}% of each table's rows touched per update; predicted synchronization per update:\n",
               100.0 * touched);
    for (const plan::scored_plan& p : scored) fmt::print("  {:<10} {:8.3f} ms\n", p.name, 1e3 * p.predicted_s);
  }
  // Two interleaved rounds (A B A B), each builder's faster counting: the first run of a
  // process also pays for warming up (page faults, caches), which is no builder's fault.
  const std::size_t trials = std::min(scored.size(), static_cast<std::size_t>(o.trials));
  std::vector<double> measured(trials, INFINITY);
  for (int round = 0; round < 2; ++round)
    for (std::size_t k = 0; k < trials; ++k) {
      ctr::distributed_options trial = o.run;
      trial.updates = trial.updates_per_epoch = 20;
      trial.straggler_probability = 0.0;
      with_builder(scored[k].name, o.consistency, [&]<class B>(std::type_identity<B>) {
        const auto result = ctr::train_distributed<B>(ctx, data, {}, trial);
        measured[k] = std::min(measured[k], ctr::detail::slowest_over_ranks(ctx, result.train_seconds) /
                                                static_cast<double>(trial.updates));
      });
    }
  std::string fastest = scored.front().name;
  for (std::size_t k = 0; k < trials; ++k) {
    if (ctx.rank() == 0)
      fmt::print("  trial {:<10} predicted sync {:8.3f} ms, measured update {:8.3f} ms\n", scored[k].name,
                 1e3 * scored[k].predicted_s, 1e3 * measured[k]);
    if (measured[k] == *std::ranges::min_element(measured)) fastest = scored[k].name;
  }
  if (ctx.rank() == 0) fmt::print("--builder auto: training with {}\n", fastest);
  return fastest;
}

int train(strata::mpi::context& ctx, options o) {
  const auto start = std::chrono::steady_clock::now();
  const ctr::generator data(ctr::data_config{.table_rows = ctr::table_rows, .seed = o.run.seed});
  const ctr::batch held_out = ctx.rank() == 0 ? data.held_out(o.held_out) : ctr::batch{};
  const double planted_auc = ctx.rank() == 0 ? ctr::auc(held_out.planted_probability, held_out.labels) : 0.0;
  o.run.updates = o.epochs * o.steps_per_epoch;
  o.run.updates_per_epoch = o.steps_per_epoch;
  if (o.consistency.starts_with("ssp:") && (o.consistency == "ssp:1" ? 1 : 3) >= o.run.updates)
    throw std::invalid_argument(fmt::format("--consistency {} over {} updates never holds a rank back: that is asp; choose "
                                            "a staleness below the number of updates",
                                            o.consistency, o.run.updates));
  if (o.run.global_batch % static_cast<std::size_t>(ctx.size()) != 0)
    throw std::invalid_argument(fmt::format("--batch {} does not split evenly over {} ranks", o.run.global_batch, ctx.size()));

  if (o.builder == "auto") o.builder = automatic_builder(ctx, o, data);
  ctr::distributed_result result;
  with_builder(o.builder, o.consistency, [&]<class B>(std::type_identity<B>) {
    if (o.run.straggler_probability > 0) {
      // Stragglers are delayed by a multiple of a normal update, measured on a short run first.
      ctr::distributed_options probe = o.run;
      probe.updates = probe.updates_per_epoch = 20;
      probe.straggler_probability = 0.0;
      const auto probe_result = ctr::train_distributed<B>(ctx, data, {}, probe);
      const double normal = ctr::detail::slowest_over_ranks(ctx, probe_result.train_seconds) / 20.0;  // one delay for all
      o.run.straggler_delay = o.straggler_factor * std::chrono::duration<double>(normal);
    }
    if (ctx.rank() == 0)
      fmt::print("ctr: {} ranks, builder {}, consistency {}, global batch {}, {} epochs of {} updates, planted AUC {:.4f}{}\n",
                 ctx.size(), o.builder, o.consistency, o.run.global_batch, o.epochs, o.steps_per_epoch, planted_auc,
                 o.run.straggler_probability > 0
                     ? fmt::format(", stragglers p={} delayed {:.1f} ms", o.run.straggler_probability,
                                   1e3 * o.run.straggler_delay.count())
                     : std::string());
    std::fflush(stdout);
    result = ctr::train_distributed<B>(ctx, data, held_out, o.run, [](const ctr::epoch_report& r) {
      fmt::print("epoch {}  loss {:.4f}  auc {:.4f}  samples/s {:.0f}  ({:.2f} s)\n", r.epoch, r.loss, r.auc,
                 r.samples_per_second, r.seconds);
      std::fflush(stdout);
    });
  });
  if (ctx.rank() != 0) return 0;
  fmt::print("strategies: {}\n", fmt::join(result.strategies, "; "));
  if (!result.servers.empty()) fmt::print("servers: {}\n", fmt::join(result.servers, "; "));
  const double samples = static_cast<double>(result.updates) * static_cast<double>(o.run.global_batch);
  fmt::print("summary: ranks={} builder={} consistency={} planted_auc={:.4f} auc={:.4f} gap={:.4f} updates={} "
             "samples_per_second={:.0f} train_seconds={:.2f} total_seconds={:.2f}\n",
             ctx.size(), o.builder, o.consistency, planted_auc, result.auc, planted_auc - result.auc, result.updates,
             samples / result.train_seconds, result.train_seconds, ctr::detail::seconds_since(start));
  if (planted_auc - result.auc > o.max_auc_gap) {
    fmt::print(stderr, "held-out AUC {:.4f} is more than --max-auc-gap {:.4f} below the planted model's {:.4f}\n", result.auc,
               o.max_auc_gap, planted_auc);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  examples::use_blas_single_threaded(argv);  // one core per rank: ranks are the parallelism
  options o;
  CLI::App app{"Wide&Deep CTR model on synthetic data, trained over MPI ranks with strata"};
  examples::one_of(app, "--builder", o.builder, {"parallax", "ps", "allreduce", "auto"},
                   "parallax (MLP all-reduced, tables on the PS), ps (everything on the PS, partitioned), allreduce "
                   "(everything replicated) or auto (the cost model's choice, refined by trial runs)");
  app.add_option("--calibration", o.calibration, "--builder auto: this job's calibration (strata-calibrate --output)");
  examples::number(app, "--trials", o.trials, 0, 3, "--builder auto: builders timed before the fastest is kept (0: the model alone)");
  examples::one_of(app, "--consistency", o.consistency, {"bsp", "asp", "ssp:1", "ssp:3"},
                   "of the parameter-server variables");
  examples::number(app, "--epochs", o.epochs, 1, 10'000);
  examples::number(app, "--steps-per-epoch", o.steps_per_epoch, 1L, 100'000'000L, "updates between held-out evaluations");
  examples::number(app, "--batch", o.run.global_batch, std::size_t{1}, std::size_t{1'000'000}, "samples per update, over all ranks");
  examples::number(app, "--held-out", o.held_out, std::size_t{1}, std::size_t{10'000'000}, "held-out samples for AUC");
  examples::number(app, "--embedding-lr", o.run.embedding_lr, 0.0f, 100.0f, "Adagrad learning rate of the sparse tables");
  examples::number(app, "--dense-lr", o.run.dense_lr, 0.0f, 100.0f, "Adam learning rate of the MLP");
  examples::number(app, "--seed", o.run.seed, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(),
                   "seeds the data, the planted model and the student");
  examples::number(app, "--max-auc-gap", o.max_auc_gap, 0.0, 1.0,
                   "exit non-zero if the held-out AUC ends further below the planted AUC");
  examples::number(app, "--straggler-probability", o.run.straggler_probability, 0.0, 1.0,
                   "delay each rank's update with this probability (transient stragglers)");
  examples::number(app, "--straggler-factor", o.straggler_factor, 0.001, 1000.0, "a straggler's delay, in normal update times");
  return examples::parse_and_run(app, argc, argv, "ctr_train", [&](strata::mpi::context& ctx) {
    if (o.builder != "auto") examples::refuse_unused(app, {"--calibration", "--trials"}, "--builder auto");
    return train(ctx, o);
  });
}
