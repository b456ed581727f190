// Transient stragglers, as in real clusters: each rank's update is independently delayed,
// with probability 0.1, by 5x a normal update (seeded). The Wide&Deep CTR model with every
// variable on the parameter server (builder::PartitionedPS) trains under BSP, SSP<3> and ASP
// in turn (A B C A B C ...); total updates per second over all ranks, medians.
//
//   mpirun -np 4 ./ssp_straggler
//
// The normal update time is measured first, under BSP without delays, and fixes the delay
// for every contender. A rank's throughput counts its updates over the time until the last
// rank finished the round.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "../examples/ctr/distributed.hpp"
#include "measure.hpp"
#include "../examples/common/blas.hpp"
#include "../examples/common/rank_main.hpp"

int main(int argc, char** argv) {
  using namespace strata;
  examples::use_blas_single_threaded(argv);
  bool quick = false;
  int rounds = 3;
  long updates = 200;
  double probability = 0.1, factor = 5.0;
  ctr::distributed_options o;
  o.global_batch = 256;
  CLI::App app{"SSP and ASP against BSP under transient stragglers, on the parameter-server CTR model"};
  app.add_flag("--quick", quick, "few updates and rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds (medians are taken over them)");
  examples::number(app, "--updates", updates, 1L, 10'000'000L, "updates per rank and round");
  examples::number(app, "--batch", o.global_batch, std::size_t{1}, std::size_t{1'000'000}, "global batch, split over ranks");
  examples::number(app, "--probability", probability, 0.0, 1.0, "chance that a rank's update is delayed");
  examples::number(app, "--factor", factor, 0.0, 1000.0, "a delay, in normal update times");
  return examples::parse_and_run(app, argc, argv, "ssp_straggler", [&](strata::mpi::context& ctx) {
    if (quick) {
      rounds = 1;
      updates = 20;
    }
    o.updates = o.updates_per_epoch = updates;
    const ctr::generator data(ctr::data_config{.seed = o.seed});

    // The normal update: BSP, no delays.
    const auto normal = ctr::train_distributed<builder::PartitionedPS<Consistency<BSP>>>(ctx, data, {}, o);
    const double normal_seconds = ctr::detail::slowest_over_ranks(ctx, normal.train_seconds) / static_cast<double>(updates);
    o.straggler_probability = probability;
    o.straggler_delay = std::chrono::duration<double>(factor * normal_seconds);

    // Each run builds its model and executor (not timed: train_seconds covers the updates only).
    struct contender {
      std::string name;
      std::function<double()> run;  // slowest rank's seconds for `updates` updates
      std::vector<double> per_second;
    };
    auto run = [&]<class C>(std::type_identity<C>) {
      return [&] {
        const auto result = ctr::train_distributed<builder::PartitionedPS<C>>(ctx, data, {}, o);
        return ctr::detail::slowest_over_ranks(ctx, result.train_seconds);
      };
    };
    std::vector<contender> contenders = {{"BSP", run(std::type_identity<Consistency<BSP>>{}), {}},
                                         {"SSP<3>", run(std::type_identity<Consistency<SSP<3>>>{}), {}},
                                         {"ASP", run(std::type_identity<Consistency<ASP>>{}), {}}};
    const double total_updates = static_cast<double>(updates) * ctx.size();
    for (int round = 0; round < rounds; ++round)
      for (contender& c : contenders) {
        c.per_second.push_back(total_updates / c.run());
        if (ctx.rank() == 0) fmt::print("  round {} {:<7} {:8.1f} updates/s\n", round + 1, c.name, c.per_second.back());
        std::fflush(stdout);
      }

    if (ctx.rank() == 0) {
      const double bsp = bench::median(contenders[0].per_second), ssp = bench::median(contenders[1].per_second),
                   asp = bench::median(contenders[2].per_second);
      fmt::print("{} ranks, global batch {}, {} updates per rank and round; normal update {:.1f} ms; p={} delay {:.1f} ms; "
                 "medians of {} rounds\n",
                 ctx.size(), o.global_batch, updates, 1e3 * normal_seconds, probability, 1e3 * o.straggler_delay.count(), rounds);
      fmt::print("summary: ranks={} p={} factor={} bsp_updates_per_s={:.1f} ssp3_updates_per_s={:.1f} asp_updates_per_s={:.1f} "
                 "ssp3_vs_bsp={:.2f} (target >= 1.5) asp_vs_bsp={:.2f}\n",
                 ctx.size(), probability, factor, bsp, ssp, asp, ssp / bsp, asp / bsp);
    }
    return 0;
  });
}
