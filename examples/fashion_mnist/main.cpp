// Data-parallel training of a 784-256-128-10 MLP on Fashion-MNIST with strata.
//
//   mpirun -np 2 ./fashion_mnist --epochs 10 --strategy "AllReduce<Ring>"
//   mpirun -np 2 ./fashion_mnist --epochs 10 --strategy auto   # the cost model chooses, trial runs refine
//
// Every rank shuffles the training set with the same seed and takes its slice of each
// global batch; the executor averages gradients with the chosen all-reduce, overlapping
// communication with backward, and applies SGD with momentum on every replica.
//
// With --checkpoint-dir it saves checkpoints and, when started again (by strata-launch after
// a failure), resumes from the newest usable one, on any number of ranks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <range/v3/view/chunk.hpp>

#include <strata/plan/auto_strategy.hpp>
#include <strata/plan/calibrate.hpp>
#include <strata/strata.hpp>

#include "../common/blas.hpp"
#include "../common/progress.hpp"
#include "../common/rank_main.hpp"
#include "../common/run_summary.hpp"
#include "idx.hpp"
#include "mlp.hpp"

namespace {

// The strategies --strategy can pick (any spelling of one of them is accepted).
using namespace strata;  // the policy vocabulary reads best unqualified
using DenseNative = Strategy<AllReduce<Native>>;
using DenseRing = Strategy<AllReduce<Ring>>;
using DenseFP16 = Strategy<AllReduce<Ring>, Compress<FP16>>;
using DenseFP16Feedback = Strategy<AllReduce<Ring>, Compress<FP16, ErrorFeedback>>;
using DenseBF16 = Strategy<AllReduce<Ring>, Compress<BF16>>;
using DenseTopK = Strategy<AllReduce<Ring>, Compress<TopK<0.01>, ErrorFeedback>>;
using DensePowerSGD = Strategy<AllReduce<Ring>, Compress<PowerSGD<4>, ErrorFeedback>>;
using DensePartitioned = Strategy<AllReduce<Ring>, Partition<0>>;
using DenseTree = Strategy<AllReduce<Tree>>;
using DenseHierarchical = Strategy<AllReduce<Hierarchical>>;
using DenseHierarchicalFP16 = Strategy<AllReduce<Hierarchical>, Compress<FP16>>;  // across machines

template <class... S>
struct strategy_set {
  template <class F>
  static void visit(std::string_view text, F&& f) {
    visit_strategy<S...>(text, std::forward<F>(f));
  }
  static bool contains(const strategy_descriptor& d) { return ((S::descriptor == d) || ...); }
};
using compiled = strategy_set<DenseNative, DenseRing, DenseFP16, DenseFP16Feedback, DenseBF16, DenseTopK, DensePowerSGD,
                              DensePartitioned, DenseTree, DenseHierarchical, DenseHierarchicalFP16>;

struct options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string strategy = "AllReduce<Ring>";
  int epochs = 10;
  int global_batch = 128;
  int accumulation = 1;
  float lr = 0.05f;
  float momentum = 0.9f;
  std::uint64_t seed = 1;
  double bucket_mib = 25.0;
  double first_bucket_mib = 1.0;
  int powersgd_warmup = 100;
  int ranks_per_node = 0;  // AllReduce<Hierarchical>: nodes of this many consecutive ranks; 0: the machines
  bool overlap = true;
  long max_steps = -1;  // stop early (tests)
  std::string save_params;
  double min_accuracy = 0.0;
  std::string init_weights;    // safetensors weights to start from
  std::string checkpoint_dir;  // save here, and resume from here after a failure
  long checkpoint_every = 0;   // updates between checkpoints; 0: at the end of every epoch
  int keep_checkpoints = 3;
  int slow_down_ms = 0;  // sleep after every update (failure-recovery tests need a run that lasts)
  long stop_after = -1;  // end the run early, as if interrupted, keeping the schedule of the full run
  std::string calibration;  // --strategy auto: the job's calibration (else measured at start)
  int trials = 3;           // --strategy auto: plans timed before the fastest is kept
};

std::string to_text(const std::mt19937_64& engine) {
  std::ostringstream out;
  out << engine;
  return out.str();
}

/// The flags a resumed run must share with the run that saved its checkpoints.
std::map<std::string, std::string> run_identity(const options& o) {
  return {{"--batch", std::to_string(o.global_batch)},
          {"--strategy", strata::to_string(strata::parse_strategy(o.strategy))},
          {"--accumulate", std::to_string(o.accumulation)}};
}

