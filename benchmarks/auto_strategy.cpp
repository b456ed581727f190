// Automatic strategies against AutoDist's eight builders, in one sitting: the job calibrates
// itself (plan::calibrate), then for each workload gives every variable its strategy under
// each builder and under plan::auto_strategy, predicts each plan's step with the cost model,
// and measures each plan's step through the executor, interleaved (medians).
//
//   mpirun -np 2 ./auto_strategy          # or -np 4
//   mpirun -np 2 ./auto_strategy --calibration cal.json --predict-only   # plans and predictions alone
//
// Workloads: ResNet-50's gradients (161 dense tensors); the CTR example's Wide&Deep (two
// 2^20-row tables with 0.6% of rows touched per rank, and its MLP); a transformer with a
// 32000-token vocabulary embedding (sparse rows, 8192 tokens per rank) and four blocks.
// A step is what a training step synchronizes: the tables' touched rows pulled, their
// gradient rows pushed, every dense gradient reduced (SGD with a tiny rate applies them).
//
// summary, per workload: auto_over_best and auto_over_worst (auto's step over the fastest
// and the slowest builder's), median_error (|predicted - measured| / measured over all
// plans) and spearman (the rank correlation of predicted and measured steps).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/plan/auto_strategy.hpp>
#include <strata/plan/calibrate.hpp>
#include <strata/strata.hpp>

#include "measure.hpp"
#include "model_shapes.hpp"
#include "../examples/common/cli.hpp"
#include "../examples/common/rank_main.hpp"

namespace {

using namespace strata;

// Every strategy the builders and the automatic plan give these workloads.
template <class... S>
struct strategy_list {};
using candidates = strategy_list<
    Strategy<AllReduce<Ring>>, Strategy<AllReduce<Tree>>, Strategy<AllReduce<Hierarchical>>, Strategy<AllReduce<Native>>,
    Strategy<AllReduce<Ring>, Compress<FP16>>, Strategy<AllReduce<Tree>, Compress<FP16>>,
    Strategy<AllReduce<Hierarchical>, Compress<FP16>>, Strategy<AllReduce<Native>, Compress<FP16>>,
    Strategy<AllReduce<Ring>, Partition<0>>, Strategy<AllReduce<Ring>, Partition<1>>, Strategy<AllReduce<Ring>, Partition<2>>,
    Strategy<AllReduce<Ring>, Partition<3>>, Strategy<PS<1>>, Strategy<PS<2>, Partition<0>>, Strategy<PS<3>, Partition<0>>,
    Strategy<PS<4>, Partition<0>>, Strategy<PS<5>, Partition<0>>, Strategy<AllReduce<Ring>, SparseRows>,
    Strategy<AllReduce<Ring>, Partition<0>, SparseRows>, Strategy<PS<1>, SparseRows>,
    Strategy<PS<2>, Partition<0>, SparseRows>, Strategy<PS<3>, Partition<0>, SparseRows>,
    Strategy<PS<4>, Partition<0>, SparseRows>>;

template <class List>
struct bench_model;
template <class... S>
struct bench_model<strategy_list<S...>> {
  using type = model<S...>;
  template <class F>
  static void visit(const std::string& strategy, F&& f) {
    visit_strategy<S...>(strategy, std::forward<F>(f));
  }
};
using model_type = bench_model<candidates>::type;

struct workload {
  std::string name;
  std::vector<plan::variable_profile> variables;
};

workload resnet50() {
  workload w{"resnet50", {}};
  for (const bench::tensor_shape& s : bench::resnet50_shapes()) w.variables.push_back({s.name, s.dims});
  return w;
}

workload ctr(std::size_t rows_touched) {
  constexpr std::size_t rows = std::size_t{1} << 20;
  const double touched = static_cast<double>(rows_touched) / rows;
  return {"ctr",
          {{"embedding", {rows, 32}, true, touched},
           {"wide", {rows, 1}, true, touched},
           {"fc1.weight", {384, 256}},
           {"fc1.bias", {256}},
           {"fc2.weight", {256, 128}},
           {"fc2.bias", {128}},
           {"fc3.weight", {128, 1}},
           {"fc3.bias", {1}}}};
}

workload transformer(std::size_t tokens) {
  constexpr std::size_t vocabulary = 32000, width = 512;
  workload w{"transformer", {{"token_embedding", {vocabulary, width}, true, std::min(1.0, double(tokens) / vocabulary)}}};
  for (int b = 0; b < 4; ++b) {
    auto add = [&](const std::string& name, std::vector<std::size_t> shape) {
      w.variables.push_back({fmt::format("block{}.{}", b, name), std::move(shape)});
    };
    add("attention.qkv.weight", {3 * width, width});
    add("attention.qkv.bias", {3 * width});
    add("attention.out.weight", {width, width});
    add("attention.out.bias", {width});
    add("norm1.weight", {width});
    add("mlp.fc1.weight", {4 * width, width});
    add("mlp.fc1.bias", {4 * width});
    add("mlp.fc2.weight", {width, 4 * width});
    add("mlp.fc2.bias", {width});
    add("norm2.weight", {width});
  }
  return w;
}

/// The workload's buffers, shared by every plan's executor (one steps at a time), and each
/// rank's touched rows of each table.
struct buffers {
  std::vector<std::vector<float>> params, grads;
  std::vector<std::vector<std::uint32_t>> rows;
  std::vector<std::vector<float>> row_grads;

