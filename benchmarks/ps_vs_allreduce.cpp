// A dense model's update through the parameter server (PS<4>, Partition<0>, BSP: push the
// gradient to the shards' hosts, SGD there, pull the new values) against data-parallel
// all-reduce (Ring, SGD on every rank), for models of several sizes. Interleaved, medians.
//
//   mpirun -np 2 ./ps_vs_allreduce
//
// Both move about the same bytes per rank (all-reduce: 2 (p-1)/p of the model; PS: the
// gradient out and the values back for the shards hosted elsewhere), so the difference is
// in how: a ring of pipelined chunks against many-to-one messages to each shard's host.
//
// It also reports what each buys in memory: the optimizer state (Adam's two moments) that
// each rank holds under either, as the executors account it (executor::memory). The
// parameter server keeps it only beside the shards a rank hosts, ZeRO-style.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "executor_model.hpp"
#include "measure.hpp"
#include "../examples/common/rank_main.hpp"

int main(int argc, char** argv) {
  using namespace strata;
  bool quick = false;
  int rounds = 9;
  std::vector<double> sizes_mib = {1, 16, 64};
  CLI::App app{"Dense model update: parameter server vs all-reduce"};
  app.add_flag("--quick", quick, "small models and few rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds (medians are taken over them)");
  app.add_option("--sizes-mib", sizes_mib, "model sizes (8 equal tensors each)")->check(examples::in_range(0.001, 4096.0));
  return examples::parse_and_run(app, argc, argv, "ps_vs_allreduce", [&](strata::mpi::context& ctx) {
    if (quick) {
      rounds = 2;
      sizes_mib = {0.25, 1};
    }

    // The most optimizer state any rank holds (collective).
    auto most_state_per_rank = [&](auto& m) {
      const std::uint64_t mine = m.exec->memory().optimizer_state;
      std::vector<std::uint64_t> all(static_cast<std::size_t>(ctx.size()));
      ctx.control().allgather(std::span<const std::uint64_t>(&mine, 1), std::span<std::uint64_t>(all));
      return static_cast<double>(*std::ranges::max_element(all)) / (1 << 20);
    };

    std::vector<std::string> ratios;
    for (const double mib : sizes_mib) {
      constexpr int tensors = 8;
      const auto rows = std::max<std::size_t>(1, static_cast<std::size_t>(mib * (1 << 20) / 4 / 256 / tensors));
      std::vector<bench::tensor_shape> shapes;
      for (int i = 0; i < tensors; ++i) shapes.push_back({fmt::format("layer{}.weight", i), {rows, 256}});
      {  // the timed executors and their buffers are gone before the next pair is made
        const optim::sgd sgd{.lr = 1e-6f};
        bench::executor_model<Strategy<PS<4>, Partition<0>>, optim::sgd> ps(ctx, shapes, sgd, {}, 0.5f, 1e-3f);
        bench::executor_model<Strategy<AllReduce<Ring>>, optim::sgd> allreduce(ctx, shapes, sgd, {}, 0.5f, 1e-3f);
        std::vector<bench::contender> contenders = {{"parameter server", [&] { ps.step(); }},
                                                    {"all-reduce", [&] { allreduce.step(); }}};
        bench::interleave(contenders, rounds, 3, [&] { ctx.control().barrier(); });
        const double ps_ms = 1e3 * bench::median(contenders[0].seconds), allreduce_ms = 1e3 * bench::median(contenders[1].seconds);
        if (ctx.rank() == 0)
          fmt::print("  {:6.2f} MiB  parameter server {:8.2f} ms  all-reduce {:8.2f} ms  ps/all-reduce {:.2f}\n",
                     static_cast<double>(tensors * rows * 256 * 4) / (1 << 20), ps_ms, allreduce_ms, ps_ms / allreduce_ms);
        ratios.push_back(fmt::format("ps_over_allreduce_{}MiB={:.2f}", mib, ps_ms / allreduce_ms));
      }

      const optim::adam adam{.lr = 1e-6f};
      bench::executor_model<Strategy<PS<4>, Partition<0>>, optim::adam> ps_adam(ctx, shapes, adam);
      bench::executor_model<Strategy<AllReduce<Ring>>, optim::adam> allreduce_adam(ctx, shapes, adam);
      const double ps_state = most_state_per_rank(ps_adam), replicated_state = most_state_per_rank(allreduce_adam);
      if (ctx.rank() == 0)
        fmt::print("             Adam state on the busiest rank: parameter server {:8.2f} MiB  all-reduce {:8.2f} MiB  "
                   "saved {:.0f}%\n",
                   ps_state, replicated_state, 100.0 * (1.0 - ps_state / replicated_state));
      ratios.push_back(fmt::format("adam_state_ps_over_allreduce_{}MiB={:.2f}", mib, ps_state / replicated_state));
    }
    if (ctx.rank() == 0)
      fmt::print("summary: ranks={} rounds={} {}\n", ctx.size(), rounds, fmt::join(ratios, " "));
    return 0;
  });
}
