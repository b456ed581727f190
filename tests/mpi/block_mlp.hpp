#pragma once
// A model with structure to split, for the model-parallel tests and benchmark: residual MLP
// blocks y = x + W2 relu(W1 x + b1) + b2 and a softmax head, on synthetic data whose labels
// a linear map of the inputs decides. Laid out on a mesh as Megatron-LM lays out its MLPs:
// W1 column-parallel and W2 row-parallel over the tensor group (one all-reduce forward, one
// backward), blocks split evenly over pipeline stages (the head on the last), each stage's
// variables averaged over its data group by a strata executor. Run on a 1-rank mesh it is
// the reference: the same arithmetic, unsplit.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "strata/ckpt/store.hpp"
#include "strata/exec/executor.hpp"
#include "strata/model/model.hpp"
#include "strata/optim/sgd.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"
#include "strata/parallel/tensor_parallel.hpp"
#include "strata/strategy/strategy.hpp"

namespace strata::testing {

struct block_mlp_config {
  int features = 16, hidden = 32, blocks = 4, classes = 4;
  int batch = 32;  // global, per update
  int micro_batches = 4;
  std::uint32_t seed = 7;
  // Mistakes the safety-net tests make on purpose, on the tensor ranks other than the first:
  bool split_weight_declared_whole = false;  // block0.w1, which each tensor rank holds a part of, without TensorParallel<0>
  bool whole_init_differs = false;           // the whole tensors initialized from another seed there
  bool batch_differs = false;                // another batch read there
};

/// Deterministic values in [-scale, scale) from (seed, stream, index).
inline float uniform(std::uint32_t seed, std::uint32_t stream, std::uint32_t index, float scale) {
  std::uint32_t x = seed * 0x9E3779B9u ^ stream * 0x85EBCA6Bu ^ index * 0xC2B2AE35u;
  x ^= x >> 16, x *= 0x7FEB352Du, x ^= x >> 15, x *= 0x846CA68Bu, x ^= x >> 16;
  return scale * (static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f);
}

/// One rank's part of the model: its stage's blocks, its tensor shard of each.
class block_mlp {
 public:
  using Dense = Strategy<Replicate, AllReduce<Ring>>;
  using ColumnParallel = Strategy<Replicate, AllReduce<Ring>, TensorParallel<0>>;  // W1 [hidden, features] and b1
  using RowParallel = Strategy<Replicate, AllReduce<Ring>, TensorParallel<1>>;     // W2 [features, hidden]
  using model_type = model<Dense, ColumnParallel, RowParallel>;

  struct tensor {
    std::string name;
    std::vector<std::size_t> shape;  // this rank's part
    std::vector<float> value, grad;
    // The part's place in the whole tensor: rows [row0, row0 + rows) and columns
    // [col0, col0 + cols) of a [whole_rows, whole_cols] matrix (vectors: one column).
    std::size_t row0 = 0, col0 = 0, whole_cols = 1;
    int split = -1;  // the tensor-parallel axis, or -1: whole
  };

  block_mlp(const block_mlp_config& c, mesh_shape shape, mesh_coordinates at) : c_(c), shape_(shape), at_(at) {
    if (c.blocks % shape.pp != 0)
      throw usage_error(fmt::format("the model's {} blocks do not split evenly over pp={} stages", c.blocks, shape.pp));
    if (c.batch % (shape.dp * c.micro_batches) != 0)
      throw usage_error(fmt::format("a batch of {} does not split into dp={} x {} micro-batches", c.batch, shape.dp,
                                    c.micro_batches));
    hidden_ = tensor_parallel::shard_of(static_cast<std::size_t>(c.hidden), shape.tp, at.tp, "a block's hidden layer");
    const int per_stage = c.blocks / shape.pp;
    for (int b = at.pp * per_stage; b < (at.pp + 1) * per_stage; ++b) {
      const auto D = static_cast<std::size_t>(c.features), H = static_cast<std::size_t>(c.hidden);
      const std::string p = fmt::format("block{}.", b);
      blocks_.push_back({add(p + "w1", H, D, hidden_.begin, hidden_.count, 0, D, 4 * b + 0, 0),
                         add(p + "b1", H, 1, hidden_.begin, hidden_.count, 0, 1, 4 * b + 1, 0),
                         add(p + "w2", D, H, 0, D, hidden_.begin, hidden_.count, 4 * b + 2, 1),
                         add(p + "b2", D, 1, 0, D, 0, 1, 4 * b + 3, -1)});
    }
    if (last_stage()) {
      const auto C = static_cast<std::size_t>(c.classes), D = static_cast<std::size_t>(c.features);
      head_w_ = add("head.w", C, D, 0, C, 0, D, 1000, -1);
      head_b_ = add("head.b", C, 1, 0, C, 0, 1, 1001, -1);
    }
  }

