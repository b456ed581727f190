#pragma once
// A small Vision Transformer for Fashion-MNIST, written to be split over a mesh: 4x4 patches
// (49 tokens of 16 pixels), a patch embedding with learned positions, pre-norm encoder blocks
// (multi-head self-attention, then a GELU MLP), a final LayerNorm, mean pooling and a linear
// head. On a mesh each rank holds
//   - the blocks of its pipeline stage, the patch embedding on the first stage and the final
//     norm and head on the last;
//   - of each block, its tensor group's share of the heads: the QKV projection is
//     column-parallel by heads (TensorParallel<0>, rows ordered head by head) and the output
//     projection row-parallel (TensorParallel<1>); the MLP's first layer column-parallel, its
//     second row-parallel. A block thus sums over the tensor group twice in forward (after
//     each row-parallel layer) and twice in backward (the inputs' gradients of the two
//     column-parallel layers), with tensor_parallel.hpp's collectives.
// The arithmetic is the same on every mesh (up to the order of sums), so a mesh trains the
// model a single rank trains. Linear layers are CBLAS GEMMs over all tokens of a micro-batch.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>

#include <strata/strata.hpp>

namespace vit {

struct config {
  int embed = 64, heads = 4, mlp = 128, blocks = 4;
  std::uint64_t seed = 1;
  static constexpr int tokens = 49, patch = 16, classes = 10, image_side = 28, patch_side = 4;
};

/// C = op(A) op(B) + beta C, row-major and densely packed; C is m x n, op(A) m x k.
inline void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const float* a, const float* b, float beta,
                 float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n),
              beta, c, static_cast<int>(n));
}

/// One parameter of this rank: its part of the whole tensor, and where that part lies.
struct parameter {
  std::string name;
  std::vector<std::size_t> shape;  // this rank's part
  int split = -1;                  // TensorParallel axis, or -1: whole
  std::vector<float> value, grad;
};

/// The variables' strategies: averaged over the data group by all-reduce `Algorithm`; the
/// split ones also tensor parallel along their axis.
template <class Algorithm>
struct strategies {
  using Whole = strata::Strategy<strata::Replicate, strata::AllReduce<Algorithm>>;
  using Column = strata::Strategy<strata::Replicate, strata::AllReduce<Algorithm>, strata::TensorParallel<0>>;
  using Row = strata::Strategy<strata::Replicate, strata::AllReduce<Algorithm>, strata::TensorParallel<1>>;
  using model_type = strata::model<Whole, Column, Row>;
};

class model {
 public:

