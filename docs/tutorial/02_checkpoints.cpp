// Step 2: checkpoints and restarts. A training function that restores the newest checkpoint
// when it starts, saves one every few updates, and may be stopped anywhere: a job stopped at
// update 30 and started again ends where an uninterrupted job ends, bit for bit.
//
//   mpirun -np 2 build/docs/tutorial/tutorial_02_checkpoints /tmp/checkpoints
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <strata/strata.hpp>

using namespace strata;

constexpr std::int64_t total_updates = 60, save_every = 10;

// The data of update `u` on rank `r`: a pure function of the position, so that a resumed job
// reads on from where the checkpoint says without replaying anything. y = 2 x0 - 3 x1 + 1.
struct sample {
  float x0, x1, y;
};
sample sample_at(std::int64_t u, int r) {
  const float x0 = static_cast<float>((u * 7 + r * 3) % 11) / 11.0f;
  const float x1 = static_cast<float>((u * 5 + r * 2) % 13) / 13.0f;
  return {x0, x1, 2 * x0 - 3 * x1 + 1};
}

// One job: restores the newest checkpoint in `store` if there is one, trains on to
// `total_updates` saving every `save_every`, and returns the parameters (w0, w1, b). A job
// that is told to stop after `stop_after` updates returns early, as a killed job would end.
std::vector<float> job(mpi::context& ctx, const ckpt::store& store, std::int64_t stop_after = total_updates) {
  std::vector<float> w(2, 0.0f), grad_w(2), b(1, 0.0f), grad_b(1);
  auto model = make_model(variable<Strategy<Replicate, AllReduce<Ring>>>("w", w, grad_w, {2}),
                          variable<Strategy<>>("b", b, grad_b, {1}));
  // Momentum is optimizer state: a checkpoint keeps it with the parameters.
  auto exec = make_executor(ctx, model, optim::sgd{.lr = 0.2f, .momentum = 0.5f});

  if (const auto restored = exec.restore_checkpoint(store)) {
    // `step` counts updates (not micro-batches); `meta` is what save_checkpoint was given.
    if (ctx.rank() == 0)
      std::printf("resumed at update %lld, saved by %d ranks, note \"%s\"\n", static_cast<long long>(restored->step),
                  restored->world_size, restored->meta.at("note").c_str());
  }
  for (std::int64_t u = exec.updates(); u < total_updates && u < stop_after; u = exec.updates()) {
    const sample s = sample_at(u, ctx.rank());
    const float error = w[0] * s.x0 + w[1] * s.x1 + b[0] - s.y;
    grad_w = {error * s.x0, error * s.x1};
    grad_b = {error};
    exec.step();
    // Collective: every rank saves its part; rank 0 commits the checkpoint once all are written.
    if (exec.updates() % save_every == 0)
      exec.save_checkpoint(store, {{"note", "saved at update " + std::to_string(exec.updates())}});
  }
  return {w[0], w[1], b[0]};
}

int main(int argc, char** argv) {
  return run_main(argc, argv, [&](mpi::context& ctx) {
    if (argc != 2) throw usage_error("usage: tutorial_02_checkpoints <folder for the checkpoints>");
    const std::filesystem::path folder = argv[1];
    if (ctx.rank() == 0)
      for (const char* run : {"uninterrupted", "stopped"}) std::filesystem::remove_all(folder / run);
    ctx.control().barrier();

    // The reference: one job from start to end.
    const std::vector<float> reference = job(ctx, ckpt::store(folder / "uninterrupted"));
    // A job stopped after update 30, and the same program started again: it finds the
    // checkpoint of update 30 (the store keeps the newest 3) and goes on from there.
    const ckpt::store store(folder / "stopped", /*keep=*/3);
    job(ctx, store, /*stop_after=*/30);
    const std::vector<float> resumed = job(ctx, store);

    if (ctx.rank() == 0)
      std::printf("w = (%.4f, %.4f), b = %.4f: the resumed job %s the uninterrupted one\n", resumed[0], resumed[1],
                  resumed[2], resumed == reference ? "ends bitwise where" : "DOES NOT END where");
    return resumed == reference ? 0 : 1;
  });
}