  std::vector<tensor>& tensors() { return tensors_; }
  bool last_stage() const { return at_.pp + 1 == shape_.pp; }
  std::size_t micro_rows() const {
    return static_cast<std::size_t>(c_.batch / (shape_.dp * c_.micro_batches));
  }
  /// Elements of one micro-batch's activation between stages.
  std::size_t boundary() const { return micro_rows() * static_cast<std::size_t>(c_.features); }

  /// This rank's variables, each declared with its tensor-parallel split.
  model_type make_model() {
    model_type m;
    for (tensor& t : tensors_) {
      if (c_.split_weight_declared_whole && t.name == "block0.w1")
        m.add(variable<Dense>(t.name, t.value, t.grad, {t.shape[0], t.shape[1]}));
      else if (t.shape.size() == 1 && t.split == 0) m.add(variable<ColumnParallel>(t.name, t.value, t.grad, {t.shape[0]}));
      else if (t.shape.size() == 1) m.add(variable<Dense>(t.name, t.value, t.grad, {t.shape[0]}));
      else if (t.split == 0) m.add(variable<ColumnParallel>(t.name, t.value, t.grad, {t.shape[0], t.shape[1]}));
      else if (t.split == 1) m.add(variable<RowParallel>(t.name, t.value, t.grad, {t.shape[0], t.shape[1]}));
      else m.add(variable<Dense>(t.name, t.value, t.grad, {t.shape[0], t.shape[1]}));
    }
    return m;
  }

