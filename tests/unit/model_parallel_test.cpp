// Model parallelism with ranks as threads (loopback): the mesh's groups, the tensor-parallel
// collectives, the pipeline driver, and short trainings of the block MLP on meshes against
// one rank. The MPI tests (tests/mpi/mesh_training.cpp) run the same trainings in processes
// for 50 updates. Ranks check with conformance::expect, which throws (Catch2's assertions are
// not thread-safe); loopback::run rethrows the first failure.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "conformance/cases.hpp"
#include "mpi/block_mlp.hpp"
#include "strata/comm/loopback/loopback.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"
#include "strata/parallel/tensor_parallel.hpp"

using namespace strata;
using conformance::expect;

namespace {
/// Whether `f` throws an exception whose message contains `text`.
template <class F>
bool throws_saying(F&& f, std::string_view text) {
  try {
    f();
  } catch (const std::exception& e) {
    return std::string_view(e.what()).find(text) != std::string_view::npos;
  }
  return false;
}
}  // namespace

TEST_CASE("each mesh group holds the ranks that differ from this one along its axis only", "[mesh]") {
  const mesh_shape shape{2, 2, 2};
  CHECK_NOTHROW(loopback::run(8, [&](loopback::context& ctx) {
    mesh grid(ctx, shape);
    const mesh_coordinates me = shape.coordinates(ctx.rank());
    expect(grid.coordinates() == me, "rank {}: coordinates", ctx.rank());
    for (mesh_axis axis : mesh_axes) {
      auto& group = grid.group(axis).control();
      expect(group.size() == shape[axis], "rank {}: the {} group has {} ranks", ctx.rank(), axis_name(axis), group.size());
      expect(group.rank() == me[axis], "rank {}: ordered along {}", ctx.rank(), axis_name(axis));
      const int world_rank = ctx.rank();
      std::vector<int> members(static_cast<std::size_t>(group.size()));
      group.allgather(std::span<const int>(&world_rank, 1), std::span<int>(members));
      for (int i = 0; i < group.size(); ++i) {
        mesh_coordinates expected = me;
        expected[axis] = i;
        expect(members[static_cast<std::size_t>(i)] == shape.rank(expected), "rank {}: member {} of the {} group", ctx.rank(),
               i, axis_name(axis));
      }
    }
  }));
}

TEST_CASE("gather, scatter and reduce-scatter put a split activation together and apart", "[tensor_parallel]") {
  constexpr std::size_t rows = 3, cols = 8;  // whole: [3, 8]; each of 4 ranks holds 2 columns
  CHECK_NOTHROW(loopback::run(4, [&](loopback::context& ctx) {
    auto& group = ctx;
    const auto r = static_cast<std::size_t>(ctx.rank());
    std::vector<float> whole(rows * cols);
    std::iota(whole.begin(), whole.end(), 0.0f);
    std::vector<float> part(rows * 2), gathered(rows * cols);
    tensor_parallel::scatter_to_group::forward(group, whole, part, rows);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < 2; ++j)
        expect(part[i * 2 + j] == whole[i * cols + 2 * r + j], "rank {}: scattered element ({}, {})", r, i, j);
    tensor_parallel::gather_from_group::forward(group, part, gathered, rows);
    expect(gathered == whole, "rank {}: gathered whole", r);

    std::vector<float> partial(whole), mine(6);  // every rank holds the same partial sum: the sum is 4x
    tensor_parallel::reduce_scatter_to_group::forward(group, partial, mine);
    for (std::size_t i = 0; i < mine.size(); ++i) expect(mine[i] == 4.0f * whole[6 * r + i], "rank {}: reduce-scattered {}", r, i);
    std::vector<float> back(whole.size());
    tensor_parallel::reduce_scatter_to_group::backward(group, mine, back);
    for (std::size_t i = 0; i < back.size(); ++i) expect(back[i] == 4.0f * whole[i], "rank {}: gathered back {}", r, i);

    std::vector<float> wrong(rows * 3);
    expect(throws_saying([&] { tensor_parallel::gather_from_group::forward(group, part, wrong, rows); }, "do not fill"),
           "rank {}: a wrong size is refused", r);
  }));
}

