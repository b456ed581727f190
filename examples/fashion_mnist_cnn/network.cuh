#pragma once
// The CNN, layer by layer on cuDNN (convolution, batch norm, ReLU, max pooling) and cuBLAS
// (the fully connected layers), NCHW fp32:
//
//   conv 5x5 1->32 (pad 2) -> batch norm -> ReLU -> max pool 2x2     [n, 32, 14, 14]
//   conv 5x5 32->64 (pad 2) -> batch norm -> ReLU -> max pool 2x2    [n, 64, 7, 7]
//   fully connected 3136->256 -> ReLU -> fully connected 256->10     logits [n, 10]
//
// The convolutions have no bias: the batch norm after them subtracts any. backward() calls
// `ready(v)` as soon as parameter v's gradient is enqueued, so the executor can start that
// bucket's all-reduce while the earlier layers' backward runs.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <strata/cuda/buffer.cuh>
#include <strata/cuda/check.cuh>

#include "cudnn_check.cuh"

namespace fashion_mnist_cnn {

/// The trained parameters, in forward order; backward finishes them in reverse.
enum parameter_id : std::size_t {
  conv1_weight, bn1_scale, bn1_bias, conv2_weight, bn2_scale, bn2_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias,
  parameter_count
};

struct parameter {
  std::string name;
  std::vector<std::size_t> shape;
  strata::cuda::device_buffer<float> value, grad;
};

namespace detail {

constexpr int side = 28, classes = 10, c1 = 32, c2 = 64, hidden = 256;
constexpr int flat = c2 * (side / 4) * (side / 4);  // 3136: the second pooling's output per sample
constexpr double bn_epsilon = 1e-5;
constexpr double bn_momentum = 0.1;  // running statistics: new = (1 - momentum) * old + momentum * batch

template <class T, cudnnStatus_t (*create)(T*), cudnnStatus_t (*destroy)(T)>
class descriptor {
 public:
  descriptor() { CNN_CUDNN_CHECK(create(&d_)); }
  ~descriptor() { static_cast<void>(destroy(d_)); }
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  operator T() const { return d_; }

 private:
  T d_{};
};
using tensor_descriptor = descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using filter_descriptor = descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using convolution_descriptor =
    descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using pooling_descriptor = descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using activation_descriptor =
    descriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

inline void set_nchw(cudnnTensorDescriptor_t d, int n, int c, int h, int w) {
  CNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

/// The first algorithm of cuDNN's heuristic ranking that is supported here.
template <class Perf, class Get>
auto best_algorithm(Get get, const char* what) {
  std::array<Perf, 16> found{};
  int count = 0;
  get(static_cast<int>(found.size()), &count, found.data());
  for (int i = 0; i < count; ++i)
    if (found[i].status == CUDNN_STATUS_SUCCESS) return found[i].algo;
  throw strata::cuda_error(std::string("cuDNN offers no usable algorithm for ") + what);
}

/// One convolution layer's descriptors and the algorithms chosen for one batch size.
struct convolution {
  filter_descriptor filter;
  convolution_descriptor conv;
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  std::size_t workspace = 0;

  convolution(int out_channels, int in_channels) {
    CNN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, out_channels, in_channels, 5, 5));
    CNN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, 2, 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  }

  void choose(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y) {
    forward = best_algorithm<cudnnConvolutionFwdAlgoPerf_t>(
        [&](int n, int* count, cudnnConvolutionFwdAlgoPerf_t* perf) {
          CNN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x, filter, conv, y, n, count, perf));
        },
        "the forward convolution");
    backward_data = best_algorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
        [&](int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
          CNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, filter, y, conv, x, n, count, perf));
        },
        "the convolution's data gradient");
    backward_filter = best_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
        [&](int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
          CNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, filter, n, count, perf));
        },
        "the convolution's filter gradient");
    std::size_t bytes = 0;
    CNN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, x, filter, conv, y, forward, &bytes));
    workspace = bytes;
    CNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, filter, y, conv, x, backward_data, &bytes));
    workspace = std::max(workspace, bytes);
    CNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x, y, conv, filter, backward_filter, &bytes));
    workspace = std::max(workspace, bytes);
  }
};

