// Step 4: tensor parallelism. An MLP 16 -> 32 -> 4 whose weights are split over a tensor group of
// two ranks as Megatron-LM splits its MLPs: the first by its output units (column-parallel), the
// second by its input units (row-parallel). Each rank computes half of the hidden layer; one
// all-reduce puts the output together. It must learn a planted linear map and end where the
// same model trained whole on one rank ends.
//
//   mpirun -np 2 build/docs/tutorial/tutorial_04_tensor_parallel
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include <strata/strata.hpp>

using namespace strata;

constexpr std::size_t inputs = 16, hidden = 32, outputs = 4, rows = 32;  // rows: one batch
constexpr int updates = 300;

// A value in [-1, 1) that depends only on (stream, index): every rank computes the same data and
// the same initial weights without exchanging them.
float noise(std::uint32_t stream, std::uint32_t index) {
  std::uint32_t x = stream * 0x9E3779B9u ^ (index + 1) * 0x85EBCA6Bu;
  x ^= x >> 16, x *= 0x7FEB352Du, x ^= x >> 15, x *= 0x846CA68Bu, x ^= x >> 16;
  return static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
}

// TensorParallel<Axis>: each rank of the tensor group holds only its part of the variable, split
// along Axis. W1 [hidden, inputs] is split by rows (axis 0), W2 [outputs, hidden] by columns.
using Whole = Strategy<Replicate, AllReduce<Ring>>;
using ColumnParallel = Strategy<Replicate, AllReduce<Ring>, TensorParallel<0>>;
using RowParallel = Strategy<Replicate, AllReduce<Ring>, TensorParallel<1>>;

// One rank's part of y = W2 relu(W1 x + b1) + b2: the hidden units [part.begin, part.begin + part.count).
struct split_mlp {
  tensor_parallel::shard part;
  std::vector<float> w1, b1, w2, b2;          // [count, inputs], [count], [outputs, count], [outputs]
  std::vector<float> g_w1, g_b1, g_w2, g_b2;  // their gradients

  split_mlp(int tp, int rank)
      : part(tensor_parallel::shard_of(hidden, tp, rank, "the hidden layer")), w1(part.count * inputs),
        b1(part.count, 0.0f), w2(outputs * part.count), b2(outputs, 0.0f), g_w1(w1.size()), g_b1(b1.size()),
        g_w2(w2.size()), g_b2(b2.size()) {
    // This rank's part of the whole initial weights, so that every layout starts alike.
    for (std::size_t h = 0; h < part.count; ++h)
      for (std::size_t i = 0; i < inputs; ++i) w1[h * inputs + i] = 0.25f * noise(1, w1_index(h, i));
    for (std::size_t o = 0; o < outputs; ++o)
      for (std::size_t h = 0; h < part.count; ++h) w2[o * part.count + h] = 0.18f * noise(2, w2_index(o, h));
  }
  // Where this rank's elements of W1 and W2 sit in the whole matrices.
  std::size_t w1_index(std::size_t h, std::size_t i) const { return (part.begin + h) * inputs + i; }
  std::size_t w2_index(std::size_t o, std::size_t h) const { return o * hidden + part.begin + h; }

  // The variables this rank holds, with the shapes of its parts; b2 is whole on every rank.
  auto declare() {
    return make_model(variable<ColumnParallel>("w1", w1, g_w1, {part.count, inputs}),
                      variable<ColumnParallel>("b1", b1, g_b1, {part.count}),
                      variable<RowParallel>("w2", w2, g_w2, {outputs, part.count}),
                      variable<Whole>("b2", b2, g_b2, {outputs}));
  }

  // Forward and backward of one batch over the tensor group `tp`: fills the gradients of this
  // rank's part and returns the batch's loss (the same on every rank of the group).
  template <class Group>
  float forward_backward(Group& tp, std::span<const float> x, std::span<const float> target) {
    const std::size_t H = part.count;
    // Column-parallel W1: every rank reads the whole x and computes its own hidden units.
    tensor_parallel::copy_to_group::forward(tp, x);
    std::vector<float> a(rows * H);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t h = 0; h < H; ++h) {
        float z = b1[h];
        for (std::size_t i = 0; i < inputs; ++i) z += w1[h * inputs + i] * x[r * inputs + i];
        a[r * H + h] = std::max(z, 0.0f);
      }
    // Row-parallel W2: each rank's hidden units give a partial sum of y, and the all-reduce adds
    // them up. b2 comes after the sum, or it would be added once per rank.
    std::vector<float> y(rows * outputs, 0.0f);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < outputs; ++o)
        for (std::size_t h = 0; h < H; ++h) y[r * outputs + o] += w2[o * H + h] * a[r * H + h];
    tensor_parallel::reduce_from_group::forward(tp, std::span<float>(y));
    for (std::size_t k = 0; k < y.size(); ++k) y[k] += b2[k % outputs];

    // Mean squared error. dy is whole on every rank: the all-reduce's conjugate moves nothing.
    float loss = 0.0f;
    std::vector<float> dy(y.size());
    for (std::size_t k = 0; k < y.size(); ++k) {
      dy[k] = (y[k] - target[k]) / static_cast<float>(rows);
      loss += 0.5f * (y[k] - target[k]) * dy[k];
    }
    tensor_parallel::reduce_from_group::backward(tp, std::span<const float>(dy));
    for (std::vector<float>* g : {&g_w1, &g_b1, &g_w2, &g_b2}) std::ranges::fill(*g, 0.0f);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t o = 0; o < outputs; ++o) g_b2[o] += dy[r * outputs + o];
      for (std::size_t h = 0; h < H; ++h) {
        float dz = 0.0f;
        for (std::size_t o = 0; o < outputs; ++o) {
          g_w2[o * H + h] += dy[r * outputs + o] * a[r * H + h];
          dz += w2[o * H + h] * dy[r * outputs + o];
        }
        if (a[r * H + h] <= 0.0f) continue;  // relu passes no gradient here
        g_b1[h] += dz;
        for (std::size_t i = 0; i < inputs; ++i) g_w1[h * inputs + i] += dz * x[r * inputs + i];
      }
    }
    // x is data and needs no gradient. Were it a layer's output, each rank would hold its hidden
    // units' share of dx, and copy_to_group::backward would all-reduce the shares here.
    return loss;
  }
};