TEST_CASE("the pipeline driver hands activations forward and their gradients back, in micro-batch order", "[pipeline]") {
  constexpr int stages = 3, micro = 5;
  for (bool one_f_one_b : {false, true})
    CHECK_NOTHROW(loopback::run(stages, [&](loopback::context& ctx) {
      pipeline::driver pipe(ctx, {2, 2});
      std::vector<int> backwarded;
      // Stage s adds s + 1 to each element; the last stage's input is the micro-batch
      // number plus 1 + 2, and its gradient travels back unchanged.
      auto forward = [&](int i, std::span<const float> in, std::span<float> out) {
        const float x = pipe.first() ? static_cast<float>(i) : in[0];
        expect(pipe.first() || in[1] == in[0], "stage {}: a whole activation", pipe.stage());
        if (pipe.last()) expect(x == static_cast<float>(i + 3), "stage {}: micro-batch {} arrives as {}", pipe.stage(), i, x);
        else std::fill(out.begin(), out.end(), x + static_cast<float>(pipe.stage() + 1));
      };
      auto backward = [&](int i, std::span<const float> out_grad, std::span<float> in_grad) {
        const float g = pipe.last() ? static_cast<float>(-i) : out_grad[0];
        expect(g == static_cast<float>(-i), "stage {}: micro-batch {}'s gradient", pipe.stage(), i);
        std::fill(in_grad.begin(), in_grad.end(), g);
        backwarded.push_back(i);
      };
      const pipeline::run_stats stats = one_f_one_b ? pipe.run(pipeline::one_f_one_b{}, micro, forward, backward)
                                                    : pipe.run(pipeline::gpipe{}, micro, forward, backward);
      expect(backwarded == std::vector<int>{0, 1, 2, 3, 4}, "stage {}: backward in micro-batch order", pipe.stage());
      const int bound = one_f_one_b ? stages - pipe.stage() : micro;
      expect(stats.max_in_flight == bound, "stage {}: {} in flight, not {}", pipe.stage(), stats.max_in_flight, bound);
      expect(stats.seconds >= stats.compute_seconds, "stage {}: compute within the run", pipe.stage());
    }));
  CHECK_NOTHROW(loopback::run(2, [](loopback::context& ctx) {
    expect(throws_saying([&] { pipeline::driver(ctx, {}); }, "0 activation sizes for 2 stages"), "a missing boundary is refused");
    // A negative count is a usage error before anything is sized by it (not std::length_error).
    pipeline::driver pipe(ctx, {1});
    const auto pass = [](int, std::span<const float>, std::span<float>) {};
    expect(throws_saying([&] { pipe.run(pipeline::one_f_one_b{}, -1, pass, pass); }, "-1 micro-batches"),
           "a negative micro-batch count is refused");
  }));
  // Forward only (an evaluation): each micro-batch passes every stage once, in order.
  CHECK_NOTHROW(loopback::run(stages, [&](loopback::context& ctx) {
    pipeline::driver pipe(ctx, {1, 1});
    std::vector<int> seen;
    pipe.run_forward(micro, [&](int i, std::span<const float> in, std::span<float> out) {
      const float x = pipe.first() ? static_cast<float>(10 * i) : in[0] + 1.0f;
      if (!pipe.last()) out[0] = x;
      else expect(x == static_cast<float>(10 * i + stages - 1), "micro-batch {} reaches the last stage as {}", i, x);
      seen.push_back(i);
    });
    expect(seen == std::vector<int>{0, 1, 2, 3, 4}, "stage {}: forwards in order", pipe.stage());
  }));
}

TEST_CASE("the block MLP trained on a mesh ends where one rank's training ends", "[mesh][pipeline][tensor_parallel]") {
  const testing::block_mlp_config config;
  for (const auto& [text, schedule] : {std::pair{"dp=2,tp=2", "1f1b"}, std::pair{"tp=2,pp=2", "1f1b"},
                                       std::pair{"dp=2,pp=2", "gpipe"}, std::pair{"pp=4", "1f1b"}}) {
    CAPTURE(text, schedule);
    CHECK_NOTHROW(loopback::run(4, [&](loopback::context& ctx) {
      mesh grid(ctx, parse_mesh(text, ctx.size()));
      const testing::trained run = testing::train(grid, config, {.schedule = schedule, .updates = 5});
      group_context<loopback::context> alone(ctx, ctx.rank(), 0);
      mesh one(alone, mesh_shape{});
      const testing::trained reference = testing::train(one, config, {.schedule = schedule, .updates = 5});
      const double difference = testing::largest_difference(run.tensors, reference.tensors);
      expect(difference < 1e-5, "rank {}: {} relative from one rank's", ctx.rank(), difference);
    }));
  }
}