  buffers(const workload& w, int rank) {
    std::mt19937 random(1234u + static_cast<unsigned>(rank));
    for (const plan::variable_profile& v : w.variables) {
      params.emplace_back(v.elements(), 0.5f);
      grads.emplace_back(v.sparse ? 0 : v.elements(), 1e-3f);
      std::vector<std::uint32_t> touched;
      if (v.sparse) {
        const auto n = static_cast<std::size_t>(std::llround(v.touched_fraction * static_cast<double>(v.rows())));
        std::uniform_int_distribution<std::uint32_t> row(0, static_cast<std::uint32_t>(v.rows() - 1));
        for (std::size_t i = 0; i < n; ++i) touched.push_back(row(random));
        std::ranges::sort(touched);
        touched.erase(std::ranges::unique(touched).begin(), touched.end());
      }
      row_grads.emplace_back(touched.size() * (v.elements() / v.rows()), 1e-3f);
      rows.push_back(std::move(touched));
    }
  }
};

/// One plan of a workload, with its executor.
struct trained_plan {
  std::string name;
  std::vector<std::string> strategies;
  double predicted_s = 0.0;
  model_type m;
  std::optional<executor<mpi::context, model_type, optim::sgd>> exec;
  buffers* data = nullptr;

  /// Builds the plan's model and executor (collective).
  void start(mpi::context& ctx, const workload& w, buffers& b, server_assignment servers) {
    data = &b;
    m = model_type{};
    for (std::size_t i = 0; i < w.variables.size(); ++i) {
      const plan::variable_profile& v = w.variables[i];
      bench_model<candidates>::visit(strategies[i], [&](auto type) {
        using S = typename decltype(type)::type;
        auto declare = [&]<std::size_t Rank>() {
          if constexpr (S::descriptor.partition_axis < static_cast<int>(Rank))
            m.add(strata::detail::declare<S, Rank>(v.name, b.params[i], b.grads[i],
                                                   std::span<const std::size_t, Rank>(v.shape.data(), Rank)));
          else
            throw std::logic_error(fmt::format("{} on the {}-D \"{}\"", strategies[i], Rank, v.name));
        };
        switch (v.shape.size()) {
          case 1: declare.template operator()<1>(); break;
          case 2: declare.template operator()<2>(); break;
          case 4: declare.template operator()<4>(); break;
          default: throw std::logic_error("shapes of rank 1, 2 or 4 only");
        }
      });
    }
    executor_options options;
    options.ps_servers = servers;
    exec.emplace(ctx, m, optim::sgd{.lr = 1e-7f}, options);
  }

  /// Ends the executor (collective): only the plan being measured runs, as in training,
  /// with no other plan's server threads beside it.
  void stop() { exec.reset(); }

