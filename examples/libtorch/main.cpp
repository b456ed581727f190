// Data-parallel training of a libtorch model through strata: the 784-256-128-10 MLP on
// Fashion-MNIST written as a torch::nn::Module, trained on every rank with strata's executor
// instead of DistributedDataParallel.
//
//   mpirun -np 2 ./libtorch_fashion_mnist --epochs 10
//
// It is the twin of the PyTorch DDP peer program (peers/ddp_fashion_mnist.py): the same model,
// initialization seed, inputs (pixels / 255), data order (torch.randperm from a generator seeded
// 1), split of each global batch over ranks, loss, and SGD with momentum. Only the gradient
// synchronization differs, so accuracy and time per epoch compare one for one
// (TRAINER=build/examples/libtorch/libtorch_fashion_mnist SYNC_ROUNDS=0 bash benchmarks/compare_with_peers.sh).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <strata/strata.hpp>

#include "../common/blas.hpp"
#include "../common/progress.hpp"
#include "../common/rank_main.hpp"
#include "../common/run_summary.hpp"
#include "../fashion_mnist/idx.hpp"
#include "torch_binding.hpp"

namespace {

using namespace strata;
using DenseNative = Strategy<AllReduce<Native>>;
using DenseRing = Strategy<AllReduce<Ring>>;
using DenseTree = Strategy<AllReduce<Tree>>;
using DenseFP16 = Strategy<AllReduce<Ring>, Compress<FP16>>;

struct mlp : torch::nn::Module {
  // Registered in the order of the Python twin's nn.Sequential, so that one seed gives both the
  // same initial weights.
  mlp()
      : fc1(register_module("fc1", torch::nn::Linear(784, 256))),
        fc2(register_module("fc2", torch::nn::Linear(256, 128))),
        fc3(register_module("fc3", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) { return fc3(torch::relu(fc2(torch::relu(fc1(x))))); }

  torch::nn::Linear fc1, fc2, fc3;
};

struct options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string strategy = "AllReduce<Ring>";
  int epochs = 10;
  int global_batch = 128;
  float lr = 0.05f;
  float momentum = 0.9f;
  bool overlap = true;
  long max_steps = -1;
  std::string save_params;
  std::string checkpoint_dir;  // resume from the newest checkpoint here; save one at the end
  double min_accuracy = 0.0;
};

torch::Tensor as_tensor(const fashion_mnist::dataset& d) {
  return torch::from_blob(const_cast<float*>(d.images.data()), {static_cast<long>(d.size()), 784}, torch::kFloat32);
}
torch::Tensor labels_of(const fashion_mnist::dataset& d) {
  return torch::from_blob(const_cast<std::uint8_t*>(d.labels.data()), {static_cast<long>(d.size())}, torch::kUInt8)
      .to(torch::kLong);
}

template <class Strategy>
int train(strata::mpi::context& ctx, const options& o) {
  const int ranks = ctx.size(), rank = ctx.rank();
  if (o.global_batch % ranks != 0)
    throw examples::flag_error("--batch", fmt::format("{} must be divisible by the {} ranks", o.global_batch, ranks));
  const long local = o.global_batch / ranks;
  const auto train_set = fashion_mnist::load(o.data, "train", fashion_mnist::pixel_scale::unit_range);
  const auto test_set = fashion_mnist::load(o.data, "t10k", fashion_mnist::pixel_scale::unit_range);
  const torch::Tensor x_train = as_tensor(train_set), y_train = labels_of(train_set);
  const torch::Tensor x_test = as_tensor(test_set), y_test = labels_of(test_set);

  torch::manual_seed(0);
  mlp net;
  torch_binding::bound_module<Strategy> bound(net);
  auto exec = strata::make_executor(ctx, bound.model(), strata::optim::sgd{.lr = o.lr, .momentum = o.momentum});
  if (o.overlap) bound.mark_ready_during_backward(exec);

  // A checkpoint holds the updates done; the data order is replayed up to them.
  long step = 0;
  std::optional<strata::ckpt::store> checkpoints;
  if (!o.checkpoint_dir.empty()) {
    checkpoints.emplace(o.checkpoint_dir);
    if (const auto restored = exec.restore_checkpoint(*checkpoints)) {
      // The data order replayed means nothing under another global batch.
      if (const auto saved = restored->meta.find("batch"); saved != restored->meta.end() && saved->second != std::to_string(o.global_batch))
        throw examples::flag_error("--batch", fmt::format("this run has {}, but the checkpoints in {} were saved with {}; "
                                                          "resume with the same --batch, or use another --checkpoint-dir",
                                                          o.global_batch, o.checkpoint_dir, saved->second));
      step = restored->step;
      if (rank == 0)
        fmt::print("resumed from {} at update {}\n", checkpoints->folder_of(step).string(), step);
    }
  }

  const long restored_at = step;  // nothing new to save unless an update runs
  const long samples = x_train.size(0);
  const long steps_per_epoch = samples / o.global_batch;  // drop the ragged tail, as the twin does
  const long total_steps = o.max_steps >= 0 ? std::min(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;
  if (rank == 0)
    fmt::print("libtorch_fashion_mnist: {} ranks, strategy {}, global batch {} ({} per rank), {} epochs\n", ranks,
               strata::strategy_name<Strategy>(), o.global_batch, local, o.epochs);

  at::Generator order = at::detail::createCPUGenerator(1);  // the twin's torch.Generator().manual_seed(1)
  auto accuracy = [&] {
    torch::NoGradGuard no_grad;
    return net.forward(x_test).argmax(1).eq(y_test).to(torch::kFloat64).mean().item<double>();
  };
  double test_accuracy = -1.0, seconds = 0.0;
  int epochs_run = 0;
  for (int epoch = 1; epoch <= o.epochs && step < total_steps; ++epoch) {
    const torch::Tensor perm = torch::randperm(samples, order, torch::kLong);  // every epoch's, to replay the order
    const long epoch_first = static_cast<long>(epoch - 1) * steps_per_epoch;
    const long epoch_steps = std::min(steps_per_epoch, total_steps - epoch_first);
    if (step >= epoch_first + epoch_steps) continue;  // done before the checkpoint
    ++epochs_run;
    const strata::sync_stats before = exec.total();
    const long skipped = step - epoch_first;
    examples::progress_line progress(examples::progress_wanted(rank), epoch, (epoch_steps - skipped) * o.global_batch);
    double loss_sum = 0.0;
    const auto start = std::chrono::steady_clock::now();
    for (long s = skipped; s < epoch_steps; ++s, ++step) {
      const torch::Tensor batch = perm.slice(0, s * o.global_batch + rank * local, s * o.global_batch + (rank + 1) * local);
      bound.zero_gradients();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(net.forward(x_train.index_select(0, batch)),
                                                                      y_train.index_select(0, batch));
      loss.backward();  // marks each gradient ready as autograd accumulates it
      bound.check_gradients_in_place();
      const double value = loss.item<double>();
      // Cross-entropy over 10 classes starts at ln 10 (2.3); far above it, training has
      // diverged even where the numbers are still finite (a loss of 1e22 once passed).
      constexpr double diverged = 1e6;
      if (!std::isfinite(value) || value > diverged)
        throw strata::numeric_error(fmt::format("the loss is {} at update {}: training diverged; lower --lr (now {})",
                                                value, step + 1, o.lr));
      loss_sum += value;
      exec.step();  // averages the gradients over ranks and applies SGD to the module's own memory
      progress.update((s + 1 - skipped) * o.global_batch);
    }
    progress.clear();
    const double epoch_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seconds += epoch_seconds;
    test_accuracy = accuracy();
    const strata::sync_stats& total = exec.total();
    if (rank == 0)
      fmt::print("epoch {:2d}  loss {:.4f}  test accuracy {:.2f}%  {:.2f} s  (sync {:.2f} s, waited {:.2f} s)\n", epoch,
                 loss_sum / static_cast<double>(std::max(epoch_steps - skipped, 1L)), 100.0 * test_accuracy, epoch_seconds,
                 total.comm_seconds - before.comm_seconds, total.wait_seconds - before.wait_seconds);
    std::fflush(stdout);
  }
  if (test_accuracy < 0) test_accuracy = accuracy();  // no update was asked for (--max-steps 0), or resumed at the end
  if (checkpoints && step > restored_at) exec.save_checkpoint(*checkpoints, {{"batch", std::to_string(o.global_batch)}});
  if (rank == 0) {
    std::vector<std::span<const float>> params;
    for (const auto& p : net.parameters())
      params.emplace_back(p.data_ptr<float>(), static_cast<std::size_t>(p.numel()));
    examples::save_params(o.save_params, params);
  }
  return examples::finish_run(rank,
                              {ranks, strata::strategy_name<Strategy>(), epochs_run, step, test_accuracy,
                               seconds / std::max(epochs_run, 1), exec.total().comm_seconds, exec.total().wait_seconds},
                              o.min_accuracy);
}

}  // namespace

int main(int argc, char** argv) {
  // One core per rank, as the twin asks: ranks are the parallelism. libtorch's CPU matrix
  // products run on OpenBLAS, whose own threads torch::set_num_threads does not limit.
  examples::use_blas_single_threaded(argv);
  torch::set_num_threads(1);
  options o;
  CLI::App app{"Data-parallel Fashion-MNIST MLP in libtorch, synchronized by strata"};
  app.add_option("--data", o.data, "directory with the IDX .gz files");
  examples::strategy(app, "--strategy", o.strategy,
                     "one of: AllReduce<Native>, AllReduce<Ring>, AllReduce<Tree>, AllReduce<Ring>,FP16");
  examples::number(app, "--epochs", o.epochs, 1, 10'000);
  examples::number(app, "--batch", o.global_batch, 1, 60'000, "global batch, split over ranks");
  examples::number(app, "--lr", o.lr, 0.0f, 100.0f);
  examples::number(app, "--momentum", o.momentum, 0.0f, 1.0f);
  examples::boolean(app, "--overlap", o.overlap, "mark gradients ready from autograd hooks (buckets start during backward)");
  examples::number(app, "--max-steps", o.max_steps, 0L, 1'000'000'000L, "stop after this many updates");
  app.add_option("--save-params", o.save_params, "rank 0 writes the final parameters here (raw float32)");
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "resume from the newest checkpoint here (e.g. weights from strata-ckpt import), and save one at the end");
  examples::number(app, "--min-accuracy", o.min_accuracy, 0.0, 1.0, "exit non-zero below this test accuracy");
  return examples::parse_and_run(app, argc, argv, "libtorch_fashion_mnist", [&](strata::mpi::context& ctx) {
    // What the run will write, before it starts: not found unwritable after training.
    if (!o.save_params.empty()) strata::require_writable_file(o.save_params, "--save-params");
    if (!o.checkpoint_dir.empty()) strata::require_writable_folder(o.checkpoint_dir, "--checkpoint-dir");
    int status = 0;
    strata::visit_strategy<DenseNative, DenseRing, DenseTree, DenseFP16>(
        o.strategy, [&]<class S>(std::type_identity<S>) { status = train<S>(ctx, o); });
    return status;
  });
}
