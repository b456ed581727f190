// The pipeline driver and the tensor-parallel helpers over a mesh of sim::context, ranks as
// threads on simulated devices: each stage's and layer's "kernels" run on the rank's
// compute stream, the driver's messages and the all-reduces on the communicators' streams,
// under random stream delays, with freed memory poisoned. Each case also runs on loopback
// (host memory, the callbacks done when they return), and the two must agree bit for bit:
// a send that reads an output before its kernel wrote it, a buffer freed or overwritten
// while a kernel still reads it, or an all-reduce that reads before the kernel that wrote
// its input changes the numbers.
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include "deterministic.hpp"
#include "strata/comm/loopback/loopback.hpp"
#include "strata/comm/sim/sim.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"
#include "strata/parallel/tensor_parallel.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

using strata_test::values;

/// Small integers in [-k, k]: their sums are exact in any order.
std::vector<float> integers(std::size_t n, std::uint32_t seed, int k) {
  std::vector<float> v = values(n, seed);
  for (float& x : v) x = std::round(x * static_cast<float>(k));
  return v;
}

/// Where the callbacks' work runs. Host: at once, on host memory (loopback).
struct host_side {
  explicit host_side(loopback::context&) {}
  std::monostate stream() const { return {}; }
  template <class Kernel>
  void launch(const char*, Kernel&& kernel) {
    kernel();
  }
  std::vector<float> buffer(std::size_t n) { return std::vector<float>(n); }
  std::vector<float> read(const std::vector<float>& b) { return b; }
};

/// Simulated device: queued on the rank's compute stream; buffers in its memory.
struct device_side {
  explicit device_side(sim::context& c) : gpu(&c.device()), compute(c.device(), "compute") {}
  sim::stream_t stream() const { return compute; }
  template <class Kernel>
  void launch(const char* name, Kernel&& kernel) {
    sim::launch(compute, name, std::forward<Kernel>(kernel));
  }
  sim::device_buffer<float> buffer(std::size_t n) {
    sim::device_buffer<float> b(n, compute);
    sim::memset_async(b.data(), 0, n * sizeof(float), compute);
    return b;
  }
  std::vector<float> read(const sim::device_buffer<float>& b) {
    gpu->synchronize(compute);
    return {b.data(), b.data() + b.size()};
  }
  sim::device* gpu;
  sim::owned_stream compute;
};

template <class Context>
using side_of = std::conditional_t<std::is_same_v<Context, sim::context>, device_side, host_side>;

/// Runs body(context&, side&) on `ranks` ranks of loopback or of the simulated device.
template <class Context, class Body>
void run_on(int ranks, Body body) {
  if constexpr (std::is_same_v<Context, sim::context>) {
    sim::run(ranks, {.seed = 7}, [&](sim::context& c, sim::device&) {
      device_side side(c);
      body(c, side);
    });
  } else {
    loopback::run(ranks, [&](loopback::context& c) {
      host_side side(c);
      body(c, side);
    });
  }
}

constexpr std::size_t width = 48;  // one micro-batch's activation

/// Micro-batch i's data, read by the first stage.
std::vector<float> data(int i) { return values(width, 7u * static_cast<std::uint32_t>(i) + 1u); }

/// The pipeline driver of `grid`: on the simulated device, with the compute stream.
template <class Mesh, class Side>
auto driver_of(Mesh& grid, Side& side, std::vector<std::size_t> sizes) {
  if constexpr (std::is_same_v<Side, device_side>) return pipeline::make_driver(grid, std::move(sizes), side.stream());
  else return pipeline::make_driver(grid, std::move(sizes));
}

