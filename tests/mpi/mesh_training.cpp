// Model parallelism against one rank: the block MLP (block_mlp.hpp) trained on a mesh, any
// factorization of the job into data, tensor and pipeline groups under GPipe or 1F1B, must
// end where the same model, data and global batch end on one rank. Every rank also trains
// that 1-rank reference alone and compares its own part of every tensor with the matching
// part of the reference: the largest difference, relative to the tensor's largest value,
// must stay within --tolerance. The stages' activations in flight are checked against
// their schedule's bound (GPipe: every micro-batch; 1F1B: at most the stages from this one
// to the last).
//
// The safety net's tests make a mistake on purpose on the tensor ranks other than the first:
// --split-weight-declared-whole (block0.w1 without TensorParallel<0>: refused before a
// checkpoint), --whole-init-differs (the whole tensors initialized otherwise: they must
// still end equal to one rank's), --batch-differs (another batch: STRATA_DEBUG=detail names
// the rank at the first step).
//
// With --stall RANK UPDATE that rank stops, and its pipeline neighbours' deadline must name
// it (the fault test). With --sigstop RANK UPDATE WHERE that rank stops itself (SIGSTOP) at
// its first tensor collective of that update's forward or backward, or of the evaluation
// after it (--evaluate-every), or before the update ("update"); it first prints when, so a
// test can time how long the others take to end the job.
//
//   mpiexec -n 4 mesh_training --mesh dp=2,tp=2,pp=1 --schedule 1f1b --updates 50
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "mpi/block_mlp.hpp"
#include "strata/comm/mpi/mpi.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"

using namespace strata;
using namespace strata::testing;