// Batch `update`: random x and the targets P x of a planted matrix P. Every rank of a tensor
// group must read the same batch: here it depends on the update alone.
void read_batch(int update, std::vector<float>& x, std::vector<float>& target) {
  for (std::size_t k = 0; k < rows * inputs; ++k)
    x[k] = noise(100 + static_cast<std::uint32_t>(update), static_cast<std::uint32_t>(k));
  std::ranges::fill(target, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < outputs; ++o)
      for (std::size_t i = 0; i < inputs; ++i)
        target[r * outputs + o] += noise(3, static_cast<std::uint32_t>(o * inputs + i)) * x[r * inputs + i];
}

struct trained {
  split_mlp net;
  float loss;  // the last update's
};

// Trains this rank's part of the MLP over `grid`'s tensor group.
template <class Mesh>
trained train(Mesh& grid, bool report) {
  split_mlp net(grid.shape().tp, grid.coordinates().tp);
  auto model = net.declare();
  auto exec = make_executor(grid, model, optim::sgd{.lr = 0.05f, .momentum = 0.9f});
  std::vector<float> x(rows * inputs), target(rows * outputs);
  float loss = 0.0f;
  for (int u = 0; u < updates; ++u) {
    read_batch(u, x, target);
    loss = net.forward_backward(grid.tensor(), x, target);
    exec.step();  // each rank updates its part with its part's gradient
    if (report && u % 100 == 0) std::printf("update %3d  loss %.4f\n", u, loss);
  }
  return {net, loss};
}

// The largest difference between this rank's part and the same part of the whole model.
float difference(const split_mlp& mine, const split_mlp& whole) {
  float largest = 0.0f;
  const auto compare = [&](float a, float b) { largest = std::max(largest, std::abs(a - b)); };
  for (std::size_t h = 0; h < mine.part.count; ++h) {
    compare(mine.b1[h], whole.b1[mine.part.begin + h]);
    for (std::size_t i = 0; i < inputs; ++i) compare(mine.w1[h * inputs + i], whole.w1[mine.w1_index(h, i)]);
    for (std::size_t o = 0; o < outputs; ++o) compare(mine.w2[o * mine.part.count + h], whole.w2[mine.w2_index(o, h)]);
  }
  for (std::size_t o = 0; o < outputs; ++o) compare(mine.b2[o], whole.b2[o]);
  return largest;
}

int main(int argc, char** argv) {
  return run_main(argc, argv, [](mpi::context& ctx) {
    mesh grid(ctx, parse_mesh("tp=2", ctx.size()));
    const bool report = ctx.rank() == 0;
    if (report)
      std::printf("mesh %s: each rank holds %zu of the %zu hidden units\n", to_string(grid.shape()).c_str(),
                  hidden / static_cast<std::size_t>(grid.shape().tp), hidden);
    const trained split = train(grid, report);

    // The reference: the same model, whole, trained by this rank alone (a mesh of one rank).
    group_context<mpi::context> alone(ctx, ctx.rank(), 0);
    mesh one(alone, mesh_shape{});
    const trained whole = train(one, false);

    // Every rank hears what each found, so that all decide alike.
    const float found[] = {split.loss, difference(split.net, whole.net)};
    std::vector<float> all(2 * static_cast<std::size_t>(ctx.size()));
    ctx.control().allgather(std::span<const float>(found), std::span<float>(all));
    float loss = 0.0f, largest = 0.0f;
    for (std::size_t r = 0; r < all.size(); r += 2)
      loss = std::max(loss, all[r]), largest = std::max(largest, all[r + 1]);
    if (report)
      std::printf("after %d updates: loss %.4f (goal: below 0.02), the parts differ from one rank's whole model by "
                  "%.2g (goal: below 1e-4)\n",
                  updates, loss, largest);
    return loss < 0.02f && largest < 1e-4f ? 0 : 1;
  });
}