/// One pipeline step over `stages` ranks: stage s multiplies its input a (on the first
/// stage micro-batch i's data plus 0.5) by its weights w_s; the last stage's loss is half
/// the squared norm of w_s * a. Returns every stage's weight gradient, accumulated over the
/// micro-batches, by stage.
template <class Context, class Schedule>
std::vector<std::vector<float>> pipeline_gradients(int stages, int micro_batches) {
  std::vector<std::vector<float>> out(static_cast<std::size_t>(stages));
  run_on<Context>(stages, [&](Context& world, auto& side) {
    mesh grid(world, mesh_shape{1, 1, stages});
    auto pipe = driver_of(grid, side, std::vector<std::size_t>(static_cast<std::size_t>(stages - 1), width));
    const std::vector<float> w = values(width, 100u + static_cast<std::uint32_t>(pipe.stage()));
    auto grad = side.buffer(width);
    const bool first = pipe.first(), last = pipe.last();
    std::vector<std::span<const float>> inputs(static_cast<std::size_t>(micro_batches));  // valid until backward(i)
    pipe.run(
        Schedule{}, micro_batches,
        [&](int i, std::span<const float> in, std::span<float> y) {
          inputs[static_cast<std::size_t>(i)] = in;
          if (last) return;
          side.launch("forward", [first, in, y, w = w.data(), x = data(i)] {
            for (std::size_t j = 0; j < width; ++j) y[j] = w[j] * (first ? x[j] + 0.5f : in[j]);
          });
        },
        [&](int i, std::span<const float> dy, std::span<float> dx) {
          side.launch("backward", [first, last, dy, dx, in = inputs[static_cast<std::size_t>(i)], g = grad.data(),
                                   w = w.data(), x = data(i)] {
            for (std::size_t j = 0; j < width; ++j) {
              const float a = first ? x[j] + 0.5f : in[j];
              const float d = last ? w[j] * a : dy[j];  // the loss's gradient is the output itself
              g[j] += a * d;
              if (!first) dx[j] = w[j] * d;
            }
          });
        });
    out[static_cast<std::size_t>(pipe.stage())] = side.read(grad);
  });
  return out;
}

/// An evaluation (forwards only) over `stages` ranks: the last stage writes each
/// micro-batch's loss. The driver receives every micro-batch into one buffer.
template <class Context>
std::vector<float> pipeline_losses(int stages, int micro_batches) {
  std::vector<float> out;
  run_on<Context>(stages, [&](Context& world, auto& side) {
    mesh grid(world, mesh_shape{1, 1, stages});
    auto pipe = driver_of(grid, side, std::vector<std::size_t>(static_cast<std::size_t>(stages - 1), width));
    const std::vector<float> w = values(width, 100u + static_cast<std::uint32_t>(pipe.stage()));
    auto losses = side.buffer(static_cast<std::size_t>(micro_batches));
    const bool first = pipe.first(), last = pipe.last();
    pipe.run_forward(micro_batches, [&](int i, std::span<const float> in, std::span<float> y) {
      side.launch("forward", [first, last, i, in, y, w = w.data(), x = data(i), loss = losses.data()] {
        float sum = 0.0f;
        for (std::size_t j = 0; j < width; ++j) {
          const float out = w[j] * (first ? x[j] + 0.5f : in[j]);
          if (last) sum += 0.5f * out * out;
          else y[j] = out;
        }
        if (last) loss[i] = sum;
      });
    });
    if (last) out = side.read(losses);
  });
  return out;
}

constexpr std::size_t features = 8, hidden = 16;  // the block's input and hidden widths

/// What a tensor-parallel block computed on one rank.
struct block_result {
  std::vector<float> output, input_grad, hidden_weight_grad;
};

