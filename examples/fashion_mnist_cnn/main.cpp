// Data-parallel training of a CNN on Fashion-MNIST: cuDNN and cuBLAS for the layers,
// strata's nccl_executor for the gradients' all-reduce and the SGD update on the GPU.
//
//   ./fashion_mnist_cnn --epochs 15 --min-accuracy 0.916      one GPU, no launcher
//   mpirun -np 2 ./fashion_mnist_cnn                          one rank per GPU (MPI builds)
//
// Every rank shuffles the training set with the same seed and takes its slice of each
// global batch. Exits with STRATA_GPU_SKIP_CODE when there is no GPU.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

#include <strata/cuda/device.cuh>
#ifdef FASHION_MNIST_CNN_MPI
#include <strata/comm/mpi/mpi.hpp>
#include <strata/comm/nccl/mpi_bootstrap.hpp>
#endif

#include "../common/cli_numbers.hpp"
#include "train.hpp"

namespace {

struct options {
  fashion_mnist_cnn::train_options train;
  std::string data = "/usr/share/datasets/fashion-mnist";
  double min_accuracy = 0.0;
};

int run(const options& o, strata::nccl::communicator comm) {
  const fashion_mnist::dataset train_set = fashion_mnist::load(o.data, "train");
  const fashion_mnist::dataset test = fashion_mnist::load(o.data, "t10k");
  const int rank = comm.rank(), ranks = comm.size();
  const fashion_mnist_cnn::train_result r = fashion_mnist_cnn::train(std::move(comm), train_set, test, o.train);
  if (rank == 0)
    std::printf("summary: fashion_mnist_cnn ranks=%d fc=%s epochs=%d updates=%ld global_batch=%d test_accuracy=%.4f "
                "samples_per_s=%.0f train_seconds=%.1f\n",
                ranks, o.train.ps ? "ps" : "replicated", r.epochs, r.updates, o.train.global_batch, r.test_accuracy,
                r.samples_per_second, r.seconds);
  if (r.test_accuracy < o.min_accuracy) {
    std::fprintf(stderr, "fashion_mnist_cnn: test accuracy %.4f is below --min-accuracy %.4f\n", r.test_accuracy,
                 o.min_accuracy);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"Data-parallel CNN (cuDNN, cuBLAS, NCCL) on Fashion-MNIST"};
  examples::number(app, "--epochs", o.train.epochs, 1, 10'000, "passes over the training set");
  examples::number(app, "--batch", o.train.global_batch, 1, 60'000, "global batch, split evenly over the ranks");
  examples::number(app, "--lr", o.train.lr, 0.0f, 100.0f, "SGD's peak learning rate (cosine decay to zero)");
  examples::number(app, "--momentum", o.train.momentum, 0.0f, 1.0f, "SGD momentum");
  examples::number(app, "--weight-decay", o.train.weight_decay, 0.0f, 1.0f, "L2 weight decay");
  examples::number(app, "--seed", o.train.seed, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(),
                   "initialization and shuffling seed");
  examples::number(app, "--max-steps", o.train.max_steps, -1L, 1'000'000'000L,
                   "stop after this many updates (smoke runs; -1: every epoch in full)");
  app.add_flag("--ps", o.train.ps,
               "put the fully connected layers on the parameter server: reduce-scatter, each rank updates its "
               "slice, all-gather");
  app.add_option("--checkpoint-dir", o.train.checkpoint_dir,
                 "save a checkpoint here after every epoch; at start, resume from the newest usable one");
  examples::number(app, "--stop-after-epochs", o.train.stop_after_epochs, 1, 10'000,
                   "end the run after this epoch as if interrupted (the learning-rate schedule stays the whole run's)");
  app.add_option("--data-dir", o.data, "folder of the Fashion-MNIST IDX files (dataset-fashion-mnist)");
  examples::number(app, "--min-accuracy", o.min_accuracy, 0.0, 1.0, "exit non-zero if the final test accuracy is below this");
  if (const auto status = examples::parse(app, argc, argv, "fashion_mnist_cnn")) return *status;
  try {  // what the run will write, before it starts
    if (!o.train.checkpoint_dir.empty()) strata::require_writable_folder(o.train.checkpoint_dir, "--checkpoint-dir");
  } catch (const strata::usage_error& e) {
    std::fprintf(stderr, "fashion_mnist_cnn: %s\n", e.what());
    return examples::exit_usage;
  } catch (const strata::output_error& e) {
    std::fprintf(stderr, "fashion_mnist_cnn: %s\n", e.what());
    return 74;  // strata::exit_cannot_write
  }

  try {
    if (!strata::cuda::device_available()) {
      std::puts("fashion_mnist_cnn: no GPU here; skipped");
      return STRATA_GPU_SKIP_CODE;
    }
#ifdef FASHION_MNIST_CNN_MPI
    strata::mpi::context host(argc, argv);
    if (host.size() > 1) {
      strata::nccl::context gpus(host);
      return run(o, gpus.collectives());
    }
#endif
    return run(o, strata::nccl::communicator::single_process(0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist_cnn: %s\n", e.what());
    return 1;
  }
}
