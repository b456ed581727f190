// What tensor parallelism's collectives cost: a Megatron-style MLP block split over the
// tensor group (column-parallel, then row-parallel) sums its partial output in forward
// (reduce_from_group) and its input's gradient in backward (copy_to_group): two all-reduces
// of one activation, [rows, features]. They are timed against one all-reduce of the same
// bytes together, interleaved, for activations of 16 KiB to 16 MiB: the ratio is what
// splitting the block's communication in two costs beyond its bytes, with what bounding
// each wait costs (every rank says it arrived, so a deadline can name the one that did not).
//
//   mpirun -np 2 ./tensor_parallel
#include <algorithm>
#include <cstdio>
#include <span>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "measure.hpp"
#include "../examples/common/rank_main.hpp"

int main(int argc, char** argv) {
  bool quick = false;
  int rounds = 9;
  std::size_t max_bytes = std::size_t{16} << 20;
  CLI::App app{"a tensor-parallel MLP block's collectives vs one all-reduce of the same bytes"};
  app.add_flag("--quick", quick, "small sizes, few rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds per size (medians are taken over them)");
  examples::number(app, "--max-bytes", max_bytes, std::size_t{16} << 10, std::size_t{1} << 30, "largest activation");
  return examples::parse_and_run(app, argc, argv, "tensor_parallel", [&](strata::mpi::context& ctx) {
    if (quick) max_bytes = std::min<std::size_t>(max_bytes, 1 << 20), rounds = 3;

    strata::mpi::communicator& group = ctx.collectives();  // the whole job is one tensor group
    if (ctx.rank() == 0)
      fmt::print("{:>10} {:>12} {:>12} {:>8}   (medians per block, ms; tensor group of {} ranks)\n", "activation",
                 "block (2x)", "one (same)", "ratio", group.size());
    double smallest = 0.0, largest = 0.0;
    for (std::size_t bytes = std::size_t{16} << 10; bytes <= max_bytes; bytes *= 4) {
      const std::size_t n = bytes / sizeof(float);
      std::vector<float> output(n, 1.0f), input_grad(n, 1.0f), both(2 * n, 1.0f);
      std::vector<bench::contender> contenders = {
          {"block", [&] {
             // The job as the tensor group: each call also says its arrival (the deadline's cost).
             strata::tensor_parallel::reduce_from_group::forward(ctx, std::span<float>(output));
             strata::tensor_parallel::copy_to_group::backward(ctx, std::span<float>(input_grad));
           }},
          {"one", [&] { group.allreduce_sum(std::span<float>(both)); }},
      };
      const int calls = static_cast<int>(std::clamp<std::size_t>((std::size_t{8} << 20) / bytes, 1, 100));
      bench::interleave(contenders, rounds, calls, [&] { group.barrier(); });
      const double block = bench::median(contenders[0].seconds), one = bench::median(contenders[1].seconds);
      (bytes == (std::size_t{16} << 10) ? smallest : largest) = block / one;
      if (ctx.rank() == 0) fmt::print("{:>10} {:>12.4f} {:>12.4f} {:>8.2f}\n", bytes, block * 1e3, one * 1e3, block / one);
    }
    if (ctx.rank() == 0)
      fmt::print("summary: ranks={} block_vs_one_allreduce_16KiB={:.2f} block_vs_one_allreduce_largest={:.2f} (time ratios: "
                 "the block's two all-reduces over one of the same bytes; 1 is free)\n",
                 group.size(), smallest, largest);
    return 0;
  });
}
