#pragma once
// The training loop's interface: plain C++, so main.cpp (CLI11, MPI) is compiled by the C++
// compiler and only train.cu, which launches kernels, by nvcc.
#include <cstdint>
#include <string>

#include <strata/comm/nccl/nccl.hpp>

#include "../fashion_mnist/idx.hpp"

namespace fashion_mnist_cnn {

struct train_options {
  int epochs = 15;
  int global_batch = 128;  // split evenly over the ranks
  // From a sweep on an H100 (8 settings x 2 seeds, docs/benchmarks.md): 92.8% where lr 0.05
  // and weight decay 5e-4 gave 92.2%.
  float lr = 0.025f;  // SGD's peak rate, decayed to zero by a cosine over the run
  float momentum = 0.9f;
  float weight_decay = 2e-3f;
  std::uint64_t seed = 1;
  long max_steps = -1;  // stop after this many updates (smoke runs); -1: every epoch in full
  bool ps = false;      // the fully connected layers on the parameter server (PS<2>, Partition<0>)
  // Save a checkpoint here after every epoch, and resume from the newest one at start.
  std::string checkpoint_dir;
  int stop_after_epochs = -1;  // end the run after this epoch as if interrupted (the schedule stays the whole run's)
};

struct train_result {
  long updates = 0;
  int epochs = 0;                   // epochs begun (the last one may have stopped at max_steps)
  double test_accuracy = 0.0;       // after the last epoch, over the whole test set
  double samples_per_second = 0.0;  // training samples of all ranks over the training time
  double seconds = 0.0;             // training time, evaluation excluded
};

/// Trains the CNN data parallel over `comm` (one rank per GPU; every rank calls it with the
/// same data and options) and evaluates it on `test` after every epoch; rank 0 prints one
/// progress line per epoch.
train_result train(strata::nccl::communicator comm, const fashion_mnist::dataset& train_set,
                   const fashion_mnist::dataset& test, const train_options& options);

}  // namespace fashion_mnist_cnn