/// Cosine decay from the base rate to zero over the whole run.
float learning_rate(const options& o, long step, long total_steps) {
  const double progress = static_cast<double>(step) / static_cast<double>(std::max(total_steps, 1L));
  return static_cast<float>(o.lr * 0.5 * (1.0 + std::cos(3.141592653589793 * progress)));
}

double sum_over_ranks(strata::mpi::context& ctx, double value) {
  auto request = ctx.control().iallreduce_sum(std::span<double>(&value, 1));
  ctx.control().wait(request);
  return value;
}

strata::sync::bucket_options buckets_of(const options& o) {
  return {.first_bucket_bytes = static_cast<std::size_t>(o.first_bucket_mib * (1 << 20)),
          .bucket_bytes = static_cast<std::size_t>(o.bucket_mib * (1 << 20))};
}

/// The MLP's tensors as variables under Strategy (biases under its vector form: PowerSGD
/// compresses matrices only), in the model and in `ids`.
template <class Strategy>
auto declare_model(fashion_mnist::mlp& net, std::vector<strata::variable_id>& ids) {
  using Vector = strata::vector_strategy_t<Strategy>;
  strata::model_of<Strategy, Vector> model;
  for (auto& t : net.tensors()) {
    if (t.shape.size() == 2)
      ids.push_back(model.add(strata::variable<Strategy>(t.name, t.param, t.grad, {t.shape[0], t.shape[1]})));
    else
      ids.push_back(model.add(strata::variable<Vector>(t.name, t.param, t.grad, {t.shape[0]})));
  }
  return model;
}

/// Median seconds of one update's synchronization of the MLP's gradients under S (every
/// gradient ready, then step), over `steps` updates: a trial run.
template <class S>
double time_synchronization(strata::mpi::context& ctx, const options& o, int steps) {
  fashion_mnist::mlp net;
  std::vector<strata::variable_id> ids;
  auto model = declare_model<S>(net, ids);
  strata::executor_options eo;
  eo.buckets = buckets_of(o);
  eo.allreduce.ranks_per_node = o.ranks_per_node;
  auto exec = strata::make_executor(ctx, model, strata::optim::sgd{.lr = 0.0f}, eo);
  return strata::plan::slowest_rank_median(ctx, steps, [&] { exec.step(); });
}

/// --strategy auto: the cost model's plan among the strategies this program was compiled
/// with (one for the whole MLP), then trial runs of the best few; returns the fastest.
std::string automatic_strategy(strata::mpi::context& ctx, const options& o) {
  namespace plan = strata::plan;
  const plan::cluster job = plan::this_job(ctx);
  if (o.calibration.empty() && ctx.rank() == 0)
    fmt::print("--strategy auto: calibrating (give --calibration FILE from strata-calibrate to skip this)\n");
  const plan::calibration calibration = plan::load_or_calibrate(ctx, o.calibration);
  fashion_mnist::mlp net;
  std::vector<plan::variable_profile> variables;
  for (auto& t : net.tensors()) variables.push_back({t.name, t.shape});
  const plan::cost_model model(calibration, job, {}, {.buckets = buckets_of(o)});
  const plan::strategy_plan chosen =
      plan::auto_strategy(variables, model, {.allow_parameter_server = false, .improvement_passes = 0, .offer = compiled::contains});
  if (ctx.rank() == 0) fmt::print("--strategy auto: the cost model's plan\n{}", plan::describe(chosen, variables));
  std::string fastest;
  double fastest_s = INFINITY;
  for (const plan::scored_plan& candidate : plan::trial_candidates(chosen, o.trials)) {
    double seconds = 0.0;
    compiled::visit(candidate.strategies.front(),
                    [&]<class S>(std::type_identity<S>) { seconds = time_synchronization<S>(ctx, o, 10); });
    if (ctx.rank() == 0)
      fmt::print("  trial {:<40} predicted {:7.3f} ms, measured {:7.3f} ms\n", candidate.strategies.front(),
                 1e3 * candidate.predicted_s, 1e3 * seconds);
    if (seconds < fastest_s) fastest_s = seconds, fastest = candidate.strategies.front();
  }
  if (ctx.rank() == 0) fmt::print("--strategy auto: training with {}\n", fastest);
  return fastest;
}

