// The data-parallel training loop: batches gathered on the GPU, forward and backward on
// cuDNN and cuBLAS (network.cuh), gradients averaged and SGD applied by strata's
// nccl_executor, whose buckets' all-reduces start while backward is still running.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <strata/ckpt/store.hpp>
#include <strata/cuda/cast.cuh>
#include <strata/cuda/launch.cuh>
#include <strata/cuda/stream.cuh>
#include <strata/exec/nccl_executor.cuh>

#include "network.cuh"
#include "softmax_xent.hpp"
#include "train.hpp"

namespace fashion_mnist_cnn {
namespace {

using strata::cuda::device_buffer;
using Dense = strata::Strategy<strata::Replicate, strata::AllReduce<strata::Native>>;
using Server = strata::Strategy<strata::PS<2>, strata::Partition<0>>;
constexpr std::size_t pixels = fashion_mnist::dataset::pixels;

/// Copies samples `indices[0..n)` of a device-resident split into the network's input and
/// their labels into `batch_labels`.
__global__ void gather_batch(const float* images, const std::uint8_t* labels, const int* indices, int n, float* input,
                             int* batch_labels) {
  const std::size_t total = static_cast<std::size_t>(n) * pixels;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t sample = i / pixels, pixel = i % pixels;
    const auto source = static_cast<std::size_t>(indices[sample]);
    input[i] = images[source * pixels + pixel];
    if (pixel == 0) batch_labels[sample] = labels[source];
  }
}

/// One block: every sample's softmax cross-entropy (and, if `grad` is not null, its
/// gradient times `scale`), summed in a fixed order and added to totals[0] (loss) and
/// totals[1] (correct predictions).
constexpr unsigned loss_threads = 256;
__global__ void softmax_xent_batch(const float* logits, const int* labels, int n, float scale, float* grad,
                                   float* totals) {
  __shared__ float loss[loss_threads], correct[loss_threads];
  float l = 0.0f, c = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
    const xent_result r = softmax_cross_entropy(logits + i * detail::classes, detail::classes, labels[i], scale,
                                                grad == nullptr ? nullptr : grad + i * detail::classes);
    l += r.loss;
    c += r.correct ? 1.0f : 0.0f;
  }
  loss[threadIdx.x] = l;
  correct[threadIdx.x] = c;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      correct[threadIdx.x] += correct[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) totals[0] += loss[0], totals[1] += correct[0];
}

/// A split of the data set in device memory.
struct device_split {
  device_buffer<float> images;
  device_buffer<std::uint8_t> labels;
  std::size_t size;
};