/// A column-parallel layer (W1, [hidden, features], rows split) then a row-parallel one
/// (W2, [features, hidden], columns split) over a tensor group of `ranks`, `steps` times
/// on integer data: forward's sum and backward's all-reduce, each fed by a kernel on the
/// compute stream. The loss is half the output's squared norm.
template <class Context>
std::vector<block_result> tensor_parallel_block(int ranks, int steps) {
  std::vector<block_result> out(static_cast<std::size_t>(ranks));
  run_on<Context>(ranks, [&](Context& world, auto& side) {
    mesh grid(world, mesh_shape{1, ranks, 1});
    auto& tp = grid.tensor();
    const int r = tp.rank();
    const tensor_parallel::shard mine = tensor_parallel::shard_of(hidden, ranks, r, "the hidden layer");
    const std::vector<float> w1 = integers(hidden * features, 11, 2), w2 = integers(features * hidden, 12, 2);
    auto y = side.buffer(features), dx = side.buffer(features), h = side.buffer(mine.count),
         g1 = side.buffer(mine.count * features);
    const auto stream = side.stream();
    constexpr bool on_host = std::is_same_v<std::remove_const_t<decltype(stream)>, std::monostate>;
    const std::span<float> y_all(y.data(), y.size()), dx_all(dx.data(), dx.size());
    block_result& result = out[static_cast<std::size_t>(r)];
    for (int step = 0; step < steps; ++step) {
      const std::vector<float> x = integers(features, 20u + static_cast<std::uint32_t>(step), 3);
      tensor_parallel::copy_to_group::forward(tp, x);
      // h = W1_r x; partial y = W2_r h (this rank's columns of W2).
      side.launch("column and row layers", [x, h = h.data(), y = y.data(), w1 = w1.data(), w2 = w2.data(), mine] {
        for (std::size_t k = 0; k < mine.count; ++k) {
          float sum = 0.0f;
          for (std::size_t j = 0; j < features; ++j) sum += w1[(mine.begin + k) * features + j] * x[j];
          h[k] = sum;
        }
        for (std::size_t i = 0; i < features; ++i) {
          float sum = 0.0f;
          for (std::size_t k = 0; k < mine.count; ++k) sum += w2[i * hidden + mine.begin + k] * h[k];
          y[i] = sum;
        }
      });
      if constexpr (on_host) tensor_parallel::reduce_from_group::forward(tp, y_all);
      else tensor_parallel::reduce_from_group::forward(tp, y_all, stream);
      tensor_parallel::reduce_from_group::backward(tp, std::span<const float>(y_all));
      // dy = y; dh = W2_r^T dy; partial dx = W1_r^T dh; the hidden weights' gradient dh x^T.
      side.launch("backward", [x, y = y.data(), dx = dx.data(), g1 = g1.data(), w1 = w1.data(), w2 = w2.data(), mine] {
        std::vector<float> dh(mine.count);
        for (std::size_t k = 0; k < mine.count; ++k) {
          float sum = 0.0f;
          for (std::size_t i = 0; i < features; ++i) sum += w2[i * hidden + mine.begin + k] * y[i];
          dh[k] = sum;
          for (std::size_t j = 0; j < features; ++j) g1[k * features + j] += sum * x[j];
        }
        for (std::size_t j = 0; j < features; ++j) {
          float sum = 0.0f;
          for (std::size_t k = 0; k < mine.count; ++k) sum += w1[(mine.begin + k) * features + j] * dh[k];
          dx[j] = sum;
        }
      });
      if constexpr (on_host) tensor_parallel::copy_to_group::backward(tp, dx_all);
      else tensor_parallel::copy_to_group::backward(tp, dx_all, stream);
      const std::vector<float> got_y = side.read(y), got_dx = side.read(dx);
      result.output.insert(result.output.end(), got_y.begin(), got_y.end());
      result.input_grad.insert(result.input_grad.end(), got_dx.begin(), got_dx.end());
    }
    result.hidden_weight_grad = side.read(g1);
  });
  return out;
}

/// The block computed whole, on one thread.
block_result tensor_parallel_reference(int steps) {
  const std::vector<float> w1 = integers(hidden * features, 11, 2), w2 = integers(features * hidden, 12, 2);
  block_result whole;
  std::vector<float> g1(hidden * features, 0.0f);
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> x = integers(features, 20u + static_cast<std::uint32_t>(step), 3);
    std::vector<float> h(hidden, 0.0f), y(features, 0.0f), dh(hidden, 0.0f), dx(features, 0.0f);
    for (std::size_t k = 0; k < hidden; ++k)
      for (std::size_t j = 0; j < features; ++j) h[k] += w1[k * features + j] * x[j];
    for (std::size_t i = 0; i < features; ++i)
      for (std::size_t k = 0; k < hidden; ++k) y[i] += w2[i * hidden + k] * h[k];
    for (std::size_t k = 0; k < hidden; ++k)
      for (std::size_t i = 0; i < features; ++i) dh[k] += w2[i * hidden + k] * y[i];
    for (std::size_t k = 0; k < hidden; ++k)
      for (std::size_t j = 0; j < features; ++j) g1[k * features + j] += dh[k] * x[j];
    for (std::size_t j = 0; j < features; ++j)
      for (std::size_t k = 0; k < hidden; ++k) dx[j] += w1[k * features + j] * dh[k];
    whole.output.insert(whole.output.end(), y.begin(), y.end());
    whole.input_grad.insert(whole.input_grad.end(), dx.begin(), dx.end());
  }
  whole.hidden_weight_grad = g1;
  return whole;
}

}  // namespace