  /// This rank's part of the model on a mesh of `shape`, at `at`. Throws usage_error when the
  /// mesh cannot split it (blocks over stages, heads and MLP width over the tensor group).
  model(const config& c, strata::mesh_shape shape, strata::mesh_coordinates at) : c_(c), tp_(shape.tp) {
    if (c.blocks % shape.pp != 0)
      throw strata::usage_error(fmt::format("--mesh {}: the model's {} blocks do not split evenly over pp={} stages; "
                                            "choose pp to divide {}",
                                            strata::to_string(shape), c.blocks, shape.pp, c.blocks));
    if (c.heads % shape.tp != 0)
      throw strata::usage_error(fmt::format("--mesh {}: the model's {} attention heads do not split evenly over tp={}; "
                                            "choose tp to divide {}",
                                            strata::to_string(shape), c.heads, shape.tp, c.heads));
    if (c.embed % c.heads != 0) throw strata::usage_error("the embedding width must be a multiple of the heads");
    heads_ = c.heads / shape.tp;
    head_dim_ = static_cast<std::size_t>(c.embed / c.heads);
    mlp_ = strata::tensor_parallel::shard_of(static_cast<std::size_t>(c.mlp), shape.tp, at.tp, "the MLP's hidden layer").count;
    first_ = at.pp == 0;
    last_ = at.pp + 1 == shape.pp;
    const auto E = static_cast<std::size_t>(c.embed), F = static_cast<std::size_t>(c.mlp);
    const std::size_t P = config::patch, T = config::tokens;
    const float e_bound = 1.0f / std::sqrt(static_cast<float>(E)), f_bound = 1.0f / std::sqrt(static_cast<float>(F));
    if (first_) {
      patch_w_ = add("embed.weight", {E, P}, -1, at.tp, 1.0f / std::sqrt(static_cast<float>(P)));
      patch_b_ = add("embed.bias", {E}, -1, at.tp, 1.0f / std::sqrt(static_cast<float>(P)));
      position_ = add("embed.position", {T, E}, -1, at.tp, 0.02f);
    }
    const int per_stage = c.blocks / shape.pp;
    for (int b = at.pp * per_stage; b < (at.pp + 1) * per_stage; ++b) {
      const std::string p = fmt::format("block{}.", b);
      block_ids k;
      k.ln1_g = add(p + "ln1.weight", {E}, -1, at.tp, 0.0f, 1.0f);
      k.ln1_b = add(p + "ln1.bias", {E}, -1, at.tp, 0.0f);
      k.qkv_w = add(p + "qkv.weight", {3 * E, E}, 0, at.tp, e_bound);
      k.qkv_b = add(p + "qkv.bias", {3 * E}, 0, at.tp, e_bound);
      k.proj_w = add(p + "proj.weight", {E, E}, 1, at.tp, e_bound);
      k.proj_b = add(p + "proj.bias", {E}, -1, at.tp, e_bound);
      k.ln2_g = add(p + "ln2.weight", {E}, -1, at.tp, 0.0f, 1.0f);
      k.ln2_b = add(p + "ln2.bias", {E}, -1, at.tp, 0.0f);
      k.fc1_w = add(p + "fc1.weight", {F, E}, 0, at.tp, e_bound);
      k.fc1_b = add(p + "fc1.bias", {F}, 0, at.tp, e_bound);
      k.fc2_w = add(p + "fc2.weight", {E, F}, 1, at.tp, f_bound);
      k.fc2_b = add(p + "fc2.bias", {E}, -1, at.tp, f_bound);
      blocks_.push_back(k);
    }
    if (last_) {
      norm_g_ = add("norm.weight", {E}, -1, at.tp, 0.0f, 1.0f);
      norm_b_ = add("norm.bias", {E}, -1, at.tp, 0.0f);
      head_w_ = add("head.weight", {static_cast<std::size_t>(config::classes), E}, -1, at.tp, e_bound);
      head_b_ = add("head.bias", {static_cast<std::size_t>(config::classes)}, -1, at.tp, e_bound);
    }
  }

  std::vector<parameter>& parameters() { return params_; }
  bool first_stage() const { return first_; }
  bool last_stage() const { return last_; }
  /// Elements of the activation between stages for `n` images.
  std::size_t boundary(std::size_t n) const { return n * config::tokens * static_cast<std::size_t>(c_.embed); }

  /// This rank's variables, each with its split, for an executor over the mesh.
  template <class Algorithm>
  typename strategies<Algorithm>::model_type declare() {
    using Whole = typename strategies<Algorithm>::Whole;
    using Column = typename strategies<Algorithm>::Column;
    using Row = typename strategies<Algorithm>::Row;
    typename strategies<Algorithm>::model_type m;
    for (parameter& p : params_) {
      const auto& s = p.shape;
      if (s.size() == 1) {
        if (p.split == 0) m.add(strata::variable<Column>(p.name, p.value, p.grad, {s[0]}));
        else m.add(strata::variable<Whole>(p.name, p.value, p.grad, {s[0]}));
      } else if (p.split == 0) {
        m.add(strata::variable<Column>(p.name, p.value, p.grad, {s[0], s[1]}));
      } else if (p.split == 1) {
        m.add(strata::variable<Row>(p.name, p.value, p.grad, {s[0], s[1]}));
      } else {
        m.add(strata::variable<Whole>(p.name, p.value, p.grad, {s[0], s[1]}));
      }
    }
    return m;
  }