template <class Strategy>
int train(strata::mpi::context& ctx, const options& o) {
  const int ranks = ctx.size(), rank = ctx.rank();
  if (o.global_batch % (ranks * o.accumulation) != 0)
    throw std::invalid_argument(fmt::format("--batch {} must be divisible by ranks x accumulation = {} x {}",
                                            o.global_batch, ranks, o.accumulation));
  const std::size_t micro_batch = static_cast<std::size_t>(o.global_batch / (ranks * o.accumulation));
  const auto train_set = fashion_mnist::load(o.data, "train");
  const auto test_set = fashion_mnist::load(o.data, "t10k");

  fashion_mnist::mlp net;
  net.init(o.seed);
  std::vector<strata::variable_id> ids;
  auto model = declare_model<Strategy>(net, ids);
  strata::executor_options eo;
  eo.buckets = buckets_of(o);
  eo.allreduce.ranks_per_node = o.ranks_per_node;
  eo.accumulation_steps = o.accumulation;
  eo.compression.powersgd_warmup_steps = o.powersgd_warmup;
  auto exec = strata::make_executor(ctx, model, strata::optim::sgd{.lr = o.lr, .momentum = o.momentum}, eo);
  const std::function<void(std::size_t)> grad_ready = [&](std::size_t i) { exec.grad_ready(ids[i]); };
  const std::function<void(std::size_t)> no_overlap;

  if (static_cast<std::size_t>(o.global_batch) > train_set.size())
    throw examples::flag_error("--batch", fmt::format("{} is larger than the {} training images", o.global_batch,
                                                      train_set.size()));
  const long steps_per_epoch = static_cast<long>(train_set.size()) / o.global_batch;  // drop the ragged tail
  const long total_steps = o.max_steps >= 0 ? std::min(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;
  const long last_step = o.stop_after >= 0 ? std::min(o.stop_after, total_steps) : total_steps;
  if (rank == 0)
    fmt::print("fashion_mnist: {} ranks, strategy {}, global batch {} ({} per rank x {} micro-batches), {} epochs\n",
               ranks, strata::strategy_name<Strategy>(), o.global_batch, micro_batch * o.accumulation, o.accumulation,
               o.epochs);

  std::vector<std::size_t> order(train_set.size());
  std::mt19937_64 shuffle_engine(o.seed);
  std::vector<float> x(micro_batch * fashion_mnist::dataset::pixels);
  std::vector<std::uint8_t> y(micro_batch);
  long step = 0;
  int first_epoch = 1;

  // Weights from elsewhere (strata-ckpt export, or another framework's safetensors); a
  // checkpoint to resume from comes after them and wins.
  if (!o.init_weights.empty()) {
    exec.load_weights(o.init_weights);
    if (rank == 0) fmt::print("weights loaded from {}\n", o.init_weights);
  }

  // Checkpoints hold, beside the executor's state, the data position: the epoch and the
  // shuffle engine as it was before that epoch's shuffle. The batches of the epoch that
  // were done before the checkpoint are skipped on resume, so the data order is unchanged.
  std::optional<strata::ckpt::store> checkpoints;
  if (!o.checkpoint_dir.empty()) {
    checkpoints.emplace(o.checkpoint_dir, o.keep_checkpoints);
    if (const auto restored = exec.restore_checkpoint(*checkpoints)) {
      // The data position means nothing under another batch, and another strategy would
      // silently change the run; the checkpoint says what it was saved with.
      for (const auto& [flag, value] : run_identity(o))
        if (const auto saved = restored->meta.find(flag); saved != restored->meta.end() && saved->second != value)
          throw examples::flag_error(flag, fmt::format("this run has {}, but the checkpoints in {} were saved with {}; "
                                                       "resume with the same {}, or use another --checkpoint-dir",
                                                       value, o.checkpoint_dir, saved->second, flag));
      step = restored->step;
      // Weights imported from elsewhere (strata-ckpt import) come without a data position.
      if (const auto epoch = restored->meta.find("epoch"); epoch != restored->meta.end()) {
        first_epoch = std::stoi(epoch->second);
        std::istringstream(restored->meta.at("shuffle_engine")) >> shuffle_engine;
      }
      if (rank == 0)
        fmt::print("resumed from {} at update {} of {} (epoch {}, saved by {} ranks)\n",
                   checkpoints->folder_of(restored->step).string(), step, total_steps, first_epoch, restored->world_size);
    }
  }
  auto save_checkpoint = [&](int epoch, const std::string& engine_before_shuffle) {
    strata::ckpt::metadata meta = {{"epoch", std::to_string(epoch)}, {"shuffle_engine", engine_before_shuffle}};
    meta.merge(run_identity(o));
    exec.save_checkpoint(*checkpoints, meta);
  };

  auto test_accuracy = [&] {
    return static_cast<double>(net.count_correct(test_set.images.data(), test_set.labels.data(), test_set.size())) /
           static_cast<double>(test_set.size());
  };
  double accuracy = -1.0, seconds = 0.0;
  int epochs_run = 0;
  for (int epoch = first_epoch; epoch <= o.epochs && step < last_step; ++epoch, ++epochs_run) {
    const std::string engine_before_shuffle = to_text(shuffle_engine);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), shuffle_engine);  // same engine and seed on every rank
    const long done_before = step - static_cast<long>(epoch - 1) * steps_per_epoch;  // batches of a resumed epoch
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0.0;
    long batches = 0, index = 0;
    strata::sync_stats comm_before = exec.total();
    const long epoch_steps = std::min(steps_per_epoch, last_step - static_cast<long>(epoch - 1) * steps_per_epoch);
    examples::progress_line progress(examples::progress_wanted(rank), epoch,
                                     std::max(0L, epoch_steps - done_before) * static_cast<long>(o.global_batch));
    for (auto batch : order | ranges::views::chunk(o.global_batch)) {
      if (static_cast<int>(ranges::distance(batch)) < o.global_batch || step >= last_step) break;
      if (index++ < done_before) continue;
      exec.optimizer().lr = learning_rate(o, step, total_steps);
      for (int k = 0; k < o.accumulation; ++k) {
        // This rank's micro-batch k: a contiguous slice of the global batch.
        const std::size_t first = (static_cast<std::size_t>(rank) * o.accumulation + k) * micro_batch;
        for (std::size_t i = 0; i < micro_batch; ++i) {
          const std::size_t sample = batch[static_cast<long>(first + i)];
          std::copy_n(train_set.images.begin() + static_cast<long>(sample * fashion_mnist::dataset::pixels),
                      fashion_mnist::dataset::pixels, x.begin() + static_cast<long>(i * fashion_mnist::dataset::pixels));
          y[i] = train_set.labels[sample];
        }
        const double loss = net.forward_backward(x.data(), y.data(), micro_batch, o.overlap ? grad_ready : no_overlap);
        if (!std::isfinite(loss))
          throw strata::numeric_error(fmt::format("the loss is {} at update {}: training diverged; lower --lr (now {})", loss,
                                                  step + 1, o.lr));
        loss_sum += loss;
        exec.step();
      }
      ++batches;
      ++step;
      progress.update(batches * o.global_batch);
      if (checkpoints && o.checkpoint_every > 0 && step % o.checkpoint_every == 0) save_checkpoint(epoch, engine_before_shuffle);
      if (o.slow_down_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.slow_down_ms));
    }
    progress.clear();
    if (checkpoints && o.checkpoint_every == 0) {
      if (step == static_cast<long>(epoch) * steps_per_epoch) save_checkpoint(epoch + 1, to_text(shuffle_engine));
      else save_checkpoint(epoch, engine_before_shuffle);  // stopped within the epoch: resume there
    }
    const double epoch_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seconds += epoch_seconds;
    const double loss = sum_over_ranks(ctx, loss_sum) / static_cast<double>(std::max(batches, 1L) * o.accumulation * ranks);
    accuracy = test_accuracy();
    const strata::sync_stats& total = exec.total();
    if (rank == 0)
      fmt::print("epoch {:2d}  loss {:.6f}  test accuracy {:.2f}%  {:.0f} samples/s  {:.2f} s  (sync {:.2f} s, waited {:.2f} s, "
                 "sent {:.1f} MiB)\n",
                 epoch, loss, 100.0 * accuracy, static_cast<double>(batches * o.global_batch) / epoch_seconds, epoch_seconds,
                 total.comm_seconds - comm_before.comm_seconds, total.wait_seconds - comm_before.wait_seconds,
                 static_cast<double>(total.bytes_sent - comm_before.bytes_sent) / (1 << 20));
    std::fflush(stdout);
  }

  if (accuracy < 0)  // resumed after the last update: nothing was evaluated yet
    accuracy = test_accuracy();
  if (rank == 0) {
    std::vector<std::span<const float>> params;
    for (auto& t : net.tensors()) params.push_back(t.param);
    examples::save_params(o.save_params, params);
  }
  return examples::finish_run(rank,
                              {ranks, strata::strategy_name<Strategy>(), epochs_run, step, accuracy,
                               seconds / std::max(epochs_run, 1), exec.total().comm_seconds, exec.total().wait_seconds},
                              o.min_accuracy);
}

}  // namespace