/// Activations of one batch (forward) and their gradients (backward), for up to `n` samples.
struct activations {
  // forward: input, conv, batch norm, ReLU, pool (twice), fc1, its ReLU, logits
  strata::cuda::device_buffer<float> x, conv1, norm1, relu1, pool1, conv2, norm2, relu2, pool2, fc1, relu3, logits;
  // backward: the gradient with respect to each of them (conv1's input needs none)
  strata::cuda::device_buffer<float> d_conv1, d_norm1, d_relu1, d_pool1, d_conv2, d_norm2, d_relu2, d_pool2, d_fc1,
      d_relu3, d_logits;

  activations(std::size_t n, cudaStream_t s) {
    const std::size_t map1 = n * c1 * side * side, map2 = n * c2 * (side / 2) * (side / 2);
    for (auto [buffer, size] :
         {std::pair{&x, n * side * side}, {&conv1, map1}, {&norm1, map1}, {&relu1, map1}, {&pool1, map1 / 4},
          {&conv2, map2}, {&norm2, map2}, {&relu2, map2}, {&pool2, map2 / 4}, {&fc1, n * hidden}, {&relu3, n * hidden},
          {&logits, n * classes}, {&d_conv1, map1}, {&d_norm1, map1}, {&d_relu1, map1}, {&d_pool1, map1 / 4},
          {&d_conv2, map2}, {&d_norm2, map2}, {&d_relu2, map2}, {&d_pool2, map2 / 4}, {&d_fc1, n * hidden},
          {&d_relu3, n * hidden}, {&d_logits, n * classes}})
      *buffer = strata::cuda::device_buffer<float>(size, s);
  }
};

/// Everything that depends on the batch size: tensor shapes and convolution algorithms.
struct plan {
  tensor_descriptor x, map1, pooled1, map2, pooled2, hidden_t, logits_t;
  convolution conv1{c1, 1}, conv2{c2, c1};

  plan(cudnnHandle_t h, int n) {
    set_nchw(x, n, 1, side, side);
    set_nchw(map1, n, c1, side, side);
    set_nchw(pooled1, n, c1, side / 2, side / 2);
    set_nchw(map2, n, c2, side / 2, side / 2);
    set_nchw(pooled2, n, c2, side / 4, side / 4);
    set_nchw(hidden_t, n, hidden, 1, 1);
    set_nchw(logits_t, n, classes, 1, 1);
    conv1.choose(h, x, map1);
    conv2.choose(h, pooled1, map2);
  }
};

}  // namespace detail

