// Data-parallel training of a CNN on Fashion-MNIST: cuDNN and cuBLAS for the layers,
// strata's nccl_executor for the gradients' all-reduce and the SGD update on the GPU.
//
//   ./fashion_mnist_cnn --epochs 15 --min-accuracy 0.916      one GPU, no launcher
//   mpirun -np 2 ./fashion_mnist_cnn                          one rank per GPU (MPI builds)
//
// Every rank shuffles the training set with the same seed and takes its slice of each
// global batch. Exits with STRATA_GPU_SKIP_CODE when there is no GPU.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include <strata/cuda/device.cuh>
#ifdef FASHION_MNIST_CNN_MPI
#include <strata/comm/mpi/mpi.hpp>
#include <strata/comm/nccl/mpi_bootstrap.hpp>
#endif

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
  app.add_option("--epochs", o.train.epochs, "passes over the training set")->check(CLI::PositiveNumber);
  app.add_option("--batch", o.train.global_batch, "global batch, split evenly over the ranks")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.train.lr, "SGD's peak learning rate (cosine decay to zero)");
  app.add_option("--momentum", o.train.momentum, "SGD momentum");
  app.add_option("--weight-decay", o.train.weight_decay, "L2 weight decay");
  app.add_option("--seed", o.train.seed, "initialization and shuffling seed");
  app.add_option("--max-steps", o.train.max_steps, "stop after this many updates (smoke runs)");
  app.add_flag("--ps", o.train.ps,
               "put the fully connected layers on the parameter server: reduce-scatter, each rank updates its "
               "slice, all-gather");
  app.add_option("--checkpoint-dir", o.train.checkpoint_dir,
                 "save a checkpoint here after every epoch; at start, resume from the newest usable one");
  app.add_option("--stop-after-epochs", o.train.stop_after_epochs,
                 "end the run after this epoch as if interrupted (the learning-rate schedule stays the whole run's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--data-dir", o.data, "folder of the Fashion-MNIST IDX files (dataset-fashion-mnist)");
  app.add_option("--min-accuracy", o.min_accuracy, "exit non-zero if the final test accuracy is below this");
  CLI11_PARSE(app, argc, argv);

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