int main(int argc, char** argv) {
  examples::use_blas_single_threaded(argv);  // one core per rank: ranks are the parallelism
  options o;
  CLI::App app{"Data-parallel Fashion-MNIST MLP with strata"};
  app.add_option("--data", o.data, "directory with the IDX .gz files");
  examples::strategy(app, "--strategy", o.strategy,
                 "one of: AllReduce<Native>, AllReduce<Tree>, AllReduce<Hierarchical> (also with FP16), AllReduce<Ring>, "
                 "and AllReduce<Ring> with FP16, FP16+ErrorFeedback, BF16, TopK<0.01>+ErrorFeedback, "
                 "PowerSGD<4>+ErrorFeedback or Partition<0> (any order); or auto: the cost model's choice, refined by "
                 "trial runs",
                 true);
  app.add_option("--calibration", o.calibration, "--strategy auto: this job's calibration (strata-calibrate --output)");
  examples::number(app, "--trials", o.trials, 1, 10, "--strategy auto: plans timed before the fastest is kept");
  examples::number(app, "--epochs", o.epochs, 1, 10'000);
  examples::number(app, "--batch", o.global_batch, 1, 60'000, "global batch, split over ranks");
  examples::number(app, "--accumulate", o.accumulation, 1, 1024, "micro-batches per update");
  examples::number(app, "--lr", o.lr, 0.0f, 100.0f, "base learning rate (cosine decay to 0)");
  examples::number(app, "--momentum", o.momentum, 0.0f, 1.0f);
  examples::number(app, "--seed", o.seed, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max());
  examples::number(app, "--bucket-mib", o.bucket_mib, 0.001, 4096.0, "fusion bucket size");
  examples::number(app, "--first-bucket-mib", o.first_bucket_mib, 0.001, 4096.0, "first (small) bucket size");
  examples::number(app, "--powersgd-warmup", o.powersgd_warmup, 0, 1'000'000,
                   "updates with a plain all-reduce before PowerSGD starts");
  examples::number(app, "--ranks-per-node", o.ranks_per_node, 0, 1'000'000,
                   "AllReduce<Hierarchical>: nodes of this many consecutive ranks, simulated on one machine "
                   "(0: the machines)");
  examples::boolean(app, "--overlap", o.overlap, "start each bucket's all-reduce during backward");
  examples::number(app, "--max-steps", o.max_steps, 0L, 1'000'000'000L, "stop after this many updates");
  app.add_option("--save-params", o.save_params, "rank 0 writes the final parameters here (raw float32)");
  examples::number(app, "--min-accuracy", o.min_accuracy, 0.0, 1.0, "exit non-zero below this test accuracy");
  app.add_option("--init-weights", o.init_weights,
                 "start from these weights: a .safetensors file or the .index.json of shards (names and shapes as "
                 "strata-ckpt export writes them)");
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "save checkpoints here; at start, resume from the newest usable one (any number of ranks may have saved it)");
  examples::number(app, "--checkpoint-every", o.checkpoint_every, 0L, 1'000'000'000L,
                   "updates between checkpoints (0: at the end of every epoch)");
  examples::number(app, "--keep-checkpoints", o.keep_checkpoints, 1, 1000, "how many of the newest checkpoints to keep");
  examples::number(app, "--stop-after", o.stop_after, 0L, 1'000'000'000L,
                   "stop after this many updates as if interrupted (the learning-rate schedule stays that of the whole "
                   "run); resume with --checkpoint-dir");
  examples::number(app, "--slow-down-ms", o.slow_down_ms, 0, 60'000,
                   "sleep after every update (to test recovery from a killed rank)");
  return examples::parse_and_run(app, argc, argv, "fashion_mnist", [&](strata::mpi::context& ctx) {
    // What the run will write, before it starts: not found unwritable after training.
    if (!o.save_params.empty()) strata::require_writable_file(o.save_params, "--save-params");
    if (!o.checkpoint_dir.empty()) strata::require_writable_folder(o.checkpoint_dir, "--checkpoint-dir");
    if (o.strategy != "auto") examples::refuse_unused(app, {"--calibration", "--trials"}, "--strategy auto");
    int status = 0;
    if (o.strategy == "auto") o.strategy = automatic_strategy(ctx, o);
    compiled::visit(o.strategy, [&]<class S>(std::type_identity<S>) { status = train<S>(ctx, o); });
    return status;
  });
}