  /// Forward of micro-batch `micro` of update `update` through this stage's blocks. `in` is
  /// the previous stage's output (empty on the first stage: its inputs are generated);
  /// `out` the output (empty on the last stage: the loss is computed instead).
  template <CommContext Group>
  void forward(Group& tp, std::int64_t update, int micro, std::span<const float> in, std::span<float> out) {
    const std::size_t R = micro_rows(), D = static_cast<std::size_t>(c_.features);
    saved& s = saved_for(micro);
    s.x.assign(blocks_.size() + 1, {});
    s.x[0] = in.empty() ? inputs(update, micro) : std::vector<float>(in.begin(), in.end());
    s.a.assign(blocks_.size(), {});
    for (std::size_t k = 0; k < blocks_.size(); ++k) {
      const block& b = blocks_[k];
      const std::vector<float>& x = s.x[k];
      std::vector<float>& a = s.a[k];
      a.assign(R * hidden_.count, 0.0f);
      tensor_parallel::copy_to_group::forward(tp, std::span<const float>(x));  // checks x in STRATA_DEBUG=detail
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t h = 0; h < hidden_.count; ++h) {
          float z = tensors_[b.b1].value[h];
          for (std::size_t d = 0; d < D; ++d) z += tensors_[b.w1].value[h * D + d] * x[r * D + d];
          a[r * hidden_.count + h] = std::max(z, 0.0f);
        }
      std::vector<float> y(R * D, 0.0f);
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t d = 0; d < D; ++d)
          for (std::size_t h = 0; h < hidden_.count; ++h)
            y[r * D + d] += tensors_[b.w2].value[d * hidden_.count + h] * a[r * hidden_.count + h];
      before_tensor_collective("forward");
      tensor_parallel::reduce_from_group::forward(tp, std::span<float>(y));
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t d = 0; d < D; ++d) y[r * D + d] += x[r * D + d] + tensors_[b.b2].value[d];
      s.x[k + 1] = std::move(y);
    }
    if (!out.empty()) std::copy(s.x.back().begin(), s.x.back().end(), out.begin());
  }

  /// Backward of micro-batch `micro`: writes this micro-batch's gradient of every variable
  /// (the mean over its rows) and `in_grad` (empty on the first stage). Returns the
  /// micro-batch's loss on the last stage, else 0.
  template <CommContext Group>
  double backward(Group& tp, std::int64_t update, int micro, std::span<const float> out_grad, std::span<float> in_grad) {
    const std::size_t R = micro_rows(), D = static_cast<std::size_t>(c_.features);
    saved& s = saved_for(micro);
    std::vector<float> dy(R * D, 0.0f);
    double loss = 0.0;
    if (last_stage()) loss = head_backward(update, micro, s.x.back(), dy);
    else std::copy(out_grad.begin(), out_grad.end(), dy.begin());
    for (std::size_t k = blocks_.size(); k-- > 0;) {
      const block& b = blocks_[k];
      const std::vector<float>& x = s.x[k];
      const std::vector<float>& a = s.a[k];
      std::vector<float>& gw1 = tensors_[b.w1].grad;
      std::vector<float>& gb1 = tensors_[b.b1].grad;
      std::vector<float>& gw2 = tensors_[b.w2].grad;
      std::vector<float>& gb2 = tensors_[b.b2].grad;
      std::fill(gb2.begin(), gb2.end(), 0.0f);
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t d = 0; d < D; ++d) gb2[d] += dy[r * D + d];
      tensor_parallel::reduce_from_group::backward(tp, std::span<const float>(dy));
      std::vector<float> dz(R * hidden_.count, 0.0f);  // through relu
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t h = 0; h < hidden_.count; ++h) {
          float g = 0.0f;
          for (std::size_t d = 0; d < D; ++d) g += tensors_[b.w2].value[d * hidden_.count + h] * dy[r * D + d];
          dz[r * hidden_.count + h] = a[r * hidden_.count + h] > 0.0f ? g : 0.0f;
        }
      for (std::size_t d = 0; d < D; ++d)
        for (std::size_t h = 0; h < hidden_.count; ++h) {
          float g = 0.0f;
          for (std::size_t r = 0; r < R; ++r) g += dy[r * D + d] * a[r * hidden_.count + h];
          gw2[d * hidden_.count + h] = g;
        }
      std::fill(gb1.begin(), gb1.end(), 0.0f);
      for (std::size_t h = 0; h < hidden_.count; ++h) {
        for (std::size_t r = 0; r < R; ++r) gb1[h] += dz[r * hidden_.count + h];
        for (std::size_t d = 0; d < D; ++d) {
          float g = 0.0f;
          for (std::size_t r = 0; r < R; ++r) g += dz[r * hidden_.count + h] * x[r * D + d];
          gw1[h * D + d] = g;
        }
      }
      std::vector<float> dx(R * D, 0.0f);  // this shard's share of the input's gradient
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t d = 0; d < D; ++d)
          for (std::size_t h = 0; h < hidden_.count; ++h)
            dx[r * D + d] += tensors_[b.w1].value[h * D + d] * dz[r * hidden_.count + h];
      before_tensor_collective("backward");
      tensor_parallel::copy_to_group::backward(tp, std::span<float>(dx));
      for (std::size_t i = 0; i < dx.size(); ++i) dy[i] += dx[i];  // the residual path
    }
    if (!in_grad.empty()) std::copy(dy.begin(), dy.end(), in_grad.begin());
    saved_.erase(saved_.begin() + static_cast<std::ptrdiff_t>(index_of(micro)));
    return loss;
  }

  /// Activations held for backward right now, in micro-batches.
  std::size_t held() const { return saved_.size(); }
  /// Drops what forward saved for `micro` (an evaluation has no backward).
  void forget(int micro) { saved_.erase(saved_.begin() + static_cast<std::ptrdiff_t>(index_of(micro))); }

  /// Called before each tensor collective, with "forward" or "backward" (the fault tests stop there).
  std::function<void(std::string_view pass)> before_tensor_collective = [](std::string_view) {};

  /// The whole initial value of a tensor: what every layout slices its part from.
  static std::vector<float> initial(std::uint32_t seed, int stream, std::size_t rows, std::size_t cols, bool bias) {
    std::vector<float> v(rows * cols);
    const float scale = bias ? 0.1f : 1.0f / std::sqrt(static_cast<float>(cols));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = uniform(seed, static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(i), scale);
    return v;
  }

 private:
  struct block {
    std::size_t w1, b1, w2, b2;  // indices into tensors_
  };
  struct saved {
    int micro;
    std::vector<std::vector<float>> x;  // each block's input, then the stage's output
    std::vector<std::vector<float>> a;  // each block's hidden activation
  };

  /// Adds this rank's part (rows [row0, row0 + rows), columns [col0, col0 + cols)) of a
  /// [whole_rows, whole_cols] tensor, split over the tensor group along `split` (or whole: -1).
  std::size_t add(std::string name, std::size_t whole_rows, std::size_t whole_cols, std::size_t row0, std::size_t rows,
                  std::size_t col0, std::size_t cols, int stream, int split) {
    const bool differ = c_.whole_init_differs && split < 0 && at_.tp != 0;
    const std::vector<float> whole = initial(c_.seed + (differ ? 100 : 0), stream, whole_rows, whole_cols, whole_cols == 1);
    tensor t{std::move(name), whole_cols == 1 ? std::vector<std::size_t>{rows} : std::vector<std::size_t>{rows, cols},
             std::vector<float>(rows * cols), std::vector<float>(rows * cols, 0.0f), row0, col0, whole_cols, split};
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t k = 0; k < cols; ++k) t.value[r * cols + k] = whole[(row0 + r) * whole_cols + col0 + k];
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
  }

  /// The rows of the global batch that micro-batch `micro` of this data replica holds.
  std::size_t first_row(int micro) const {
    return static_cast<std::size_t>(c_.batch / shape_.dp * at_.dp) + static_cast<std::size_t>(micro) * micro_rows();
  }

  std::vector<float> inputs(std::int64_t update, int micro) const {
    const std::size_t R = micro_rows(), D = static_cast<std::size_t>(c_.features), row0 = first_row(micro);
    std::vector<float> x(R * D);
    const std::uint32_t seed = c_.seed + (c_.batch_differs && at_.tp != 0 ? 3 : 1);
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t d = 0; d < D; ++d)
        x[r * D + d] = uniform(seed, static_cast<std::uint32_t>(update),
                               static_cast<std::uint32_t>((row0 + r) * D + d), 1.0f);
    return x;
  }

  /// The label of a row: the class whose fixed random projection of the row's inputs is largest.
  int label(std::int64_t update, std::size_t row) const {
    const std::size_t D = static_cast<std::size_t>(c_.features);
    int best = 0;
    float best_score = -1e30f;
    for (int k = 0; k < c_.classes; ++k) {
      float score = 0.0f;
      for (std::size_t d = 0; d < D; ++d)
        score += uniform(c_.seed + 2, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(d), 1.0f) *
                 uniform(c_.seed + 1, static_cast<std::uint32_t>(update), static_cast<std::uint32_t>(row * D + d), 1.0f);
      if (score > best_score) best = k, best_score = score;
    }
    return best;
  }

  /// Softmax cross-entropy over the micro-batch's rows (their mean): the head's gradients,
  /// and the gradient of the blocks' output in `dy`.
  double head_backward(std::int64_t update, int micro, const std::vector<float>& y, std::vector<float>& dy) {
    const std::size_t R = micro_rows(), D = static_cast<std::size_t>(c_.features), C = static_cast<std::size_t>(c_.classes);
    std::vector<float>& gw = tensors_[head_w_].grad;
    std::vector<float>& gb = tensors_[head_b_].grad;
    std::fill(gw.begin(), gw.end(), 0.0f);
    std::fill(gb.begin(), gb.end(), 0.0f);
    double loss = 0.0;
    for (std::size_t r = 0; r < R; ++r) {
      std::vector<float> p(C);
      for (std::size_t k = 0; k < C; ++k) {
        p[k] = tensors_[head_b_].value[k];
        for (std::size_t d = 0; d < D; ++d) p[k] += tensors_[head_w_].value[k * D + d] * y[r * D + d];
      }
      const float top = *std::max_element(p.begin(), p.end());
      float sum = 0.0f;
      for (float& v : p) sum += (v = std::exp(v - top));
      const auto target = static_cast<std::size_t>(label(update, first_row(micro) + r));
      loss -= std::log(p[target] / sum) / static_cast<double>(R);
      for (std::size_t k = 0; k < C; ++k) {
        const float g = (p[k] / sum - (k == target ? 1.0f : 0.0f)) / static_cast<float>(R);
        gb[k] += g;
        for (std::size_t d = 0; d < D; ++d) {
          gw[k * D + d] += g * y[r * D + d];
          dy[r * D + d] += g * tensors_[head_w_].value[k * D + d];
        }
      }
    }
    return loss;
  }

  saved& saved_for(int micro) {
    for (saved& s : saved_)
      if (s.micro == micro) return s;
    return saved_.emplace_back(saved{micro, {}, {}});
  }
  std::size_t index_of(int micro) const {
    for (std::size_t i = 0; i < saved_.size(); ++i)
      if (saved_[i].micro == micro) return i;
    return saved_.size();
  }

  block_mlp_config c_;
  mesh_shape shape_;
  mesh_coordinates at_;
  tensor_parallel::shard hidden_;
  std::vector<tensor> tensors_;
  std::vector<block> blocks_;
  std::size_t head_w_ = 0, head_b_ = 0;
  std::vector<saved> saved_;
};