  /// Forward of one micro-batch of `n` images through this stage. The first stage reads
  /// `images` (n x 784, standardized); the others `in`. The last stage returns the logits
  /// (n x 10); the others fill `out`. What backward needs is kept under `micro`.
  template <strata::CommContext Group>
  std::vector<float> forward(Group& tp, int micro, std::size_t n, std::span<const float> images, std::span<const float> in,
                             std::span<float> out) {
    const std::size_t E = static_cast<std::size_t>(c_.embed), T = config::tokens, R = n * T;
    saved& s = saved_for(micro);
    s.n = n;
    std::vector<float> x(R * E);
    if (first_) {
      s.patches = patches(images, n);
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t e = 0; e < E; ++e) x[r * E + e] = value(patch_b_)[e] + value(position_)[(r % T) * E + e];
      gemm(false, true, R, E, config::patch, s.patches.data(), value(patch_w_).data(), 1.0f, x.data());
    } else {
      std::copy(in.begin(), in.end(), x.begin());
    }
    s.blocks.assign(blocks_.size(), {});
    for (std::size_t k = 0; k < blocks_.size(); ++k) x = block_forward(tp, blocks_[k], s.blocks[k], std::move(x), n);
    if (!last_) {
      std::copy(x.begin(), x.end(), out.begin());
      return {};
    }
    // Final norm, mean over tokens, head.
    s.final_in = std::move(x);
    layer_norm(s.final_in, value(norm_g_), value(norm_b_), s.final_norm, R);
    s.pooled.assign(n * E, 0.0f);
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t e = 0; e < E; ++e) s.pooled[(r / T) * E + e] += s.final_norm.y[r * E + e] / static_cast<float>(T);
    std::vector<float> logits(n * config::classes);
    for (std::size_t i = 0; i < n; ++i) std::copy(value(head_b_).begin(), value(head_b_).end(), logits.begin() + static_cast<std::ptrdiff_t>(i * config::classes));
    gemm(false, true, n, config::classes, E, s.pooled.data(), value(head_w_).data(), 1.0f, logits.data());
    return logits;
  }

  /// Backward of micro-batch `micro`: writes this micro-batch's gradient of every parameter
  /// of the stage, and `in_grad` (the previous stage's output gradient; empty on the first).
  /// The last stage starts from `logits_grad` (n x 10), the others from `out_grad`.
  template <strata::CommContext Group>
  void backward(Group& tp, int micro, std::span<const float> logits_grad, std::span<const float> out_grad, std::span<float> in_grad) {
    saved& s = saved_for(micro);
    const std::size_t n = s.n, E = static_cast<std::size_t>(c_.embed), T = config::tokens, R = n * T;
    std::vector<float> dx(R * E);
    if (last_) {
      gemm(true, false, config::classes, E, n, logits_grad.data(), s.pooled.data(), 0.0f, grad(head_w_).data());
      column_sums(logits_grad, n, config::classes, grad(head_b_));
      std::vector<float> dpooled(n * E);
      gemm(false, false, n, E, config::classes, logits_grad.data(), value(head_w_).data(), 0.0f, dpooled.data());
      std::vector<float> dnorm(R * E);
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t e = 0; e < E; ++e) dnorm[r * E + e] = dpooled[(r / T) * E + e] / static_cast<float>(T);
      std::fill(dx.begin(), dx.end(), 0.0f);
      layer_norm_backward(dnorm, s.final_norm, value(norm_g_), grad(norm_g_), grad(norm_b_), dx, R);
    } else {
      std::copy(out_grad.begin(), out_grad.end(), dx.begin());
    }
    for (std::size_t k = blocks_.size(); k-- > 0;) dx = block_backward(tp, blocks_[k], s.blocks[k], std::move(dx), n);
    if (first_) {
      gemm(true, false, E, config::patch, R, dx.data(), s.patches.data(), 0.0f, grad(patch_w_).data());
      column_sums(dx, R, E, grad(patch_b_));
      std::vector<float>& dpos = grad(position_);
      std::fill(dpos.begin(), dpos.end(), 0.0f);
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t e = 0; e < E; ++e) dpos[(r % T) * E + e] += dx[r * E + e];
    } else {
      std::copy(dx.begin(), dx.end(), in_grad.begin());
    }
    forget(micro);
  }

  /// Micro-batches whose activations are held for backward.
  std::size_t held() const { return saved_.size(); }
  /// Drops what forward kept for micro-batch `micro` (an evaluation's, which has no backward).
  void forget(int micro) {
    std::erase_if(saved_, [&](const saved& x) { return x.micro == micro; });
  }

 private:
  struct block_ids {
    std::size_t ln1_g, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  };
  struct norm_saved {
    std::vector<float> y, xhat, rstd;
  };
  struct block_saved {
    std::vector<float> x, qkv, attention, heads_out, x1, z, m;
    norm_saved ln1, ln2;
  };
  struct saved {
    int micro;
    std::size_t n = 0;
    std::vector<float> patches;
    std::vector<block_saved> blocks;
    std::vector<float> final_in, pooled;
    norm_saved final_norm;
  };

  std::vector<float>& value(std::size_t i) { return params_[i].value; }
  std::vector<float>& grad(std::size_t i) { return params_[i].grad; }

  /// Adds this rank's part of a whole tensor of `whole` shape, split along `split` over the
  /// tensor group (rank `tp_rank` of tp_), initialized U(-bound, bound) + offset from a
  /// stream of its own, the same on every mesh.
  std::size_t add(std::string name, std::vector<std::size_t> whole, int split, int tp_rank, float bound, float offset = 0.0f) {
    std::size_t count = 1;
    for (std::size_t d : whole) count *= d;
    std::uint64_t stream = 1469598103934665603u;  // FNV-1a of the name: a stream per tensor, the same everywhere
    for (char ch : name) stream = (stream ^ static_cast<unsigned char>(ch)) * 1099511628211u;
    std::mt19937_64 engine(c_.seed ^ stream);
    std::vector<float> values(count);
    for (float& v : values) v = offset + bound * (2.0f * static_cast<float>(engine() >> 40) * 0x1p-24f - 1.0f);
    std::vector<std::size_t> shape = whole;
    std::vector<float> part = values;
    if (split >= 0 && tp_ > 1) {
      const auto a = static_cast<std::size_t>(split);
      const std::size_t cols = whole.size() == 2 ? whole[1] : 1, rows = whole[0];
      shape[a] /= static_cast<std::size_t>(tp_);
      part.clear();
      if (a == 0) {
        const std::size_t r0 = rows / static_cast<std::size_t>(tp_) * static_cast<std::size_t>(tp_rank);
        part.assign(values.begin() + static_cast<std::ptrdiff_t>(r0 * cols),
                    values.begin() + static_cast<std::ptrdiff_t>((r0 + shape[0]) * cols));
      } else {
        const std::size_t c0 = shape[1] * static_cast<std::size_t>(tp_rank);
        for (std::size_t r = 0; r < rows; ++r)
          part.insert(part.end(), values.begin() + static_cast<std::ptrdiff_t>(r * cols + c0),
                      values.begin() + static_cast<std::ptrdiff_t>(r * cols + c0 + shape[1]));
      }
    }
    params_.push_back({std::move(name), shape, split, part, std::vector<float>(part.size(), 0.0f)});
    return params_.size() - 1;
  }

  /// Each image's 49 patches of 4x4 pixels, row after row: [n * 49, 16].
  static std::vector<float> patches(std::span<const float> images, std::size_t n) {
    constexpr std::size_t side = config::image_side, ps = config::patch_side, per_row = side / ps;
    std::vector<float> out(n * config::tokens * config::patch);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t t = 0; t < config::tokens; ++t)
        for (std::size_t y = 0; y < ps; ++y)
          for (std::size_t x = 0; x < ps; ++x)
            out[(i * config::tokens + t) * config::patch + y * ps + x] =
                images[i * side * side + ((t / per_row) * ps + y) * side + (t % per_row) * ps + x];
    return out;
  }

  static void column_sums(std::span<const float> m, std::size_t rows, std::size_t cols, std::vector<float>& out) {
    std::fill(out.begin(), out.end(), 0.0f);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) out[c] += m[r * cols + c];
  }

  void layer_norm(const std::vector<float>& x, const std::vector<float>& g, const std::vector<float>& b, norm_saved& s,
                  std::size_t rows) const {
    const auto E = static_cast<std::size_t>(c_.embed);
    s.y.resize(rows * E), s.xhat.resize(rows * E), s.rstd.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * E;
      float mean = 0.0f, var = 0.0f;
      for (std::size_t e = 0; e < E; ++e) mean += row[e];
      mean /= static_cast<float>(E);
      for (std::size_t e = 0; e < E; ++e) var += (row[e] - mean) * (row[e] - mean);
      const float rstd = 1.0f / std::sqrt(var / static_cast<float>(E) + 1e-5f);
      s.rstd[r] = rstd;
      for (std::size_t e = 0; e < E; ++e) {
        const float xhat = (row[e] - mean) * rstd;
        s.xhat[r * E + e] = xhat;
        s.y[r * E + e] = xhat * g[e] + b[e];
      }
    }
  }

  /// Adds the input's gradient to dx; writes the gain's and bias's gradients.
  void layer_norm_backward(const std::vector<float>& dy, const norm_saved& s, const std::vector<float>& g,
                           std::vector<float>& dg, std::vector<float>& db, std::vector<float>& dx, std::size_t rows) const {
    const auto E = static_cast<std::size_t>(c_.embed);
    std::fill(dg.begin(), dg.end(), 0.0f);
    std::fill(db.begin(), db.end(), 0.0f);
    std::vector<float> dxhat(E);
    for (std::size_t r = 0; r < rows; ++r) {
      float mean_d = 0.0f, mean_dx = 0.0f;
      for (std::size_t e = 0; e < E; ++e) {
        const float d = dy[r * E + e];
        dg[e] += d * s.xhat[r * E + e];
        db[e] += d;
        dxhat[e] = d * g[e];
        mean_d += dxhat[e];
        mean_dx += dxhat[e] * s.xhat[r * E + e];
      }
      mean_d /= static_cast<float>(E);
      mean_dx /= static_cast<float>(E);
      for (std::size_t e = 0; e < E; ++e) dx[r * E + e] += s.rstd[r] * (dxhat[e] - mean_d - s.xhat[r * E + e] * mean_dx);
    }
  }

  static float gelu(float z) {
    constexpr float k = 0.7978845608f;  // sqrt(2/pi)
    return 0.5f * z * (1.0f + std::tanh(k * (z + 0.044715f * z * z * z)));
  }
  static float gelu_derivative(float z) {
    constexpr float k = 0.7978845608f;
    const float u = k * (z + 0.044715f * z * z * z), t = std::tanh(u);
    return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * z * z);
  }

  template <strata::CommContext Group>
  std::vector<float> block_forward(Group& tp, const block_ids& k, block_saved& s, std::vector<float> x, std::size_t n) {
    const std::size_t E = static_cast<std::size_t>(c_.embed), T = config::tokens, R = n * T, d = head_dim_;
    const std::size_t El = heads_ * d, Fl = mlp_;
    s.x = std::move(x);
    layer_norm(s.x, value(k.ln1_g), value(k.ln1_b), s.ln1, R);
    strata::tensor_parallel::copy_to_group::forward(tp, std::span<const float>(s.ln1.y));
    // QKV of this rank's heads: row blocks of 3d per head (q, k, v).
    s.qkv.resize(R * 3 * El);
    for (std::size_t r = 0; r < R; ++r) std::copy(value(k.qkv_b).begin(), value(k.qkv_b).end(), s.qkv.begin() + static_cast<std::ptrdiff_t>(r * 3 * El));
    gemm(false, true, R, 3 * El, E, s.ln1.y.data(), value(k.qkv_w).data(), 1.0f, s.qkv.data());
    s.attention.resize(n * heads_ * T * T);
    s.heads_out.assign(R * El, 0.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const auto ld = static_cast<int>(3 * El);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t h = 0; h < heads_; ++h) {
        const float* q = s.qkv.data() + i * T * 3 * El + h * 3 * d;
        float* att = s.attention.data() + (i * heads_ + h) * T * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(T), static_cast<int>(d),
                    scale, q, ld, q + d, ld, 0.0f, att, static_cast<int>(T));
        for (std::size_t t = 0; t < T; ++t) {
          float* row = att + t * T;
          const float top = *std::max_element(row, row + T);
          float sum = 0.0f;
          for (std::size_t u = 0; u < T; ++u) sum += (row[u] = std::exp(row[u] - top));
          for (std::size_t u = 0; u < T; ++u) row[u] /= sum;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(d), static_cast<int>(T),
                    1.0f, att, static_cast<int>(T), q + 2 * d, ld, 0.0f, s.heads_out.data() + i * T * El + h * d,
                    static_cast<int>(El));
      }
    std::vector<float> y(R * E, 0.0f);
    gemm(false, true, R, E, El, s.heads_out.data(), value(k.proj_w).data(), 0.0f, y.data());
    strata::tensor_parallel::reduce_from_group::forward(tp, std::span<float>(y));
    s.x1.resize(R * E);
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t e = 0; e < E; ++e) s.x1[r * E + e] = s.x[r * E + e] + y[r * E + e] + value(k.proj_b)[e];
    layer_norm(s.x1, value(k.ln2_g), value(k.ln2_b), s.ln2, R);
    strata::tensor_parallel::copy_to_group::forward(tp, std::span<const float>(s.ln2.y));
    s.z.resize(R * Fl);
    for (std::size_t r = 0; r < R; ++r) std::copy(value(k.fc1_b).begin(), value(k.fc1_b).end(), s.z.begin() + static_cast<std::ptrdiff_t>(r * Fl));
    gemm(false, true, R, Fl, E, s.ln2.y.data(), value(k.fc1_w).data(), 1.0f, s.z.data());
    s.m.resize(R * Fl);
    std::transform(s.z.begin(), s.z.end(), s.m.begin(), gelu);
    std::vector<float> y2(R * E, 0.0f);
    gemm(false, true, R, E, Fl, s.m.data(), value(k.fc2_w).data(), 0.0f, y2.data());
    strata::tensor_parallel::reduce_from_group::forward(tp, std::span<float>(y2));
    std::vector<float> out(R * E);
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t e = 0; e < E; ++e) out[r * E + e] = s.x1[r * E + e] + y2[r * E + e] + value(k.fc2_b)[e];
    return out;
  }

  template <strata::CommContext Group>
  std::vector<float> block_backward(Group& tp, const block_ids& k, const block_saved& s, std::vector<float> dout, std::size_t n) {
    const std::size_t E = static_cast<std::size_t>(c_.embed), T = config::tokens, R = n * T, d = head_dim_;
    const std::size_t El = heads_ * d, Fl = mlp_;
    // MLP: out = x1 + fc2(gelu(fc1(ln2(x1)))).
    strata::tensor_parallel::reduce_from_group::backward(tp, std::span<const float>(dout));
    column_sums(dout, R, E, grad(k.fc2_b));
    gemm(true, false, E, Fl, R, dout.data(), s.m.data(), 0.0f, grad(k.fc2_w).data());
    std::vector<float> dz(R * Fl);
    gemm(false, false, R, Fl, E, dout.data(), value(k.fc2_w).data(), 0.0f, dz.data());
    for (std::size_t i = 0; i < dz.size(); ++i) dz[i] *= gelu_derivative(s.z[i]);
    column_sums(dz, R, Fl, grad(k.fc1_b));
    gemm(true, false, Fl, E, R, dz.data(), s.ln2.y.data(), 0.0f, grad(k.fc1_w).data());
    std::vector<float> dln2(R * E);
    gemm(false, false, R, E, Fl, dz.data(), value(k.fc1_w).data(), 0.0f, dln2.data());
    strata::tensor_parallel::copy_to_group::backward(tp, std::span<float>(dln2));
    std::vector<float> dx1 = dout;  // the residual path
    layer_norm_backward(dln2, s.ln2, value(k.ln2_g), grad(k.ln2_g), grad(k.ln2_b), dx1, R);
    // Attention: x1 = x + proj(attention(ln1(x))).
    strata::tensor_parallel::reduce_from_group::backward(tp, std::span<const float>(dx1));
    column_sums(dx1, R, E, grad(k.proj_b));
    gemm(true, false, E, El, R, dx1.data(), s.heads_out.data(), 0.0f, grad(k.proj_w).data());
    std::vector<float> dheads(R * El);
    gemm(false, false, R, El, E, dx1.data(), value(k.proj_w).data(), 0.0f, dheads.data());
    std::vector<float> dqkv(R * 3 * El, 0.0f), datt(T * T);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const auto ld = static_cast<int>(3 * El);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t h = 0; h < heads_; ++h) {
        const float* q = s.qkv.data() + i * T * 3 * El + h * 3 * d;
        const float* att = s.attention.data() + (i * heads_ + h) * T * T;
        const float* dho = dheads.data() + i * T * El + h * d;
        float* dq = dqkv.data() + i * T * 3 * El + h * 3 * d;
        // dV = att^T dO; d(att) = dO V^T.
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(d), static_cast<int>(T),
                    1.0f, att, static_cast<int>(T), dho, static_cast<int>(El), 0.0f, dq + 2 * d, ld);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(T), static_cast<int>(d),
                    1.0f, dho, static_cast<int>(El), q + 2 * d, ld, 0.0f, datt.data(), static_cast<int>(T));
        // Through the softmax: dS = att * (d(att) - rowsum(d(att) * att)), times the scale.
        for (std::size_t t = 0; t < T; ++t) {
          float dot = 0.0f;
          for (std::size_t u = 0; u < T; ++u) dot += datt[t * T + u] * att[t * T + u];
          for (std::size_t u = 0; u < T; ++u) datt[t * T + u] = att[t * T + u] * (datt[t * T + u] - dot) * scale;
        }
        // dQ = dS K; dK = dS^T Q.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(d), static_cast<int>(T),
                    1.0f, datt.data(), static_cast<int>(T), q + d, ld, 0.0f, dq, ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(d), static_cast<int>(T),
                    1.0f, datt.data(), static_cast<int>(T), q, ld, 0.0f, dq + d, ld);
      }
    column_sums(dqkv, R, 3 * El, grad(k.qkv_b));
    // A key's bias adds q.b to every score of a query's row, which the softmax ignores: its
    // gradient is zero, and what arithmetic leaves of it is rounding, which Adam would scale
    // up to full steps (and differently on every mesh). It is kept at exactly zero.
    for (std::size_t h = 0; h < heads_; ++h)
      std::fill_n(grad(k.qkv_b).begin() + static_cast<std::ptrdiff_t>(h * 3 * d + d), d, 0.0f);
    gemm(true, false, 3 * El, E, R, dqkv.data(), s.ln1.y.data(), 0.0f, grad(k.qkv_w).data());
    std::vector<float> dln1(R * E);
    gemm(false, false, R, E, 3 * El, dqkv.data(), value(k.qkv_w).data(), 0.0f, dln1.data());
    strata::tensor_parallel::copy_to_group::backward(tp, std::span<float>(dln1));
    std::vector<float> dx = dx1;
    layer_norm_backward(dln1, s.ln1, value(k.ln1_g), grad(k.ln1_g), grad(k.ln1_b), dx, R);
    return dx;
  }

  saved& saved_for(int micro) {
    for (saved& s : saved_)
      if (s.micro == micro) return s;
    return saved_.emplace_back(saved{micro});
  }

  config c_;
  int tp_;
  std::size_t heads_ = 0, head_dim_ = 0, mlp_ = 0;
  bool first_ = false, last_ = false;
  std::vector<parameter> params_;
  std::vector<block_ids> blocks_;
  std::size_t patch_w_ = 0, patch_b_ = 0, position_ = 0, norm_g_ = 0, norm_b_ = 0, head_w_ = 0, head_b_ = 0;
  std::vector<saved> saved_;
};

}  // namespace vit
