// Step 5: pipeline parallelism. The MLP 16 -> 32 -> 4 of step 4, cut between its
// layers: stage 0 (rank 0) holds the hidden layer, stage 1 (rank 1) the output layer and the
// loss. The pipeline driver moves each batch's micro-batches through the stages under 1F1B. It
// must learn the planted map, end where one rank training the whole model ends, and hold no
// more activations than 1F1B promises.
//
//   mpirun -np 2 build/docs/tutorial/tutorial_05_pipeline
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <strata/strata.hpp>

using namespace strata;

constexpr std::size_t widths[] = {16, 32, 4};  // the layers' inputs and outputs
constexpr std::size_t layers = std::size(widths) - 1;
constexpr int micro_batches = 8;
constexpr std::size_t rows = 32, micro_rows = rows / micro_batches;
constexpr int updates = 300;

// A value in [-1, 1) that depends only on (stream, index): each stage computes the data it
// needs and the initial weights of its layers without exchanging them.
float noise(std::uint32_t stream, std::uint32_t index) {
  std::uint32_t x = stream * 0x9E3779B9u ^ (index + 1) * 0x85EBCA6Bu;
  x ^= x >> 16, x *= 0x7FEB352Du, x ^= x >> 15, x *= 0x846CA68Bu, x ^= x >> 16;
  return static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
}

// Micro-batch `i` of batch `update`: random x, and the targets P x of a planted matrix P.
// Stage 0 reads the x, the last stage the targets.
struct micro_batch {
  std::vector<float> x, target;
  micro_batch(int update, int i) : x(micro_rows * widths[0]), target(micro_rows * widths[layers], 0.0f) {
    const auto first = static_cast<std::size_t>(i) * x.size();  // the micro-batch's place in the batch
    for (std::size_t k = 0; k < x.size(); ++k)
      x[k] = noise(100 + static_cast<std::uint32_t>(update), static_cast<std::uint32_t>(first + k));
    const std::size_t in = widths[0], out = widths[layers];
    for (std::size_t r = 0; r < micro_rows; ++r)
      for (std::size_t o = 0; o < out; ++o)
        for (std::size_t j = 0; j < in; ++j)
          target[r * out + o] += noise(3, static_cast<std::uint32_t>(o * in + j)) * x[r * in + j];
  }
};

using Whole = Strategy<Replicate, AllReduce<Ring>>;

// Layer `index` of the MLP: y = W x + b over a micro-batch, W [out, in].
struct dense {
  std::size_t index, in, out;
  std::vector<float> w, b, g_w, g_b;

  explicit dense(std::size_t l)
      : index(l), in(widths[l]), out(widths[l + 1]), w(in * out), b(out, 0.0f), g_w(w.size()), g_b(b.size()) {
    for (std::size_t k = 0; k < w.size(); ++k)
      w[k] = 0.25f * noise(static_cast<std::uint32_t>(1 + l), static_cast<std::uint32_t>(k));
  }
  std::vector<float> forward(std::span<const float> x) const {
    std::vector<float> y(micro_rows * out);
    for (std::size_t r = 0; r < micro_rows; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        y[r * out + o] = b[o];
        for (std::size_t i = 0; i < in; ++i) y[r * out + o] += w[o * in + i] * x[r * in + i];
      }
    return y;
  }
  // Writes this micro-batch's gradients of W and b; returns the gradient of x.
  std::vector<float> backward(std::span<const float> x, std::span<const float> dy) {
    std::vector<float> dx(micro_rows * in, 0.0f);
    std::ranges::fill(g_w, 0.0f), std::ranges::fill(g_b, 0.0f);
    for (std::size_t r = 0; r < micro_rows; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        g_b[o] += dy[r * out + o];
        for (std::size_t i = 0; i < in; ++i) {
          g_w[o * in + i] += dy[r * out + o] * x[r * in + i];
          dx[r * in + i] += w[o * in + i] * dy[r * out + o];
        }
      }
    return dx;
  }
};

// Stage `stage` of `stages`: an equal share of the layers, and what its forwards keep for
// their backwards, per micro-batch in flight.
struct stage_part {
  std::vector<dense> mine;
  std::map<int, std::vector<std::vector<float>>> kept;  // micro-batch -> each layer's input, the stage's output
  float loss = 0.0f;                                     // the last stage's, summed over micro-batches

  stage_part(int stage, int stages) {
    for (std::size_t l = layers * stage / stages; l < layers * (stage + 1) / stages; ++l) mine.emplace_back(l);
  }
  bool last() const { return mine.back().index + 1 == layers; }

  // A rank declares the variables of its stage only.
  model<Whole> declare() {
    model<Whole> m;
    for (dense& d : mine) {
      m.add(variable<Whole>("layer" + std::to_string(d.index) + ".w", d.w, d.g_w, {d.out, d.in}));
      m.add(variable<Whole>("layer" + std::to_string(d.index) + ".b", d.b, d.g_b, {d.out}));
    }
    return m;
  }

  // `in` is the previous stage's output (empty on the first stage, which reads x); `out` is
  // what this stage sends on (empty on the last stage).
  void forward(int update, int i, std::span<const float> in, std::span<float> out) {
    std::vector<std::vector<float>>& a = kept[i];
    a.push_back(in.empty() ? micro_batch(update, i).x : std::vector<float>(in.begin(), in.end()));
    for (const dense& d : mine) {
      a.push_back(d.forward(a.back()));
      if (d.index + 1 < layers) std::ranges::for_each(a.back(), [](float& v) { v = std::max(v, 0.0f); });  // relu
    }
    if (!out.empty()) std::ranges::copy(a.back(), out.begin());
  }