/// What train() leaves: this rank's tensors, and what the run measured.
struct trained {
  std::vector<block_mlp::tensor> tensors;
  int max_in_flight = 0;
  double first_loss = 0.0, last_loss = 0.0;  // the last stage's, summed over micro-batches
  std::int64_t restored_from = 0;             // the checkpoint's update, or 0
  std::int64_t updates = 0;                   // where training stopped
  memory_use memory;                          // as the executor reports it, at the end
};

/// How train() runs, beyond the model.
struct train_options {
  std::string_view schedule = "1f1b";  // or "gpipe"
  int updates = 50;
  std::chrono::duration<double> timeout = default_timeout();  // the executor's and the pipeline's
  std::function<void(int update)> before_update = [](int) {};  // e.g. a stall, for the fault tests
  std::string checkpoints;  // a directory: restore the newest checkpoint there first, if any
  int save_at = 0;          // save a checkpoint after this update (0: never)
  int save_every = 0;       // and after every this many updates (0: never)
  int stop_after = 0;       // stop after this update (0: at `updates`)
  int evaluate_every = 0;   // a forward-only pass over held-out inputs after every this many updates (0: never)
  // Before each tensor collective: the update, and "forward", "backward" or "evaluation".
  std::function<void(int update, std::string_view pass)> before_tensor_collective = [](int, std::string_view) {};
};