  /// The batch's sparse gradients, the update, then the next batch's rows (the same rows
  /// here): step() only posts parameter-server pushes, and a pull is answered once they are
  /// applied, so a timed step includes them.
  void step() {
    for (std::size_t i = 0; i < data->rows.size(); ++i)
      if (!data->rows[i].empty()) exec->sparse_gradient(variable_id{i}, data->rows[i], data->row_grads[i]);
    exec->step();
    for (std::size_t i = 0; i < data->rows.size(); ++i)
      if (!data->rows[i].empty()) exec->pull(variable_id{i}, data->rows[i]);
  }
};

/// A plan to measure: a strategy per variable and where parameter-server shards go.
struct named_plan {
  std::string name;
  std::vector<std::string> strategies;
  server_assignment servers = server_assignment::least_loaded;
};

template <class B>
named_plan builder_plan(const std::string& name, const workload& w) {
  named_plan p{name, {}, B::servers};
  for (const plan::variable_profile& v : w.variables) p.strategies.push_back(to_string(B::describe(v.shape, v.sparse)));
  return p;
}

/// AutoDist's eight builders' plans for `w`.
std::vector<named_plan> builder_plans(const workload& w) {
  using namespace strata::builder;
  return {builder_plan<builder::PS<>>("PS", w),
          builder_plan<PSLoadBalancing<>>("PSLoadBalancing", w),
          builder_plan<PartitionedPS<>>("PartitionedPS", w),
          builder_plan<UnevenPartitionedPS<>>("UnevenPartitionedPS", w),
          builder_plan<builder::AllReduce<>>("AllReduce", w),
          builder_plan<PartitionedAllReduce<>>("PartitionedAllReduce", w),
          builder_plan<RandomAxisPartitionAllReduce<42>>("RandomAxisPartitionAllReduce", w),
          builder_plan<Parallax<>>("Parallax", w)};
}

/// "Replicate,AllReduce<Ring> x150, PS<8>,Partition<0>,SparseRows x1": how many variables
/// took each strategy, most first.
std::string strategy_mix(const std::vector<std::string>& strategies) {
  std::map<std::string, int> count;
  for (const std::string& s : strategies) ++count[s];
  std::vector<std::pair<std::string, int>> sorted(count.begin(), count.end());
  std::ranges::stable_sort(sorted, std::greater<>(), &std::pair<std::string, int>::second);
  std::vector<std::string> parts;
  for (const auto& [s, n] : sorted) parts.push_back(fmt::format("{} x{}", s, n));
  return fmt::format("{}", fmt::join(parts, ", "));
}

/// Spearman's rank correlation (ties share their mean rank).
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& x) {
    std::vector<std::size_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::ranges::sort(order, {}, [&](std::size_t i) { return x[i]; });
    std::vector<double> r(x.size());
    for (std::size_t i = 0; i < order.size();) {
      std::size_t j = i;
      while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
      for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2.0) + 1;
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1) / 2;
  double cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int rounds = 7;
  int trials = 3;
  std::vector<std::string> only;
  std::vector<int> scale = {8, 64, 256, 1024};
  int ranks_per_host = 8;
  double across_gbit = 10.0, across_latency_us = 20.0;
  std::string calibration_file;
  bool predict_only = false;
  CLI::App app{"Automatic strategies vs AutoDist's builders: predicted and measured steps of three workloads"};
  app.add_flag("--quick", quick, "one round of the CTR workload, a quick calibration (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds (medians are taken over them)");
  app.add_option("--workload", only, "resnet50, ctr, transformer (default: all)")
      ->check(CLI::IsMember({"resnet50", "ctr", "transformer"}));
  examples::number(app, "--trials", trials, 1, 20, "plans the automatic choice times before it keeps the fastest "
                   "(the automatic plan and the best uniform ones)");
  // At most 16384 ranks: the planner scores PS<k> for every k up to the ranks, and its time
  // grows with them (about 30 s for the three workloads at 16384 on one core, 3 s at 1024).
  app.add_option("--predict-at", scale,
                 "world sizes to predict the workloads' plans at (this calibration carried there), at most 16384: "
                 "the prediction's time grows with the ranks")
      ->check(examples::in_range(2, 16384));
  examples::number(app, "--ranks-per-host", ranks_per_host, 1, 1024, "ranks per host of the predicted clusters");
  examples::number(app, "--across-gbit", across_gbit, 0.001, 1e4, "link between the predicted clusters' hosts, Gbit/s");
  examples::number(app, "--across-latency-us", across_latency_us, 0.0, 1e6, "its latency, microseconds");
  app.add_option("--calibration", calibration_file,
                 "plan and predict with this calibration (strata-calibrate --output) instead of calibrating first");
  app.add_flag("--predict-only", predict_only,
               "print the plans and their predictions, here and at scale; measure nothing");
  return examples::parse_and_run(app, argc, argv, "auto_strategy", [&](strata::mpi::context& ctx) {
    if (quick) {  // the smallest workload, once: the smoke test of the whole path
      rounds = 1;
      if (only.empty()) only = {"ctr"};
      scale = {8};
    }

    plan::calibrate_options calibrating;
    if (quick) calibrating.repeats = 3;
    if (ctx.rank() == 0 && calibration_file.empty()) fmt::print("calibrating {} ranks ...\n", ctx.size());
    const plan::calibration calibration = plan::load_or_calibrate(ctx, calibration_file, calibrating);
    if (ctx.rank() == 0) fmt::print("{}", plan::describe(calibration));
    const plan::cluster job{ctx.size(), ctx.local_size()};
    const plan::cost_model cost(calibration, job);

    std::vector<workload> workloads = {resnet50(), ctr(512 * 12), transformer(8192)};
    if (!only.empty())
      std::erase_if(workloads, [&](const workload& w) { return std::ranges::find(only, w.name) == only.end(); });
    std::vector<std::string> summary;
    for (const workload& w : workloads) {
      std::vector<named_plan> plans = builder_plans(w);
      const plan::strategy_plan chosen = plan::auto_strategy(w.variables, cost, {.compression = {"FP16"}});
      plans.push_back({"auto", chosen.strategies});
      // The trial runs' other candidates: the best uniform plans, unless a plan above has them.
      const std::vector<plan::scored_plan> tried = plan::trial_candidates(chosen, trials);
      std::vector<std::size_t> trial_index = {plans.size() - 1};
      for (std::size_t t = 1; t < tried.size(); ++t) {
        const auto same = std::ranges::find(plans, tried[t].strategies, &named_plan::strategies);
        trial_index.push_back(static_cast<std::size_t>(same - plans.begin()));
        if (same == plans.end()) plans.push_back({"uniform " + tried[t].name, tried[t].strategies});
      }
      if (ctx.rank() == 0) fmt::print("\n{}: the automatic plan\n{}", w.name, plan::describe(chosen, w.variables));
      // The model places shards as each plan's builder asks.
      std::vector<double> predicted_s;
      for (const named_plan& p : plans)
        predicted_s.push_back(
            plan::cost_model(calibration, job, {}, {.servers = p.servers}).predict(w.variables, p.strategies).total());
      if (predict_only) {
        if (ctx.rank() == 0) {
          fmt::print("{}: {} ranks, predicted\n  {:<30} {:>12}\n", w.name, ctx.size(), "plan", "predicted ms");
          for (std::size_t k = 0; k < plans.size(); ++k)
            fmt::print("  {:<30} {:12.3f}\n", plans[k].name, 1e3 * predicted_s[k]);
        }
        continue;
      }

      buffers data(w, ctx.rank());
      std::vector<trained_plan> trained(plans.size());
      for (std::size_t k = 0; k < plans.size(); ++k) {
        trained[k].name = plans[k].name;
        trained[k].strategies = plans[k].strategies;
        trained[k].predicted_s = predicted_s[k];
      }
      // Each plan's executor lives only while it is measured: the median of `steps` steps after
      // two, or of as many as take about 20 ms where steps are short (a 1 ms step's median of 3
      // moves with every hiccup of the machine; the count comes from the prediction, not the
      // measurement, so it favours no plan).
      auto measure = [&](std::size_t k, int steps) {
        steps = std::max(steps, static_cast<int>(std::min(25.0, 20e-3 / std::max(trained[k].predicted_s, 1e-4))));
        trained[k].start(ctx, w, data, plans[k].servers);
        const double seconds = plan::slowest_rank_median(ctx, steps, [&] { trained[k].step(); });
        trained[k].stop();
        return seconds;
      };
      // Trial runs: a few steps of each candidate; the fastest is what `--strategy auto --trials K` keeps.
      std::size_t picked = trial_index.front();
      double picked_s = INFINITY;
      for (const std::size_t k : trial_index)
        if (const double s = measure(k, 3); s < picked_s) picked_s = s, picked = k;
      // Interleaved: A B C ... A B C ..., the median of each plan's rounds.
      std::vector<std::vector<double>> seconds(plans.size());
      for (int round = 0; round < rounds; ++round)
        for (std::size_t k = 0; k < plans.size(); ++k) seconds[k].push_back(measure(k, 3));

      std::vector<double> measured, predicted, errors;
      for (std::size_t k = 0; k < plans.size(); ++k) {
        measured.push_back(bench::median(seconds[k]));
        predicted.push_back(trained[k].predicted_s);
        errors.push_back(std::abs(predicted.back() - measured.back()) / measured.back());
      }
      constexpr std::size_t builders = 8;
      const double best = *std::ranges::min_element(measured.begin(), measured.begin() + builders);
      const double worst = *std::ranges::max_element(measured.begin(), measured.begin() + builders);
      const double median_error = bench::median(errors), rho = spearman(predicted, measured);
      if (ctx.rank() == 0) {
        fmt::print("{}: {} ranks, medians of {} rounds (each the median of 3 steps, or of about 20 ms of steps)\n",
                   w.name, ctx.size(), rounds);
        fmt::print("  {:<30} {:>12} {:>12} {:>8}\n", "plan", "measured ms", "predicted ms", "error");
        for (std::size_t k = 0; k < plans.size(); ++k)
          fmt::print("  {:<30} {:12.3f} {:12.3f} {:7.0f}%\n", plans[k].name, 1e3 * measured[k], 1e3 * predicted[k],
                     100 * errors[k]);
      }
      const double automatic = measured[builders];
      if (ctx.rank() == 0)
        fmt::print("  trials: {} plans timed, kept {} ({:.3f} ms)\n", trial_index.size(), plans[picked].name,
                   1e3 * measured[picked]);
      summary.push_back(fmt::format("auto_over_best_{0}={1:.3f} auto_over_worst_{0}={2:.3f} "
                                    "trials_over_best_{0}={3:.3f} median_error_{0}={4:.3f} spearman_{0}={5:.2f}",
                                    w.name, automatic / best, automatic / worst, measured[picked] / best,
                                    median_error, rho));
    }
    if (ctx.rank() == 0) {
      // Beyond this machine: the same calibration carried to larger clusters of hosts.
      const plan::link_class across{across_latency_us * 1e-6, across_gbit * 1e9 / 8};
      fmt::print("\npredicted at scale: {} ranks per host, hosts linked at {} Gbit/s, {} us; the automatic plan's step "
                 "and, for comparison, the best and worst builder's (ms)\n",
                 ranks_per_host, across_gbit, across_latency_us);
      for (const workload& w : workloads)
        for (const int ranks : scale) {
          const plan::cost_model at(calibration, {ranks, ranks_per_host}, across);
          const plan::strategy_plan chosen = plan::auto_strategy(w.variables, at);
          std::vector<double> builders;
          for (const named_plan& b : builder_plans(w)) {
            const plan::cost_model placed(calibration, {ranks, ranks_per_host}, across, {.servers = b.servers});
            builders.push_back(placed.predict(w.variables, b.strategies).total());
          }
          fmt::print("  {:<12} {:>5} ranks  auto {:9.2f}  best builder {:9.2f}  worst {:9.2f}  {}\n", w.name, ranks,
                     1e3 * chosen.predicted.total(), 1e3 * std::ranges::min(builders), 1e3 * std::ranges::max(builders),
                     strategy_mix(chosen.strategies));
        }
      if (!predict_only) fmt::print("summary: ranks={} rounds={} {}\n", ctx.size(), rounds, fmt::join(summary, " "));
    }
    return 0;
  });
}
