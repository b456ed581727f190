// A parameter-server job for the export tests: a dense variable partitioned over 3 uneven
// shards, a sparse table over 2, and a replicated bias, trained a few updates on every rank;
// then a checkpoint in DIR and each rank's parameters (the shards it hosts, as the executor
// places them) in PREFIX.rank-K.safetensors.
//
//   mpirun -np 2 ps_state DIR PREFIX
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <strata/exit_status.hpp>
#include <strata/strata.hpp>

#include "../../examples/common/save_state.hpp"

int main(int argc, char** argv) {
  using namespace strata;
  mpi::context ctx(argc, argv);
  if (argc != 3) {
    std::fputs("usage: ps_state DIR PREFIX\n", stderr);
    return strata::exit_usage;
  }
  using Dense = Strategy<PS<3>, Partition<0>>;
  using Sparse = Strategy<PS<2>, Partition<0>, SparseRows>;
  using Bias = Strategy<AllReduce<Native>>;
  std::vector<float> w(7 * 5, 0.25f), gw(7 * 5), table(10 * 3, 0.5f), b(5, 0.1f), gb(5);
  model_of<Dense, Sparse, Bias> m;
  m.add(variable<Dense>("w", w, gw, {7, 5}));
  m.add(variable<Sparse>("emb", table, {}, {10, 3}));
  m.add(variable<Bias>("b", b, gb, {5}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.05f, .momentum = 0.9f});
  const std::vector<std::uint32_t> rows = {1, 4, 7, static_cast<std::uint32_t>(ctx.rank() % 10)};
  for (int u = 1; u <= 5; ++u) {
    for (std::size_t i = 0; i < gw.size(); ++i) gw[i] = std::sin(static_cast<float>(i + 3 * ctx.rank() + u));
    for (std::size_t i = 0; i < gb.size(); ++i) gb[i] = std::cos(static_cast<float>(i * u + ctx.rank()));
    std::vector<float> values(rows.size() * 3);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::cos(static_cast<float>(i) * static_cast<float>(u));
    exec.pull(variable_id{1}, rows);
    exec.sparse_gradient(variable_id{1}, rows, values);
    exec.step();
  }
  exec.save_checkpoint(ckpt::store(argv[1]));
  examples::save_rank_state(exec, fmt::format("{}.rank-{}.safetensors", argv[2], ctx.rank()));
  return 0;
}