/// The block MLP on `grid`, trained with SGD one update at a time: the pipeline runs each
/// update's micro-batches, and the executor over the data group accumulates them and
/// averages over the replicas.
template <class Context>
class trainer {
 public:
  trainer(mesh<Context>& grid, const block_mlp_config& config, const train_options& o)
      : grid_(&grid), config_(config), options_(o), net_(config, grid.shape(), grid.coordinates()), model_(net_.make_model()),
        exec_(make_executor(grid, model_, optim::sgd{.lr = 0.1f, .momentum = 0.5f},
                            {.accumulation_steps = config.micro_batches, .timeout = o.timeout})),
        pipe_(pipeline::make_driver(grid, std::vector<std::size_t>(static_cast<std::size_t>(grid.shape().pp - 1), net_.boundary()),
                                    {.timeout = o.timeout})) {
    net_.before_tensor_collective = [this](std::string_view pass) {
      options_.before_tensor_collective(update_, evaluating_ ? std::string_view("evaluation") : pass);
    };
  }

  /// One update; returns what the pipeline measured. loss() is then its loss.
  pipeline::run_stats update() {
    const int u = update_ = static_cast<int>(exec_.updates()) + 1;
    options_.before_update(u);
    auto& tp = grid_->tensor();
    loss_ = 0.0;
    auto forward = [&](int i, std::span<const float> in, std::span<float> out) { net_.forward(tp, u, i, in, out); };
    auto backward = [&](int i, std::span<const float> out_grad, std::span<float> in_grad) {
      loss_ += net_.backward(tp, u, i, out_grad, in_grad);
      exec_.step();  // accumulates; the last micro-batch's step averages over the data group and updates
    };
    const pipeline::run_stats stats = options_.schedule == "gpipe"
                                          ? pipe_.run(pipeline::gpipe{}, config_.micro_batches, forward, backward)
                                          : pipe_.run(pipeline::one_f_one_b{}, config_.micro_batches, forward, backward);
    if (exec_.updates() != u || net_.held() != 0)
      throw std::runtime_error(fmt::format("update {}: the executor counts {} updates and {} activations are still held", u,
                                           exec_.updates(), net_.held()));
    return stats;
  }