int main(int argc, char** argv) {
  mpi::context ctx(argc, argv);
  CLI::App app{"Trains the block MLP on a mesh and compares it with one rank"};
  std::string mesh_text = "dp=1", schedule = "1f1b";
  int updates = 50;
  double tolerance = 1e-4, timeout = 300.0;
  std::vector<int> stall;  // rank, update
  std::vector<std::string> sigstop;  // rank, update, where
  int evaluate_every = 0;
  std::string checkpoints;
  int save_at = 0, save_every = 0, stop_after = 0;
  testing::block_mlp_config config;
  app.add_option("--mesh", mesh_text, "axes, e.g. dp=2,tp=2,pp=1");
  app.add_option("--schedule", schedule, "gpipe or 1f1b")->check(CLI::IsMember({"gpipe", "1f1b"}));
  app.add_option("--updates", updates)->check(CLI::PositiveNumber);
  app.add_option("--micro-batches", config.micro_batches)->check(CLI::PositiveNumber);
  app.add_option("--tolerance", tolerance);
  app.add_option("--timeout", timeout, "seconds a rank waits for another (executor and pipeline)");
  app.add_option("--checkpoints", checkpoints, "a directory: resume from its newest checkpoint");
  app.add_option("--save-at", save_at, "save a checkpoint after this update");
  app.add_option("--save-every", save_every, "save a checkpoint after every this many updates");
  app.add_option("--stop-after", stop_after, "stop after this update (a job that is cut short)");
  app.add_option("--stall", stall,
                 "RANK UPDATE: that rank stops before that update (the fault tests; in strata-launch's first attempt only)")
      ->expected(2);
  app.add_option("--sigstop", sigstop, "RANK UPDATE WHERE: that rank stops itself (SIGSTOP) where: update, forward, "
                                      "backward or evaluation")
      ->expected(3);
  app.add_option("--evaluate-every", evaluate_every, "a forward-only evaluation pass after every this many updates")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--split-weight-declared-whole", config.split_weight_declared_whole,
               "declare block0.w1, split over the tensor group, without TensorParallel<0>");
  app.add_flag("--whole-init-differs", config.whole_init_differs,
               "initialize the whole tensors otherwise on the tensor ranks but the first");
  app.add_flag("--batch-differs", config.batch_differs, "read another batch on the tensor ranks but the first");
  CLI11_PARSE(app, argc, argv);
  try {
    mesh grid(ctx, parse_mesh(mesh_text, ctx.size()), checked_timeout(timeout, "--timeout"));
    train_options options{.schedule = schedule,
                          .updates = updates,
                          .timeout = checked_timeout(timeout, "--timeout"),
                          .checkpoints = checkpoints,
                          .save_at = save_at,
                          .save_every = save_every,
                          .stop_after = stop_after,
                          .evaluate_every = evaluate_every};
    const char* attempt = std::getenv("STRATA_LAUNCH_ATTEMPT");  // a restart must not stall again
    if (stall.size() == 2 && stall[0] == ctx.rank() && (!attempt || std::string_view(attempt) == "1"))
      options.before_update = [&](int u) {
        if (u == stall[1]) std::this_thread::sleep_for(std::chrono::hours(1));
      };
    if (sigstop.size() == 3 && std::stoi(sigstop[0]) == ctx.rank()) {
      const int at = std::stoi(sigstop[1]);
      const std::string where = sigstop[2];
      if (where != "update" && where != "forward" && where != "backward" && where != "evaluation")
        throw usage_error(fmt::format("--sigstop: \"{}\" is not update, forward, backward or evaluation", where));
      const auto stop = [&ctx, where, at, stopped = std::make_shared<bool>(false)] {
        if (std::exchange(*stopped, true)) return;  // once: after the job ends the rank is continued
        const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        std::printf("mesh_training: rank %d stops (SIGSTOP) in the %s of update %d at %.3f\n", ctx.rank(), where.c_str(), at,
                    now);
        std::fflush(stdout);
        std::raise(SIGSTOP);
      };
      if (where == "update")
        options.before_update = [=](int u) {
          if (u == at) stop();
        };
      else
        options.before_tensor_collective = [=](int u, std::string_view pass) {
          if (u == at && pass == where) stop();
        };
    }
    const trained run = train(grid, config, options);
    if (run.updates < updates) {  // cut short: nothing to compare yet
      if (ctx.rank() == 0)
        std::printf("mesh %s: stopped after update %d of %d%s\n", to_string(grid.shape()).c_str(), static_cast<int>(run.updates),
                    updates, save_at > 0 ? fmt::format(", checkpoint of update {} saved", save_at).c_str() : "");
      return 0;
    }
    // The reference: this rank alone, as a mesh of one rank.
    group_context<mpi::context> alone(ctx, ctx.rank(), 0);
    mesh one(alone, mesh_shape{});
    const trained reference = train(one, config, {.schedule = schedule, .updates = updates});

    const double difference = largest_difference(run.tensors, reference.tensors);
    const int stage = grid.coordinates().pp, stages = grid.shape().pp;
    const int bound = schedule == "gpipe" ? config.micro_batches : std::min(stages - stage, config.micro_batches);
    const bool in_flight_ok = schedule == "gpipe" ? run.max_in_flight == bound : run.max_in_flight <= bound;
    const bool learned = stage + 1 != stages || run.restored_from > 0 || run.last_loss < run.first_loss;
    // What a rank holds, with what its tensor group holds alike counted once per group.
    const auto held = [](const memory_use& m) { return m.parameters + m.optimizer_state; };
    struct report {
      double difference;
      int in_flight, in_flight_ok, learned;
      std::uint64_t held, copies;
    } mine{difference, run.max_in_flight, in_flight_ok, learned, held(run.memory), run.memory.tensor_group_copies};
    std::vector<report> all(static_cast<std::size_t>(ctx.size()));
    ctx.control().allgather(std::span<const report>(&mine, 1), std::span<report>(all));
    int failures = 0;
    double worst = 0.0;
    // Memory: one data replica (dp = 0) holds exactly the model; no rank more than
    // 1.25 / (tp * pp) of it.
    const std::uint64_t model_bytes = held(reference.memory);
    std::uint64_t replica = 0, largest = 0;
    for (int r = 0; r < ctx.size(); ++r) {
      const report& x = all[static_cast<std::size_t>(r)];
      largest = std::max(largest, x.held);
      if (grid.shape().coordinates(r).dp == 0)
        replica += x.held - x.copies + x.copies / static_cast<std::uint64_t>(grid.shape().tp);
    }
    const double share = static_cast<double>(largest) / static_cast<double>(model_bytes);
    const double share_bound = 1.25 / (grid.shape().tp * grid.shape().pp);
    if (ctx.rank() == 0 && replica != model_bytes)
      ++failures, std::printf("FAIL: one data replica holds %llu bytes of parameters and optimizer state, the model %llu\n",
                              static_cast<unsigned long long>(replica), static_cast<unsigned long long>(model_bytes));
    if (ctx.rank() == 0 && share > share_bound)
      ++failures, std::printf("FAIL: a rank holds %.3f of the model, above 1.25/(tp*pp) = %.3f\n", share, share_bound);
    for (int r = 0; r < ctx.size(); ++r) {
      const report& x = all[static_cast<std::size_t>(r)];
      worst = std::max(worst, x.difference);
      if (ctx.rank() != 0) continue;
      if (x.difference > tolerance || !std::isfinite(x.difference))
        ++failures, std::printf("FAIL %s: parameters differ from one rank's by %.3g relative (tolerance %.3g)\n",
                                grid.describe(r).c_str(), x.difference, tolerance);
      if (!x.in_flight_ok)
        ++failures, std::printf("FAIL %s: %d micro-batches in flight breaks %s's bound\n", grid.describe(r).c_str(),
                                x.in_flight, schedule.c_str());
      if (!x.learned) ++failures, std::printf("FAIL %s: the loss did not fall\n", grid.describe(r).c_str());
    }
    if (ctx.rank() == 0) {
      std::printf("mesh %s, %s, %d micro-batches: after %d updates the largest difference from one rank is %.3g "
                  "relative (tolerance %.3g); stage 0 held at most %d micro-batches\n",
                  to_string(grid.shape()).c_str(), schedule.c_str(), config.micro_batches, updates, worst, tolerance,
                  all[0].in_flight);
      std::printf("memory: a data replica holds %llu bytes (the model's), the largest rank %.3f of them (bound %.3f)\n",
                  static_cast<unsigned long long>(replica), share, share_bound);
      if (run.restored_from > 0) std::printf("resumed from the checkpoint of update %d\n", static_cast<int>(run.restored_from));
      if (stages == 1) std::printf("loss %.4f -> %.4f\n", run.first_loss, run.last_loss);
    }
    MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_MAX, ctx.control().native_handle());
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mesh_training (rank %d): %s\n", ctx.rank(), e.what());
    return 2;
  }
}
