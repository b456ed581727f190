// Model parallelism with ranks as threads (loopback): the mesh's groups, the tensor-parallel
// collectives, the pipeline driver, and short trainings of the block MLP on meshes against
// one rank. The MPI tests (tests/mpi/mesh_training.cpp) run the same trainings in processes
// for 50 updates.
#include <numeric>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include "mpi/block_mlp.hpp"
#include "strata/comm/loopback/loopback.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"
#include "strata/parallel/tensor_parallel.hpp"

using namespace strata;

TEST_CASE("each mesh group holds the ranks that differ from this one along its axis only", "[mesh]") {
  const mesh_shape shape{2, 2, 2};
  loopback::run(8, [&](loopback::context& ctx) {
    mesh grid(ctx, shape);
    const mesh_coordinates me = shape.coordinates(ctx.rank());
    CHECK(grid.coordinates() == me);
    for (mesh_axis axis : mesh_axes) {
      auto& group = grid.group(axis).control();
      REQUIRE(group.size() == shape[axis]);
      CHECK(group.rank() == me[axis]);  // ordered along the axis
      const int world_rank = ctx.rank();
      std::vector<int> members(static_cast<std::size_t>(group.size()));
      group.allgather(std::span<const int>(&world_rank, 1), std::span<int>(members));
      for (int i = 0; i < group.size(); ++i) {
        mesh_coordinates expected = me;
        expected[axis] = i;
        CHECK(members[static_cast<std::size_t>(i)] == shape.rank(expected));
      }
    }
  });
}

TEST_CASE("gather, scatter and reduce-scatter put a split activation together and apart", "[tensor_parallel]") {
  constexpr std::size_t rows = 3, cols = 8;  // whole: [3, 8]; each of 4 ranks holds 2 columns
  loopback::run(4, [&](loopback::context& ctx) {
    auto& group = ctx.collectives();
    std::vector<float> whole(rows * cols);
    std::iota(whole.begin(), whole.end(), 0.0f);
    std::vector<float> part(rows * 2), gathered(rows * cols);
    tensor_parallel::scatter_to_group::forward(group, whole, part, rows);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < 2; ++j) CHECK(part[i * 2 + j] == whole[i * cols + 2 * static_cast<std::size_t>(ctx.rank()) + j]);
    tensor_parallel::gather_from_group::forward(group, part, gathered, rows);
    CHECK(gathered == whole);

    std::vector<float> partial(whole), mine(6);  // every rank holds the same partial sum: the sum is 4x
    tensor_parallel::reduce_scatter_to_group::forward(group, partial, mine);
    for (std::size_t i = 0; i < mine.size(); ++i) CHECK(mine[i] == 4.0f * whole[6 * static_cast<std::size_t>(ctx.rank()) + i]);
    std::vector<float> back(whole.size());
    tensor_parallel::reduce_scatter_to_group::backward(group, mine, back);
    for (std::size_t i = 0; i < back.size(); ++i) CHECK(back[i] == 4.0f * whole[i]);

    std::vector<float> wrong(rows * 3);
    CHECK_THROWS_WITH(tensor_parallel::gather_from_group::forward(group, part, wrong, rows), Catch::Contains("do not fill"));
  });
}

TEST_CASE("the pipeline driver hands activations forward and their gradients back, in micro-batch order", "[pipeline]") {
  constexpr int stages = 3, micro = 5;
  for (bool one_f_one_b : {false, true})
    loopback::run(stages, [&](loopback::context& ctx) {
      pipeline::driver pipe(ctx, {2, 2});
      std::vector<int> backwarded;
      const pipeline::run_stats stats = [&] {
        // Stage s adds s + 1 to each element; the last stage's output is the micro-batch
        // number plus 1 + 2 + 3, and its gradient travels back unchanged.
        auto forward = [&](int i, std::span<const float> in, std::span<float> out) {
          const float x = pipe.first() ? static_cast<float>(i) : in[0];
          CHECK((pipe.first() || in[1] == in[0]));
          if (pipe.last()) CHECK(x + static_cast<float>(stages) == static_cast<float>(i + 6));
          else std::fill(out.begin(), out.end(), x + static_cast<float>(pipe.stage() + 1));
        };
        auto backward = [&](int i, std::span<const float> out_grad, std::span<float> in_grad) {
          const float g = pipe.last() ? static_cast<float>(-i) : out_grad[0];
          CHECK(g == static_cast<float>(-i));
          std::fill(in_grad.begin(), in_grad.end(), g);
          backwarded.push_back(i);
        };
        return one_f_one_b ? pipe.run(pipeline::one_f_one_b{}, micro, forward, backward)
                           : pipe.run(pipeline::gpipe{}, micro, forward, backward);
      }();
      CHECK(backwarded == std::vector<int>{0, 1, 2, 3, 4});
      CHECK(stats.max_in_flight == (one_f_one_b ? stages - pipe.stage() : micro));
      CHECK(stats.seconds >= stats.compute_seconds);
    });
  loopback::run(2, [](loopback::context& ctx) {
    CHECK_THROWS_WITH(pipeline::driver(ctx, {}), Catch::Contains("0 activation sizes for 2 stages"));
  });
  // Forward only (an evaluation): each micro-batch passes every stage once, in order.
  loopback::run(stages, [&](loopback::context& ctx) {
    pipeline::driver pipe(ctx, {1, 1});
    std::vector<int> seen;
    pipe.run_forward(micro, [&](int i, std::span<const float> in, std::span<float> out) {
      const float x = pipe.first() ? static_cast<float>(10 * i) : in[0] + 1.0f;
      if (!pipe.last()) out[0] = x;
      else CHECK(x == static_cast<float>(10 * i + stages - 1));
      seen.push_back(i);
    });
    CHECK(seen == std::vector<int>{0, 1, 2, 3, 4});
  });
}

TEST_CASE("the block MLP trained on a mesh ends where one rank's training ends", "[mesh][pipeline][tensor_parallel]") {
  const testing::block_mlp_config config;
  for (const auto& [text, schedule] : {std::pair{"dp=2,tp=2", "1f1b"}, std::pair{"tp=2,pp=2", "1f1b"},
                                       std::pair{"dp=2,pp=2", "gpipe"}, std::pair{"pp=4", "1f1b"}}) {
    CAPTURE(text, schedule);
    loopback::run(4, [&](loopback::context& ctx) {
      mesh grid(ctx, parse_mesh(text, ctx.size()));
      const testing::trained run = testing::train(grid, config, {.schedule = schedule, .updates = 5});
      group_context<loopback::context> alone(ctx, ctx.rank(), 0);
      mesh one(alone, mesh_shape{});
      const testing::trained reference = testing::train(one, config, {.schedule = schedule, .updates = 5});
      CHECK(testing::largest_difference(run.tensors, reference.tensors) < 1e-5);
    });
  }
}
