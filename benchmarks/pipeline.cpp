// Pipeline bubbles, measured: the block MLP (tests/mpi/block_mlp.hpp) split into one stage per
// rank runs GPipe and 1F1B over m micro-batches, and each stage's idle fraction (time not in
// its forward and backward, over the update's time) is printed next to the theory,
// (p-1)/(m+p-1). The same model and batch trained data-parallel on the same ranks is the
// baseline for throughput. Interleaved (GPipe, 1F1B, data-parallel, GPipe, ...); medians.
//
//   mpirun -np 2 ./pipeline
#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "measure.hpp"
#include "mpi/block_mlp.hpp"
#include "../examples/common/rank_main.hpp"

int main(int argc, char** argv) {
  using namespace strata;
  bool quick = false;
  int rounds = 5;
  strata::testing::block_mlp_config config{.features = 128, .hidden = 512, .blocks = 4, .classes = 10, .batch = 128};
  CLI::App app{"pipeline bubbles (GPipe, 1F1B) against theory, and throughput against data parallelism"};
  app.add_flag("--quick", quick, "a small model, few rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds per micro-batch count");
  examples::number(app, "--hidden", config.hidden, 1, 1 << 16, "each block's hidden width");
  return examples::parse_and_run(app, argc, argv, "pipeline", [&](strata::mpi::context& ctx) {
    const int stages = ctx.size();
    if (stages < 2 || config.blocks % stages != 0) {
      if (ctx.rank() == 0) fmt::print(stderr, "pipeline: run it on 2 or 4 ranks (one stage each; the model has 4 blocks)\n");
      return static_cast<int>(exit_usage);
    }
    if (quick) config.hidden = 64, rounds = 2;
    std::vector<int> micro_batches = quick ? std::vector<int>{2, 4} : std::vector<int>{1, 2, 4, 8, 16};

    mesh pipelined(ctx, mesh_shape{1, 1, stages}), replicated(ctx, mesh_shape{stages, 1, 1});
    if (ctx.rank() == 0)
      fmt::print("{} stages, batch {}, blocks of {}x{}; a stage's idle fraction is the update's time (on the slowest stage) not in its compute;\nmedians over updates, then the mean over stages\n"
                 "{:>4} {:>8} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10}\n",
                 stages, config.batch, config.features, config.hidden, "m", "theory", "GPipe", "1F1B", "GPipe ms", "1F1B ms",
                 "dp ms", "1F1B/dp");
    double last_gpipe = 0.0, last_1f1b = 0.0, last_theory = 0.0, last_throughput = 0.0;
    for (int m : micro_batches) {
      config.micro_batches = m;
      strata::testing::trainer gpipe(pipelined, config, {.schedule = "gpipe"});
      strata::testing::trainer one_f_one_b(pipelined, config, {.schedule = "1f1b"});
      strata::testing::trainer data_parallel(replicated, config, {.schedule = "1f1b"});
      std::vector<pipeline::run_stats> runs[2];  // this stage's, per update
      std::vector<bench::contender> contenders = {
          {"gpipe", [&] { runs[0].push_back(gpipe.update()); }},
          {"1f1b", [&] { runs[1].push_back(one_f_one_b.update()); }},
          {"dp", [&] { data_parallel.update(); }},
      };
      bench::interleave(contenders, rounds, 1, [&] { ctx.control().barrier(); });
      // A stage idles for what the update takes on the slowest stage (every stage starts
      // together, after the fence) less its own compute; medians over updates, the mean over stages.
      double idle[2] = {0.0, 0.0};
      for (int k = 0; k < 2; ++k) {
        std::vector<double> mine, all(2 * runs[k].size() * static_cast<std::size_t>(stages));
        for (const pipeline::run_stats& r : runs[k]) mine.insert(mine.end(), {r.compute_seconds, r.seconds});
        ctx.control().allgather(std::span<const double>(mine), std::span<double>(all));
        for (int s = 0; s < stages; ++s) {
          std::vector<double> fractions;
          for (std::size_t u = 0; u < runs[k].size(); ++u) {
            double span = 0.0;
            for (int t = 0; t < stages; ++t) span = std::max(span, all[mine.size() * static_cast<std::size_t>(t) + 2 * u + 1]);
            fractions.push_back(1.0 - all[mine.size() * static_cast<std::size_t>(s) + 2 * u] / span);
          }
          idle[k] += bench::median(fractions) / stages;
        }
      }
      const double t_gpipe = bench::median(contenders[0].seconds), t_1f1b = bench::median(contenders[1].seconds),
                   t_dp = bench::median(contenders[2].seconds);
      last_gpipe = idle[0], last_1f1b = idle[1], last_theory = pipeline::ideal_bubble(stages, m), last_throughput = t_dp / t_1f1b;
      if (ctx.rank() == 0)
        fmt::print("{:>4} {:>8.3f} {:>8.3f} {:>8.3f} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.2f}\n", m, last_theory, idle[0], idle[1],
                   t_gpipe * 1e3, t_1f1b * 1e3, t_dp * 1e3, last_throughput);
    }
    if (ctx.rank() == 0)
      fmt::print("summary: stages={} micro_batches={} theory={:.3f} gpipe_bubble={:.3f} one_f_one_b_bubble={:.3f} "
                 "pipeline_vs_data_parallel={:.2f} (bubbles: idle fraction per stage; the last: 1F1B's throughput over "
                 "data parallelism's on the same ranks)\n",
                 stages, micro_batches.back(), last_theory, last_gpipe, last_1f1b, last_throughput);
    return 0;
  });
}
