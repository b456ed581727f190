// Ranks that stop participating, and what the others must do about it. Modes (argv[1]):
//   (none)       rank 1 stops before its second step: the others fail naming it;
//   start-up     rank 1 stops before it constructs its executor: likewise;
//   backward     rank 1 stops in the middle of its second backward pass, after one of its two
//                gradients was marked ready (its bucket's all-reduce started): it is named;
//   checkpoint   rank 1 stops instead of saving a checkpoint with the others: it is named;
//   asp          3 ranks under ASP with a 1 MiB PS<1> variable (replies far above MPI's eager
//                size); rank 0 stops rank 2 (SIGSTOP) for 6 s while training on: the others
//                must keep updating (ASP waits for nobody), and the job ends well;
//   asp-server   rank 1 stops rank 0, which hosts the shard, under ASP: the others fail
//                naming rank 0 as the server that did not answer;
//   calibrate    rank 1 stops (SIGSTOP) as the job starts measuring its links: rank 0, its
//                partner, names it in the link's measurement, rank 2 at the barrier after it;
//   truncated    a receive shorter than its message fails (MPI_ERR_TRUNCATE): the rank
//                reports it and the job ends without a crash at shutdown.
// In the failing modes the job must end (mpirun exits non-zero) well before a stalled rank
// would wake up.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <unistd.h>

#include "strata/plan/calibrate.hpp"
#include "strata/strata.hpp"

namespace {

using namespace strata;

std::vector<int> process_ids(mpi::context& ctx) {
  const int mine = ::getpid();
  std::vector<int> all(static_cast<std::size_t>(ctx.size()));
  ctx.control().allgather(std::span<const int>(&mine, 1), std::span<int>(all));
  return all;
}

int stop_in(mpi::context& ctx, std::string_view mode) {
  std::vector<float> w(1000), g(1000, 1.0f), b(10), gb(10, 1.0f);
  using Dense = Strategy<AllReduce<Ring>>;
  auto m = make_model(variable<Dense>("fc.weight", w, g, {100, 10}), variable<Dense>("fc.bias", b, gb, {10}));
  executor_options options;
  options.timeout = std::chrono::seconds(2);
  options.buckets = {.first_bucket_bytes = 16, .bucket_bytes = 16};  // one bucket per variable
  if (mode == "start-up" && ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
  auto exec = make_executor(ctx, m, optim::sgd{}, options);
  exec.step();
  if (mode == "checkpoint") {
    if (ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));  // stalls
    exec.save_checkpoint(ckpt::store(std::filesystem::temp_directory_path() /
                                     ("strata_stalled_checkpoint." + std::to_string(::getppid()))));
    return 0;
  }
  if (mode == "backward") {
    exec.grad_ready(variable_id{1});  // fc.bias: its bucket's all-reduce starts
    if (ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));  // stalls before fc.weight
    exec.grad_ready(variable_id{0});
  } else if (ctx.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // stalls
  }
  exec.step();
  return 0;
}

int asp(mpi::context& ctx, std::string_view mode) {
  using Async = Strategy<PS<1>, Consistency<ASP>>;
  std::vector<float> w(512 * 512), g(512 * 512, 1e-6f);
  auto m = make_model(variable<Async>("table", w, g, {512, 512}));
  executor_options options;
  options.timeout = std::chrono::seconds(mode == "asp-server" ? 2 : 30);
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 1e-3f}, options);
  const int host = exec.parameter_server_plan()->variables[0].shards[0].host;
  const std::vector<int> pids = process_ids(ctx);
  if (mode == "asp-server") {
    for (int u = 0; u < 5; ++u) exec.step();
    if (ctx.rank() == (host + 1) % ctx.size()) ::kill(pids[static_cast<std::size_t>(host)], SIGSTOP);
    for (int u = 0; u < 1000; ++u) exec.step();  // the server is gone: the deadline must fire
    return 0;
  }
  const int frozen = ctx.size() - 1, controller = 0;
  if (host == frozen) {
    std::fprintf(stderr, "the shard is on rank %d, the rank this test stops\n", host);
    return 1;
  }
  for (int u = 0; u < 10; ++u) exec.step();
  if (ctx.rank() == frozen) {
    // Keeps stepping: stopped at some point inside (or between) its steps, then continued.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) exec.step();
    return 0;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the frozen rank is mid-training
  if (ctx.rank() == controller) ::kill(pids[static_cast<std::size_t>(frozen)], SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  long updates = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(6)) {
    exec.step();
    ++updates;
  }
  if (ctx.rank() == controller) ::kill(pids[static_cast<std::size_t>(frozen)], SIGCONT);
  std::printf("rank %d: %ld updates in the 6 s rank %d was stopped\n", ctx.rank(), updates, frozen);
  std::fflush(stdout);
  if (updates < 20) {
    std::fprintf(stderr, "rank %d: ASP waited for the stopped rank (%ld updates in 6 s)\n", ctx.rank(), updates);
    return 1;
  }
  return 0;
}

int truncated(mpi::context& ctx) {
  std::vector<double> message(8, 1.0);
  if (ctx.rank() == 0) {
    auto sent = ctx.control().isend(std::span<const double>(message), 1, 7);
    ctx.control().wait(sent);
  } else if (ctx.rank() == 1) {
    try {
      auto received = ctx.control().irecv(std::span<double>(message).first(4), 0, 7);
      ctx.control().wait(received);
    } catch (const comm_error& e) {
      std::fprintf(stderr, "rank 1: %s\n", e.what());
      return 1;  // the context's destructor must end the job cleanly
    }
  }
  ctx.control().barrier();
  return 0;
}

int stop_in_calibration(mpi::context& ctx) {
  ::setenv("STRATA_TIMEOUT_SECONDS", "2", 1);  // calibration's deadline, as a job would set it
  plan::calibrate_options options;
  options.progress = [&](const std::string& what) {
    if (what == "point to point" && ctx.rank() == 1) ::raise(SIGSTOP);  // before its first link message
  };
  plan::calibrate(ctx, options);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mpi::context ctx(argc, argv);
  const std::string_view mode = argc > 1 ? argv[1] : "";
  if (mode == "truncated") return truncated(ctx);
  if (mode == "calibrate") return stop_in_calibration(ctx);
  return mode.starts_with("asp") ? asp(ctx, mode) : stop_in(ctx, mode);
}