namespace {
/// Runs `body` on a 4-rank loopback mesh of `shape`; returns each rank's exception message.
template <class Body>
std::vector<std::string> messages_of(const char* shape, std::chrono::milliseconds tensor_timeout, Body&& body) {
  std::vector<std::string> messages(4);
  try {
    loopback::run(4, [&](loopback::context& ctx) {
      mesh grid(ctx, parse_mesh(shape, ctx.size()), tensor_timeout);
      try {
        body(ctx, grid);
      } catch (const std::exception& e) {
        messages[static_cast<std::size_t>(ctx.rank())] = e.what();
        throw;
      }
    });
  } catch (const std::exception&) {
  }
  return messages;
}

/// Rank 0 of stage 0 stops before its tensor collective; the others reach theirs.
template <class Grid>
void stage_with_a_stopped_rank(int rank, Grid& grid, std::span<float> out) {
  if (rank == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // stopped, as far as the others know
    return;
  }
  std::vector<float> partial(8, 1.0f);
  tensor_parallel::reduce_from_group::forward(grid.tensor(), std::span<float>(partial));
  std::ranges::copy(partial, out.begin());
}
}  // namespace

TEST_CASE("a tensor collective names the rank that never arrives", "[tensor_parallel][timeout]") {
  const auto start = std::chrono::steady_clock::now();
  const auto messages = messages_of("dp=2,tp=2", std::chrono::milliseconds(300), [](loopback::context& ctx, auto& grid) {
    std::vector<float> out(8);
    stage_with_a_stopped_rank(ctx.rank(), grid, out);
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK_THAT(messages[1], Catch::Contains("no progress for 0.3 s: in the tensor group's all-reduce of 8 floats "
                                          "(reduce_from_group::forward); rank 0 (dp=0,tp=0,pp=0) did not arrive"));
}

TEST_CASE("a wait behind a rank that waits names the rank at the end of the chain", "[pipeline][tensor_parallel][timeout]") {
  // tp=2,pp=2: rank 0 (stage 0) never reaches its all-reduce; rank 1, its tensor partner,
  // waits there and, at half its deadline, says so. Stage 1 waits for stage 0's activations:
  // rank 2 for rank 0's, rank 3 for rank 1's. Their deadline (0.3 s) comes before the tensor
  // group's (0.5 s), so rank 3 must name rank 0 through rank 1's notice.
  const auto start = std::chrono::steady_clock::now();
  const auto messages = messages_of("tp=2,pp=2", std::chrono::milliseconds(500), [](loopback::context& ctx, auto& grid) {
    auto pipe = pipeline::make_driver(grid, {8}, {.timeout = std::chrono::milliseconds(300)});
    pipe.run_forward(1, [&](int, std::span<const float>, std::span<float> out) {
      if (pipe.first()) stage_with_a_stopped_rank(ctx.rank(), grid, out);
    });
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  INFO(messages[2] << "\n" << messages[3]);
  const auto reported = [&](int r) { return messages[static_cast<std::size_t>(r)].find("no progress") != std::string::npos; };
  CHECK((reported(2) || reported(3)));  // whichever gives up first ends the job
  if (reported(2))
    CHECK_THAT(messages[2], Catch::Contains("from stage 0, rank 0 (dp=0,tp=0,pp=0), which did not send it (stopped"));
  if (reported(3))
    CHECK_THAT(messages[3], Catch::Contains("from stage 0, rank 1 (dp=0,tp=1,pp=0), which did not send it (it waits for "
                                            "rank 0 (dp=0,tp=0,pp=0), which is stopped or too slow)"));
}