TEMPLATE_TEST_CASE("the pipeline's gradients on the simulated device equal loopback's, bit for bit", "[pipeline]",
                   pipeline::gpipe, pipeline::one_f_one_b) {
  for (const int stages : {2, 4}) {
    const auto host = pipeline_gradients<loopback::context, TestType>(stages, 6);
    for (const auto& g : host)
      for (float v : g) REQUIRE((std::isfinite(v) && v != 0.0f));
    for (int repeat = 0; repeat < 3; ++repeat) {
      INFO(stages << " stages, run " << repeat);
      REQUIRE(pipeline_gradients<sim::context, TestType>(stages, 6) == host);
    }
  }
}

TEST_CASE("the pipeline's evaluation on the simulated device equals loopback's, bit for bit", "[pipeline]") {
  for (const int stages : {2, 3}) {
    const std::vector<float> host = pipeline_losses<loopback::context>(stages, 8);
    REQUIRE(host.size() == 8);
    for (int repeat = 0; repeat < 3; ++repeat) {
      INFO(stages << " stages, run " << repeat);
      REQUIRE(pipeline_losses<sim::context>(stages, 8) == host);
    }
  }
}

TEST_CASE("a tensor-parallel block on the simulated device computes the whole block's numbers", "[tensor_parallel]") {
  constexpr int steps = 6;
  const block_result whole = tensor_parallel_reference(steps);
  for (const int ranks : {2, 4}) {
    INFO(ranks << " tensor-parallel ranks");
    for (const auto& ranks_results :
         {tensor_parallel_block<loopback::context>(ranks, steps), tensor_parallel_block<sim::context>(ranks, steps)}) {
      for (int r = 0; r < ranks; ++r) {
        const block_result& got = ranks_results[static_cast<std::size_t>(r)];
        REQUIRE(got.output == whole.output);
        REQUIRE(got.input_grad == whole.input_grad);
        const tensor_parallel::shard mine = tensor_parallel::shard_of(hidden, ranks, r, "the hidden layer");
        REQUIRE(got.hidden_weight_grad ==
                std::vector<float>(whole.hidden_weight_grad.begin() + static_cast<std::ptrdiff_t>(mine.begin * features),
                                   whole.hidden_weight_grad.begin() +
                                       static_cast<std::ptrdiff_t>((mine.begin + mine.count) * features)));
      }
    }
  }
}

TEST_CASE("model parallelism on a device refuses a null compute stream", "[pipeline][tensor_parallel]") {
  std::string pipeline_error, tensor_error;
  sim::run(2, {}, [&](sim::context& world, sim::device&) {
    mesh grid(world, mesh_shape{1, 1, 2});
    try {
      auto pipe = pipeline::make_driver(grid, {4}, sim::stream_t{});
    } catch (const usage_error& e) {
      if (world.rank() == 0) pipeline_error = e.what();
    }
    std::vector<float> data(4);
    try {
      tensor_parallel::reduce_from_group::forward(grid.pipeline(), std::span<float>(data), sim::stream_t{});
    } catch (const usage_error& e) {
      if (world.rank() == 0) tensor_error = e.what();
    }
  });
  REQUIRE_THAT(pipeline_error, Contains("pipeline::driver: no stream given"));
  REQUIRE_THAT(tensor_error, Contains("tensor_parallel::reduce_from_group::forward: no stream given"));
}
