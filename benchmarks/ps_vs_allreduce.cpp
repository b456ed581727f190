// A dense model's update through the parameter server (PS<4>, Partition<0>, BSP: push the
// gradient to the shards' hosts, SGD there, pull the new values) against data-parallel
// all-reduce (Ring, SGD on every rank), for models of several sizes. Interleaved, medians.
//
//   mpirun -np 2 ./ps_vs_allreduce
//
// Both move about the same bytes per rank (all-reduce: 2 (p-1)/p of the model; PS: the
// gradient out and the values back for the shards hosted elsewhere), so the difference is
// in how: a ring of pipelined chunks against many-to-one messages to each shard's host.
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "executor_model.hpp"
#include "measure.hpp"

int main(int argc, char** argv) {
  using namespace strata;
  mpi::context ctx(argc, argv);
  bool quick = false;
  int rounds = 9;
  std::vector<double> sizes_mib = {1, 16, 64};
  CLI::App app{"Dense model update: parameter server vs all-reduce"};
  app.add_flag("--quick", quick, "small models and few rounds (smoke test)");
  app.add_option("--rounds", rounds, "interleaved rounds (medians are taken over them)");
  app.add_option("--sizes-mib", sizes_mib, "model sizes (8 equal tensors each)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    rounds = 2;
    sizes_mib = {0.25, 1};
  }

  std::vector<std::string> ratios;
  for (const double mib : sizes_mib) {
    constexpr int tensors = 8;
    const auto rows = std::max<std::size_t>(1, static_cast<std::size_t>(mib * (1 << 20) / 4 / 256 / tensors));
    std::vector<bench::tensor_shape> shapes;
    for (int i = 0; i < tensors; ++i) shapes.push_back({fmt::format("layer{}.weight", i), {rows, 256}});
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
  if (ctx.rank() == 0)
    fmt::print("summary: ranks={} rounds={} {}\n", ctx.size(), rounds, fmt::join(ratios, " "));
  return 0;
}