  /// A forward-only pass of the pipeline over inputs no update trains on (as an evaluation
  /// would run), after update `u`.
  void evaluate(int u) {
    update_ = u;
    evaluating_ = true;
    auto& tp = grid_->tensor();
    pipe_.run_forward(config_.micro_batches, [&](int i, std::span<const float> in, std::span<float> out) {
      net_.forward(tp, held_out + u, i, in, out);
      net_.forget(i);
    });
    evaluating_ = false;
  }

  std::optional<ckpt::restored_checkpoint> restore(const ckpt::store& s) { return exec_.restore_checkpoint(s); }
  void save(const ckpt::store& s) { exec_.save_checkpoint(s); }

  /// The last update's loss on the last stage (summed over micro-batches), else 0.
  double loss() const { return loss_; }
  block_mlp& net() { return net_; }
  auto& executor() { return exec_; }

 private:
  mesh<Context>* grid_;
  block_mlp_config config_;
  train_options options_;
  block_mlp net_;
  block_mlp::model_type model_;
  decltype(make_executor(std::declval<mesh<Context>&>(), std::declval<block_mlp::model_type&>(), optim::sgd{})) exec_;
  decltype(pipeline::make_driver(std::declval<mesh<Context>&>(), {})) pipe_;
  double loss_ = 0.0;
  int update_ = 0;
  bool evaluating_ = false;
  static constexpr int held_out = 1 << 20;  // evaluation inputs are those of updates from here on
};

/// Trains for o.updates updates.
template <class Context>
trained train(mesh<Context>& grid, const block_mlp_config& config, const train_options& o) {
  trainer<Context> t(grid, config, o);
  trained result;
  std::optional<ckpt::store> store;
  if (!o.checkpoints.empty()) {
    store.emplace(o.checkpoints);
    if (const auto restored = t.restore(*store)) result.restored_from = restored->step;
  }
  const int last = o.stop_after > 0 ? std::min(o.stop_after, o.updates) : o.updates;
  for (int u = static_cast<int>(result.restored_from) + 1; u <= last; ++u) {
    result.max_in_flight = std::max(result.max_in_flight, t.update().max_in_flight);
    (u == result.restored_from + 1 ? result.first_loss : result.last_loss) = t.loss();
    if (o.evaluate_every > 0 && u % o.evaluate_every == 0) t.evaluate(u);
    if (store && (u == o.save_at || (o.save_every > 0 && u % o.save_every == 0))) t.save(*store);
    result.updates = u;
  }
  result.tensors = t.net().tensors();
  result.memory = t.executor().memory();
  return result;
}

/// The largest |mine - reference| over this rank's part of every tensor, relative to the
/// reference tensor's largest magnitude.
inline double largest_difference(const std::vector<block_mlp::tensor>& mine, const std::vector<block_mlp::tensor>& reference) {
  double worst = 0.0;
  for (const block_mlp::tensor& t : mine) {
    const auto whole = std::find_if(reference.begin(), reference.end(), [&](const auto& r) { return r.name == t.name; });
    if (whole == reference.end()) throw std::runtime_error("the reference has no tensor " + t.name);
    const std::size_t cols = t.shape.size() == 2 ? t.shape[1] : 1;
    double scale = 1e-6, difference = 0.0;
    for (float v : whole->value) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (std::size_t i = 0; i < t.value.size(); ++i) {
      const std::size_t r = t.row0 + i / cols, c = t.col0 + i % cols;
      difference = std::max(difference, static_cast<double>(std::fabs(t.value[i] - whole->value[r * t.whole_cols + c])));
    }
    worst = std::max(worst, difference / scale);
  }
  return worst;
}

}  // namespace strata::testing