  // `out_grad` is the next stage's gradient of what this stage sent (empty on the last
  // stage, which starts from the loss); `in_grad` goes back to the previous stage.
  void backward(int update, int i, std::span<const float> out_grad, std::span<float> in_grad) {
    std::vector<std::vector<float>>& a = kept[i];
    std::vector<float> dy(out_grad.begin(), out_grad.end());
    if (last()) {  // mean squared error over the whole batch
      const micro_batch data(update, i);
      dy = a.back();
      for (std::size_t k = 0; k < dy.size(); ++k) {
        dy[k] -= data.target[k];
        loss += 0.5f * dy[k] * dy[k] / static_cast<float>(rows);
        dy[k] /= static_cast<float>(micro_rows);  // each micro-batch's mean; the executor averages the m of them
      }
    }
    for (std::size_t k = mine.size(); k-- > 0;) {
      if (mine[k].index + 1 < layers)
        for (std::size_t j = 0; j < dy.size(); ++j) dy[j] = a[k + 1][j] > 0.0f ? dy[j] : 0.0f;  // through relu
      dy = mine[k].backward(a[k], dy);
    }
    if (!in_grad.empty()) std::ranges::copy(dy, in_grad.begin());
    kept.erase(i);  // its activations are no longer needed
  }
};

struct trained {
  stage_part net;
  float loss;         // the last update's, on the last stage
  int max_in_flight;  // micro-batches whose activations this stage held at once
};

// Trains this rank's stage of the MLP on `grid`'s pipeline under 1F1B.
template <class Mesh>
trained train(Mesh& grid, bool report) {
  const int stages = grid.shape().pp;
  stage_part net(grid.coordinates().pp, stages);
  auto model = net.declare();
  // One step() per micro-batch's backward: the m-th averages the m gradients and updates.
  executor_options accumulate;
  accumulate.accumulation_steps = micro_batches;
  auto exec = make_executor(grid, model, optim::sgd{.lr = 0.05f, .momentum = 0.9f}, accumulate);
  // What crosses each cut per micro-batch: the activation of the layer before it.
  std::vector<std::size_t> boundaries;
  for (int s = 1; s < stages; ++s) boundaries.push_back(micro_rows * widths[layers * s / stages]);
  auto pipe = pipeline::make_driver(grid, boundaries);
  int max_in_flight = 0;
  for (int u = 0; u < updates; ++u) {
    net.loss = 0.0f;
    const pipeline::run_stats stats = pipe.run(
        pipeline::one_f_one_b{}, micro_batches,
        [&](int i, std::span<const float> in, std::span<float> out) { net.forward(u, i, in, out); },
        [&](int i, std::span<const float> out_grad, std::span<float> in_grad) {
          net.backward(u, i, out_grad, in_grad);
          exec.step();
        });
    max_in_flight = std::max(max_in_flight, stats.max_in_flight);
    if (report && u % 100 == 0) std::printf("update %3d  loss %.4f\n", u, net.loss);
  }
  return {net, net.loss, max_in_flight};
}

// The largest difference between this stage's layers and the same layers of the whole model.
float difference(const stage_part& stage, const stage_part& whole) {
  float largest = 0.0f;
  for (const dense& d : stage.mine) {
    const dense& w = whole.mine[d.index];
    for (std::size_t k = 0; k < d.w.size(); ++k) largest = std::max(largest, std::abs(d.w[k] - w.w[k]));
    for (std::size_t k = 0; k < d.b.size(); ++k) largest = std::max(largest, std::abs(d.b[k] - w.b[k]));
  }
  return largest;
}

// What each rank found, gathered by all so that they all exit alike.
struct finding {
  float loss, difference;
  int in_flight, bound;
};

int main(int argc, char** argv) {
  return run_main(argc, argv, [](mpi::context& ctx) {
    mesh grid(ctx, parse_mesh("pp=2", ctx.size()));
    const int stage = grid.coordinates().pp, stages = grid.shape().pp;
    const bool last = stage + 1 == stages;  // the stage that knows the loss reports
    if (last)
      std::printf("mesh %s, 1F1B, %d micro-batches: each stage idles %.3f of a step in theory\n",
                  to_string(grid.shape()).c_str(), micro_batches,
                  pipeline::ideal_bubble(stages, micro_batches));
    const trained piped = train(grid, last);

    // The reference: the whole model trained by this rank alone (a mesh of one rank).
    group_context<mpi::context> alone(ctx, ctx.rank(), 0);
    mesh one(alone, mesh_shape{});
    const trained whole = train(one, false);

    // 1F1B holds at most p-s micro-batches' activations on stage s; GPipe would hold all m.
    const finding mine{piped.loss, difference(piped.net, whole.net), piped.max_in_flight, stages - stage};
    std::vector<finding> all(static_cast<std::size_t>(ctx.size()));
    ctx.control().allgather(std::span<const finding>(&mine, 1), std::span<finding>(all));
    bool bounded = true;
    float loss = 0.0f, largest_difference = 0.0f;  // the loss: the last stage's, 0 elsewhere
    for (const finding& f : all) {
      bounded = bounded && f.in_flight <= f.bound;
      loss = std::max(loss, f.loss), largest_difference = std::max(largest_difference, f.difference);
    }
    const bool reached = loss < 0.02f && largest_difference < 1e-6f && bounded;
    if (last)
      std::printf("after %d updates: loss %.4f (goal: below 0.02), the stages differ from one rank's whole model by "
                  "%.2g (goal: below 1e-6), stage 0 held at most %d of %d micro-batches\n",
                  updates, loss, largest_difference, all.front().in_flight, micro_batches);
    return reached ? 0 : 1;
  });
}