class network {
 public:
  /// Parameters initialized from `seed` (He-normal weights, unit batch-norm scales, zero
  /// biases); room for batches of up to `capacity` samples. All work runs on `stream`.
  network(int capacity, std::uint64_t seed, cudaStream_t stream)
      : stream_(stream), capacity_(capacity), act_(static_cast<std::size_t>(capacity), stream),
        ones_(static_cast<std::size_t>(capacity), stream), running_(2 * (detail::c1 + detail::c2), stream),
        saved_(2 * (detail::c1 + detail::c2), stream) {
    using namespace detail;
    CNN_CUDNN_CHECK(cudnnCreate(&cudnn_));
    CNN_CUDNN_CHECK(cudnnSetStream(cudnn_, stream));
    STRATA_CUDA_CHECK(cublasCreate(&cublas_));
    STRATA_CUDA_CHECK(cublasSetStream(cublas_, stream));
    CNN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
    CNN_CUDNN_CHECK(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    set_nchw(hidden_bias_, 1, hidden, 1, 1);
    set_nchw(classes_bias_, 1, classes, 1, 1);
    set_nchw(bn_[0].channels, 1, c1, 1, 1);
    set_nchw(bn_[1].channels, 1, c2, 1, 1);

    std::mt19937_64 engine(seed);
    add("conv1.weight", {c1, 1, 5, 5}, init::he, engine);
    add("bn1.scale", {c1}, init::ones, engine);
    add("bn1.bias", {c1}, init::zeros, engine);
    add("conv2.weight", {c2, c1, 5, 5}, init::he, engine);
    add("bn2.scale", {c2}, init::ones, engine);
    add("bn2.bias", {c2}, init::zeros, engine);
    add("fc1.weight", {hidden, flat}, init::he, engine);
    add("fc1.bias", {hidden}, init::zeros, engine);
    add("fc2.weight", {classes, hidden}, init::he, engine);
    add("fc2.bias", {classes}, init::zeros, engine);
    upload(ones_, std::vector<float>(ones_.size(), 1.0f));
    std::vector<float> stats;  // per layer: running mean 0, running variance 1
    for (int c : {c1, c2}) {
      stats.insert(stats.end(), static_cast<std::size_t>(c), 0.0f);
      stats.insert(stats.end(), static_cast<std::size_t>(c), 1.0f);
    }
    upload(running_, stats);
  }

  ~network() {
    static_cast<void>(cublasDestroy(cublas_));
    static_cast<void>(cudnnDestroy(cudnn_));
  }
  network(const network&) = delete;
  network& operator=(const network&) = delete;

  std::vector<parameter>& parameters() { return params_; }

  /// Batch norm's running means and variances, both layers in one buffer. They are
  /// statistics of this rank's batches, not trained parameters: train.cu averages them
  /// over the ranks before each evaluation.
  std::span<float> running_statistics() { return running_.span(); }

  /// Where the next batch's images go: [n, 1, 28, 28].
  float* input() { return act_.x.data(); }
  /// The last forward's logits [n, 10], and where the loss writes their gradient.
  const float* logits() const { return act_.logits.data(); }
  float* logits_gradient() { return act_.d_logits.data(); }

  /// Enqueues the forward pass of `n` samples: with batch statistics (and an update of the
  /// running ones) when training, with the running statistics otherwise.
  void forward(int n, bool training) {
    using namespace detail;
    const plan& p = plan_for(n);
    auto& a = act_;
    convolution_forward(p.x, a.x, p.conv1, conv1_weight, p.map1, a.conv1);
    batch_norm_forward(0, p.map1, a.conv1, a.norm1, training);
    activation_forward(p.map1, a.norm1, a.relu1);
    pooling_forward(p.map1, a.relu1, p.pooled1, a.pool1);
    convolution_forward(p.pooled1, a.pool1, p.conv2, conv2_weight, p.map2, a.conv2);
    batch_norm_forward(1, p.map2, a.conv2, a.norm2, training);
    activation_forward(p.map2, a.norm2, a.relu2);
    pooling_forward(p.map2, a.relu2, p.pooled2, a.pool2);
    dense_forward(n, a.pool2, fc1_weight, flat, hidden, hidden_bias_, p.hidden_t, a.fc1);
    activation_forward(p.hidden_t, a.fc1, a.relu3);
    dense_forward(n, a.relu3, fc2_weight, hidden, classes, classes_bias_, p.logits_t, a.logits);
  }

  /// Enqueues the backward pass of the last (training) forward, from the logits' gradient;
  /// calls `ready(id)` once parameter id's gradient is enqueued.
  template <class F>
  void backward(int n, F&& ready) {
    using namespace detail;
    const plan& p = plan_for(n);
    auto& a = act_;
    dense_backward(n, a.relu3, fc2_weight, hidden, classes, a.d_logits, a.d_relu3.data());
    ready(fc2_weight), ready(fc2_bias);
    activation_backward(p.hidden_t, a.fc1, a.relu3, a.d_relu3, a.d_fc1);
    dense_backward(n, a.pool2, fc1_weight, flat, hidden, a.d_fc1, a.d_pool2.data());
    ready(fc1_weight), ready(fc1_bias);
    pooling_backward(p.map2, a.relu2, a.d_relu2, p.pooled2, a.pool2, a.d_pool2);
    activation_backward(p.map2, a.norm2, a.relu2, a.d_relu2, a.d_norm2);
    batch_norm_backward(1, p.map2, a.conv2, a.d_norm2, a.d_conv2);
    ready(bn2_scale), ready(bn2_bias);
    convolution_backward_filter(p.pooled1, a.pool1, p.conv2, conv2_weight, p.map2, a.d_conv2);
    ready(conv2_weight);
    convolution_backward_data(p.conv2, conv2_weight, p.map2, a.d_conv2, p.pooled1, a.d_pool1);
    pooling_backward(p.map1, a.relu1, a.d_relu1, p.pooled1, a.pool1, a.d_pool1);
    activation_backward(p.map1, a.norm1, a.relu1, a.d_relu1, a.d_norm1);
    batch_norm_backward(0, p.map1, a.conv1, a.d_norm1, a.d_conv1);
    ready(bn1_scale), ready(bn1_bias);
    convolution_backward_filter(p.x, a.x, p.conv1, conv1_weight, p.map1, a.d_conv1);
    ready(conv1_weight);
  }

 private:
  using buffer = strata::cuda::device_buffer<float>;
  enum class init { he, ones, zeros };

  /// A batch-norm layer: its parameters' descriptor [1, C, 1, 1] and where its statistics
  /// start in running_ and saved_ (means, then variances or inverse deviations).
  struct batch_norm {
    detail::tensor_descriptor channels;
    parameter_id scale, bias;
    std::size_t offset, size;
  };

  void upload(const buffer& to, const std::vector<float>& from) {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), from.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `from` is about to go away
  }