template <class T>
device_buffer<T> to_device(const std::vector<T>& host, cudaStream_t stream) {
  device_buffer<T> device(host.size(), stream);
  STRATA_CUDA_CHECK(cudaMemcpyAsync(device.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  STRATA_CUDA_CHECK(cudaStreamSynchronize(stream));  // `host` may go away
  return device;
}

device_split to_device(const fashion_mnist::dataset& d, cudaStream_t stream) {
  return {to_device(d.images, stream), to_device(d.labels, stream), d.size()};
}

template <class S>
strata::device_variable_binding bind(parameter& p) {
  const strata::device_span<float> value = p.value.memory(), grad = p.grad.memory();
  const std::vector<std::size_t>& s = p.shape;
  switch (s.size()) {
    case 1: return strata::device_variable<S>(p.name, value, grad, {s[0]});
    case 2: return strata::device_variable<S>(p.name, value, grad, {s[0], s[1]});
    case 4: return strata::device_variable<S>(p.name, value, grad, {s[0], s[1], s[2], s[3]});
    default: throw std::logic_error("parameter " + p.name + " has an unexpected rank");
  }
}

/// Replicated, or with `ps` the fully connected layers (most of the weights) on the
/// parameter server: each rank updates its slice of them and keeps its slice's momentum.
strata::device_variable_binding bind(parameter& p, bool ps) {
  return ps && p.name.starts_with("fc") ? bind<Server>(p) : bind<Dense>(p);
}

/// Sums `data` over the ranks, in place, after the work queued on `stream`; blocks the host.
void sum_over_ranks(strata::nccl::communicator& comm, std::span<float> data, cudaStream_t stream) {
  comm.depend_on(stream);
  strata::nccl::communicator::request r = comm.iallreduce_sum(data);
  comm.wait(r);
}

/// Cosine decay from the base rate to zero over the whole run.
float learning_rate(float base, long step, long total) {
  const double progress = static_cast<double>(step) / static_cast<double>(std::max(total, 1L));
  return static_cast<float>(base * 0.5 * (1.0 + std::cos(3.141592653589793 * progress)));
}

/// The loss of the batch in the network's logits, added to `totals`; with the gradient of
/// the batch mean written for backward when `grad` is set.
void loss(network& net, const device_buffer<int>& labels, int n, bool grad, float* totals, cudaStream_t stream) {
  strata::cuda::detail::launch("softmax_xent_batch", softmax_xent_batch, 1, loss_threads, stream, net.logits(),
                               labels.data(), n, 1.0f / static_cast<float>(n), grad ? net.logits_gradient() : nullptr,
                               totals);
}

void gather(const device_split& split, const int* indices, int n, network& net, const device_buffer<int>& labels,
            cudaStream_t stream) {
  strata::cuda::detail::launch("gather_batch", gather_batch, strata::cuda::detail::blocks_for(std::size_t(n) * pixels),
                               strata::cuda::detail::block_threads, stream, split.images.data(), split.labels.data(),
                               indices, n, net.input(), labels.data());
}

}  // namespace

train_result train(strata::nccl::communicator comm, const fashion_mnist::dataset& train_set,
                   const fashion_mnist::dataset& test, const train_options& o) {
  STRATA_CUDA_CHECK(cudaSetDevice(comm.device()));
  const int ranks = comm.size(), rank = comm.rank();
  if (o.global_batch < ranks || o.global_batch % ranks != 0)
    throw std::invalid_argument("the global batch (" + std::to_string(o.global_batch) +
                                ") must be a positive multiple of the number of ranks (" + std::to_string(ranks) + ")");
  const int local = o.global_batch / ranks;
  const strata::cuda::owned_stream stream;
  const device_split train_d = to_device(train_set, stream), test_d = to_device(test, stream);
  std::vector<int> order(test.size());
  std::iota(order.begin(), order.end(), 0);
  const device_buffer<int> test_order = to_device(order, stream);  // the test set in its own order
  order.resize(train_set.size());
  std::iota(order.begin(), order.end(), 0);
  device_buffer<int> train_order(order.size(), stream), labels(static_cast<std::size_t>(local), stream);
  device_buffer<float> totals(4, stream);  // train loss, train correct, test loss, test correct

  network net(local, o.seed, stream);
  std::vector<strata::device_variable_binding> variables;
  for (parameter& p : net.parameters()) variables.push_back(bind(p, o.ps));
  auto exec = strata::make_executor(comm, std::move(variables),
                             strata::optim::sgd{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay},
                             {.buckets = {}, .initialized_on = stream});

  const long steps_per_epoch = static_cast<long>(train_set.size()) / o.global_batch;
  const long total = o.max_steps >= 0 ? std::min(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;
  std::mt19937_64 engine(o.seed);  // the same on every rank: every rank shuffles alike
  train_result result;

  // Checkpoints after every epoch: the executor's state (parameters, momentum, the PS slices),
  // batch normalization's running statistics (the network's, beside the executor's), and
  // the epoch and shuffling engine, so that a resumed run sees the data in the same order.
  std::optional<strata::ckpt::store> checkpoints;
  std::vector<float> statistics(net.running_statistics().size());
  const strata::ckpt::tensor_state bn{"bn.running_statistics", {statistics.size()}, strata::ckpt::sharing::replicated,
                                      statistics};
  const std::string settings = std::to_string(o.epochs) + " epochs, global batch " + std::to_string(o.global_batch) +
                               ", seed " + std::to_string(o.seed) + (o.ps ? ", --ps" : "");
  int first_epoch = 1;
  long trained = 0;  // updates made by this run (a resumed one began with the checkpoint's)
  if (!o.checkpoint_dir.empty()) {
    checkpoints.emplace(o.checkpoint_dir);
    if (const auto restored = exec.restore_checkpoint(*checkpoints, {&bn, 1})) {
      const auto saved = restored->meta.find("settings");
      if (saved == restored->meta.end() || saved->second != settings)
        throw std::invalid_argument("the checkpoints in " + o.checkpoint_dir + " were saved by a run of " +
                                    (saved == restored->meta.end() ? "another program" : saved->second) +
                                    ", and this one is of " + settings +
                                    "; resume with the same flags, or use another --checkpoint-dir");
      first_epoch = std::stoi(restored->meta.at("epoch")) + 1;
      std::istringstream(restored->meta.at("shuffle_engine")) >> engine;
      STRATA_CUDA_CHECK(cudaMemcpyAsync(net.running_statistics().data(), statistics.data(),
                                        statistics.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
      if (rank == 0)
        std::printf("resumed from %s: update %ld, epoch %d done\n",
                    checkpoints->folder_of(restored->step).string().c_str(), static_cast<long>(restored->step),
                    first_epoch - 1);
    }
  }
  auto save = [&](int epoch) {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(statistics.data(), net.running_statistics().data(),
                                      statistics.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::ostringstream shuffle_engine;
    shuffle_engine << engine;
    exec.save_checkpoint(
        *checkpoints, {{"settings", settings}, {"epoch", std::to_string(epoch)}, {"shuffle_engine", shuffle_engine.str()}},
        {&bn, 1});
  };

  for (int epoch = first_epoch; epoch <= o.epochs && exec.updates() < total; ++epoch) {
    std::shuffle(order.begin(), order.end(), engine);
    STRATA_CUDA_CHECK(cudaMemcpyAsync(train_order.data(), order.data(), order.size() * sizeof(int),
                                      cudaMemcpyHostToDevice, stream));
    STRATA_CUDA_CHECK(cudaMemsetAsync(totals.data(), 0, totals.size() * sizeof(float), stream));
    const auto start = std::chrono::steady_clock::now();
    long steps = 0;
    for (; steps < steps_per_epoch && exec.updates() < total; ++steps) {
      exec.optimizer().lr = learning_rate(o.lr, exec.updates(), total);
      exec.parameters_ready(stream);
      gather(train_d, train_order.data() + steps * o.global_batch + rank * local, local, net, labels, stream);
      net.forward(local, true);
      loss(net, labels, local, true, totals.data(), stream);
      net.backward(local, [&](parameter_id id) { exec.grad_ready(id, stream); });
      exec.step(stream);
    }
    exec.parameters_ready(stream);
    exec.wait();
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    // Batch norm's running statistics are each rank's own; averaged over the ranks (the
    // variances as a plain mean, ignoring the spread of the ranks' means), every rank
    // evaluates the same model, on its slice of the test set.
    const std::span<float> statistics = net.running_statistics();
    sum_over_ranks(exec.communicator(), statistics, stream);
    strata::cuda::scaled_narrow<float>(statistics, statistics, 1.0f / static_cast<float>(ranks), stream);
    const std::size_t begin = test.size() * rank / ranks, end = test.size() * (rank + 1) / ranks;
    for (std::size_t i = begin; i < end; i += static_cast<std::size_t>(local)) {
      const int n = static_cast<int>(std::min<std::size_t>(local, end - i));
      gather(test_d, test_order.data() + i, n, net, labels, stream);
      net.forward(n, false);
      loss(net, labels, n, false, totals.data() + 2, stream);
    }
    sum_over_ranks(exec.communicator(), totals.span(), stream);
    std::vector<float> t(totals.size());
    STRATA_CUDA_CHECK(cudaMemcpyAsync(t.data(), totals.data(), t.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream));

    const double samples = static_cast<double>(steps) * o.global_batch;
    result.updates = exec.updates();
    result.epochs = epoch;
    result.test_accuracy = t[3] / static_cast<double>(test.size());
    result.seconds += seconds;
    trained += steps;
    result.samples_per_second = static_cast<double>(trained) * o.global_batch / result.seconds;
    if (rank == 0)
      std::printf("epoch %d/%d: train loss %.4f, train accuracy %.4f, test loss %.4f, test accuracy %.4f, "
                  "%.0f samples/s, %.2f s\n",
                  epoch, o.epochs, t[0] / samples, t[1] / samples, t[2] / static_cast<double>(test.size()),
                  result.test_accuracy, samples / seconds, seconds),
          std::fflush(stdout);
    if (checkpoints) save(epoch);
    if (epoch == o.stop_after_epochs) break;
  }
  return result;
}

}  // namespace fashion_mnist_cnn