  void add(std::string name, std::vector<std::size_t> shape, init how, std::mt19937_64& engine) {
    std::size_t size = 1, fan_in = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) size *= shape[i], fan_in *= i == 0 ? 1 : shape[i];
    std::vector<float> values(size, how == init::ones ? 1.0f : 0.0f);
    if (how == init::he) {
      std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / static_cast<float>(fan_in)));
      for (float& v : values) v = normal(engine);
    }
    parameter p{std::move(name), std::move(shape), buffer(size, stream_), buffer(size, stream_)};
    upload(p.value, values);
    params_.push_back(std::move(p));
  }

  const float* value(parameter_id id) const { return params_[id].value.data(); }
  float* grad(parameter_id id) { return params_[id].grad.data(); }

  const detail::plan& plan_for(int n) {
    if (n < 1 || n > capacity_)
      throw std::invalid_argument("network: a batch of " + std::to_string(n) + " samples, but room for 1 to " +
                                  std::to_string(capacity_));
    auto [it, made] = plans_.try_emplace(n);
    if (made) {
      it->second = std::make_unique<detail::plan>(cudnn_, n);
      const std::size_t need = std::max(it->second->conv1.workspace, it->second->conv2.workspace);
      if (need > workspace_.size()) workspace_ = strata::cuda::device_buffer<std::byte>(need, stream_);
    }
    return *it->second;
  }

  void convolution_forward(cudnnTensorDescriptor_t xd, const buffer& x, const detail::convolution& c, parameter_id w,
                           cudnnTensorDescriptor_t yd, const buffer& y) {
    CNN_CUDNN_CHECK(cudnnConvolutionForward(cudnn_, &one_, xd, x.data(), c.filter, value(w), c.conv, c.forward,
                                            workspace_.data(), workspace_.size(), &zero_, yd, y.data()));
  }

  void convolution_backward_filter(cudnnTensorDescriptor_t xd, const buffer& x, const detail::convolution& c,
                                   parameter_id w, cudnnTensorDescriptor_t yd, const buffer& dy) {
    CNN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &one_, xd, x.data(), yd, dy.data(), c.conv, c.backward_filter,
                                                   workspace_.data(), workspace_.size(), &zero_, c.filter, grad(w)));
  }

  void convolution_backward_data(const detail::convolution& c, parameter_id w, cudnnTensorDescriptor_t yd,
                                 const buffer& dy, cudnnTensorDescriptor_t xd, const buffer& dx) {
    CNN_CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &one_, c.filter, value(w), yd, dy.data(), c.conv, c.backward_data,
                                                 workspace_.data(), workspace_.size(), &zero_, xd, dx.data()));
  }

  void batch_norm_forward(int layer, cudnnTensorDescriptor_t d, const buffer& x, const buffer& y, bool training) {
    const batch_norm& bn = bn_[layer];
    float* mean = running_.data() + bn.offset;
    float* variance = mean + bn.size;
    if (training) {
      float* saved_mean = saved_.data() + bn.offset;
      CNN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &one_, &zero_, d, x.data(), d, y.data(), bn.channels, value(bn.scale),
          value(bn.bias), detail::bn_momentum, mean, variance, detail::bn_epsilon, saved_mean, saved_mean + bn.size));
    } else {
      CNN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(cudnn_, CUDNN_BATCHNORM_SPATIAL, &one_, &zero_, d, x.data(),
                                                              d, y.data(), bn.channels, value(bn.scale), value(bn.bias),
                                                              mean, variance, detail::bn_epsilon));
    }
  }

  void batch_norm_backward(int layer, cudnnTensorDescriptor_t d, const buffer& x, const buffer& dy, const buffer& dx) {
    const batch_norm& bn = bn_[layer];
    const float* saved_mean = saved_.data() + bn.offset;
    CNN_CUDNN_CHECK(cudnnBatchNormalizationBackward(cudnn_, CUDNN_BATCHNORM_SPATIAL, &one_, &zero_, &one_, &zero_, d,
                                                    x.data(), d, dy.data(), d, dx.data(), bn.channels, value(bn.scale),
                                                    grad(bn.scale), grad(bn.bias), detail::bn_epsilon, saved_mean,
                                                    saved_mean + bn.size));
  }

  void activation_forward(cudnnTensorDescriptor_t d, const buffer& x, const buffer& y) {
    CNN_CUDNN_CHECK(cudnnActivationForward(cudnn_, relu_, &one_, d, x.data(), &zero_, d, y.data()));
  }

  void activation_backward(cudnnTensorDescriptor_t d, const buffer& x, const buffer& y, const buffer& dy,
                           const buffer& dx) {
    CNN_CUDNN_CHECK(
        cudnnActivationBackward(cudnn_, relu_, &one_, d, y.data(), d, dy.data(), d, x.data(), &zero_, d, dx.data()));
  }

  void pooling_forward(cudnnTensorDescriptor_t xd, const buffer& x, cudnnTensorDescriptor_t yd, const buffer& y) {
    CNN_CUDNN_CHECK(cudnnPoolingForward(cudnn_, pool_, &one_, xd, x.data(), &zero_, yd, y.data()));
  }

  void pooling_backward(cudnnTensorDescriptor_t xd, const buffer& x, const buffer& dx, cudnnTensorDescriptor_t yd,
                        const buffer& y, const buffer& dy) {
    CNN_CUDNN_CHECK(
        cudnnPoolingBackward(cudnn_, pool_, &one_, yd, y.data(), yd, dy.data(), xd, x.data(), &zero_, xd, dx.data()));
  }

  // Row-major x [n, in], weight [out, in], y [n, out]; cuBLAS is column-major, so each
  // product is written for the transposes: y^T = W x^T.
  void dense_forward(int n, const buffer& x, parameter_id w, int in, int out, cudnnTensorDescriptor_t bias_d,
                     cudnnTensorDescriptor_t yd, const buffer& y) {
    STRATA_CUDA_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one_, value(w), in, x.data(), in, &zero_,
                                  y.data(), out));
    CNN_CUDNN_CHECK(cudnnAddTensor(cudnn_, &one_, bias_d, value(static_cast<parameter_id>(w + 1)), &one_, yd, y.data()));
  }

  /// dW^T = x^T dy, db = dy^T 1 and, unless `dx` is null, dx^T = W^T dy^T.
  void dense_backward(int n, const buffer& x, parameter_id w, int in, int out, const buffer& dy, float* dx) {
    STRATA_CUDA_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one_, x.data(), in, dy.data(), out,
                                  &zero_, grad(w), in));
    STRATA_CUDA_CHECK(cublasSgemv(cublas_, CUBLAS_OP_N, out, n, &one_, dy.data(), out, ones_.data(), 1, &zero_,
                                  grad(static_cast<parameter_id>(w + 1)), 1));
    if (dx != nullptr)
      STRATA_CUDA_CHECK(
          cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one_, value(w), in, dy.data(), out, &zero_, dx, in));
  }

  static constexpr float one_ = 1.0f, zero_ = 0.0f;
  cudaStream_t stream_;
  int capacity_;
  cudnnHandle_t cudnn_{};
  cublasHandle_t cublas_{};
  detail::pooling_descriptor pool_;
  detail::activation_descriptor relu_;
  detail::tensor_descriptor hidden_bias_, classes_bias_;
  std::array<batch_norm, 2> bn_{batch_norm{{}, bn1_scale, bn1_bias, 0, detail::c1},
                                batch_norm{{}, bn2_scale, bn2_bias, 2 * detail::c1, detail::c2}};
  std::vector<parameter> params_;
  detail::activations act_;
  buffer ones_, running_, saved_;  // saved_: the last training batch's means and inverse deviations
  strata::cuda::device_buffer<std::byte> workspace_;
  std::map<int, std::unique_ptr<detail::plan>> plans_;
};

}  // namespace fashion_mnist_cnn
