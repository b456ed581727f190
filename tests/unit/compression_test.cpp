// Compression: the 16-bit types, each codec's numerics against a reference, the
// error-feedback invariant, overflow, non-finite gradients, and composition with buckets,
// accumulation and partitioning.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "conformance/cases.hpp"

using namespace strata;

TEST_CASE("half and bfloat16 round to nearest even and keep infinities", "[compression][float16]") {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {  // every half survives a round trip
    half h;
    h.bits = static_cast<std::uint16_t>(bits);
    const float f = static_cast<float>(h);
    if (!std::isnan(f)) REQUIRE(half(f).bits == bits);
  }
  CHECK(static_cast<float>(half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(static_cast<float>(half(65520.0f))));  // rounds up past the largest half
  CHECK(static_cast<float>(half(1.0f + 0x1p-11f)) == 1.0f);  // a tie rounds to even
  CHECK(static_cast<float>(half(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);
  CHECK(static_cast<float>(half(0x1p-24f)) == 0x1p-24f);  // smallest subnormal
  CHECK(std::isnan(static_cast<float>(half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(static_cast<float>(bfloat16(3.14159265f)) == 3.140625f);
  CHECK(static_cast<float>(bfloat16(1e38f)) == Approx(1e38f).epsilon(1e-2));  // float's range
  CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // The portable conversions (used on GPUs and hosts without _Float16) agree with the
  // ones in use here, for every half and for random floats.
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const float f = detail::half_bits_to_float(static_cast<std::uint16_t>(bits));
    const float g = detail::half_bits_to_float_portable(static_cast<std::uint16_t>(bits));
    REQUIRE((std::bit_cast<std::uint32_t>(f) == std::bit_cast<std::uint32_t>(g) || (std::isnan(f) && std::isnan(g))));
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(f)) continue;
    REQUIRE(detail::float_to_half_bits(f) == detail::float_to_half_bits_portable(f));
  }
}

namespace {

/// Runs one bucket through a reducer on `ranks` loopback ranks; `fill(rank, values)` sets
/// each rank's gradient. Returns every rank's result and, for single-rank runs, the
/// reducer's residual.
template <class Compression, class Algorithm = Ring>
std::vector<std::vector<float>> reduce_bucket(int ranks, std::size_t n, auto fill, float scale, std::int64_t update = 1000,
                                              int warmup = 0, std::size_t rows = 0) {
  std::vector<std::vector<float>> results(static_cast<std::size_t>(ranks));
  loopback::run(ranks, [&](loopback::context& ctx) {
    std::vector<float> g(n);
    fill(ctx.rank(), g);
    const std::size_t r = rows ? rows : n;
    const std::vector<sync::bucket_item> items = {{"w", 0, r, n / r}};
    sync::compression_options options;
    options.powersgd_warmup_steps = warmup;
    sync::bucket_reducer<Compression, Algorithm, loopback::communicator> reduce({}, options, items);
    const sync::span_list<float> grads({std::span<float>(g)});
    reduce(ctx.collectives(), sync::bucket_view{grads, items, update}, scale);
    results[static_cast<std::size_t>(ctx.rank())] = g;
  });
  return results;
}

}  // namespace

namespace {

/// The ring codec's steps written one value at a time: scaled, plus the residual, plus what
/// arrived, rounded to W; the residual keeps what rounding lost; a complete sum keeps the
/// rounded value. (Built for the default target, without FMA, the two agree bit for bit.)
template <class W>
void codec_step_by_value(std::vector<float>& d, std::vector<W>& w, const W* in, std::vector<float>* residual,
                         float scale, bool complete) {
  for (std::size_t k = 0; k < d.size(); ++k) {
    float value = d[k] * scale;
    if (residual) value += (*residual)[k];
    if (in) value += static_cast<float>(in[k]);
    w[k] = W(value);
    if (residual) (*residual)[k] = value - static_cast<float>(w[k]);
    if (complete) d[k] = static_cast<float>(w[k]);
  }
}

template <class W>
void codec_matches_value_by_value(bool feedback) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{1003}}) {
    std::mt19937 engine(static_cast<unsigned>(n));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> d(n), residual(n), expected_residual;
    std::vector<W> in(n), w(n), expected_w(n);
    for (std::size_t k = 0; k < n; ++k) {
      d[k] = normal(engine);
      in[k] = W(normal(engine));
      residual[k] = feedback ? normal(engine) * 1e-3f : 0.0f;
    }
    if (n > 3) d[3] = std::numeric_limits<float>::infinity();  // flagged once the sum completes
    expected_residual = residual;
    std::vector<float> expected_d = d;
    const sync::ring_codec<float, W> codec{0.25f, feedback ? std::span<float>(residual) : std::span<float>()};
    std::vector<float>* const kept = feedback ? &expected_residual : nullptr;
    INFO("n = " << n << (feedback ? ", error feedback" : ""));
    codec.enter(d, w, 0);
    codec_step_by_value(expected_d, expected_w, static_cast<const W*>(nullptr), kept, 0.25f, false);
    for (const bool complete : {false, true}) {
      codec.add(d, w, in.data(), 0, complete);
      codec_step_by_value(expected_d, expected_w, in.data(), kept, 0.25f, complete);
      for (std::size_t k = 0; k < n; ++k) {
        REQUIRE(w[k].bits == expected_w[k].bits);
        REQUIRE(std::bit_cast<std::uint32_t>(d[k]) == std::bit_cast<std::uint32_t>(expected_d[k]));
        if (feedback && std::isfinite(expected_residual[k])) REQUIRE(residual[k] == expected_residual[k]);
      }
    }
    CHECK(codec.nonfinite == (n > 3));
    std::ranges::fill(d, 0.0f);
    const sync::ring_codec<float, W> decoder{};
    decoder.store(d, w);
    for (std::size_t k = 0; k < n; ++k)
      REQUIRE(std::bit_cast<std::uint32_t>(d[k]) == std::bit_cast<std::uint32_t>(static_cast<float>(w[k])));
    CHECK(decoder.nonfinite == (n > 3));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("the ring's 16-bit codec computes what its steps do value by value", "[compression]", half,
                   bfloat16) {
  codec_matches_value_by_value<TestType>(false);
  codec_matches_value_by_value<TestType>(true);
}

TEST_CASE("a ring given a wire of another length than its data refuses, naming both", "[compression][errors]") {
  std::string refusal;
  loopback::run(1, [&](auto& ctx) {
    std::vector<float> data(10, 1.0f);
    std::vector<half> wire(9);
    const sync::ring_codec<float, half> codec{0.5f, {}};
    sync::ring_workspace<loopback::communicator, half> work;
    try {
      sync::detail::ring_run<loopback::communicator, float, half> run(
          ctx.collectives(), sync::span_list<float>({std::span<float>(data)}), codec, work, {4, 2}, 0, 1, wire);
    } catch (const usage_error& e) {
      refusal = e.what();
    }
  });
  CHECK_THAT(refusal, Catch::Contains("a ring over 10 elements was given a wire of 9"));
}

TEST_CASE("FP16 and BF16 average within the wire type's rounding, identically on every rank", "[compression]") {
  auto fill = [](int rank, std::vector<float>& g) {
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.001f * static_cast<float>(i % 1000) + static_cast<float>(rank);
  };
  for (int ranks : {1, 2, 3, 4}) {
    const auto h = reduce_bucket<Compress<FP16>>(ranks, 5000, fill, 1.0f / static_cast<float>(ranks));
    const auto b = reduce_bucket<Compress<BF16>, Native>(ranks, 5000, fill, 1.0f / static_cast<float>(ranks));
    for (std::size_t i = 0; i < 5000; ++i) {
      const double exact = 0.001 * static_cast<double>(i % 1000) + (ranks - 1) / 2.0;
      CHECK(std::abs(h[0][i] - exact) <= 2e-3 * exact * ranks + 1e-7);
      CHECK(std::abs(b[0][i] - exact) <= 1e-2 * exact * ranks + 1e-7);
    }
    for (int r = 1; r < ranks; ++r) {
      CHECK(h[static_cast<std::size_t>(r)] == h[0]);
      CHECK(b[static_cast<std::size_t>(r)] == b[0]);
    }
  }
}

TEST_CASE("FP16: large gradients on many ranks stay finite because they are scaled first", "[compression]") {
  // 60000 on each of 4 ranks: the plain sum (240000) overflows half; the average does not.
  const auto result = reduce_bucket<Compress<FP16>>(4, 100, [](int, std::vector<float>& g) { std::ranges::fill(g, 60000.0f); },
                                                    0.25f);
  for (float x : result[0]) CHECK(x == 60000.0f);
}

TEST_CASE("error feedback: what was sent plus what is kept is the input", "[compression]") {
  std::vector<float> input(4096);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (float& x : input) x = normal(rng);
  const std::vector<sync::bucket_item> items = {{"w", 0, 64, 64}};
  loopback::run(1, [&](loopback::context& ctx) {
    SECTION("FP16") {
      std::vector<float> g = input;
      sync::bucket_reducer<Compress<FP16, ErrorFeedback>, Ring, loopback::communicator> reduce({}, {}, items);
      reduce(ctx.collectives(), {sync::span_list<float>({std::span<float>(g)}), items, 1}, 1.0f);
      for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] + reduce.residual()[i] == input[i]);  // exact
    }
    SECTION("TopK") {
      std::vector<float> g = input;
      sync::bucket_reducer<Compress<TopK<0.01>, ErrorFeedback>, Ring, loopback::communicator> reduce({}, {}, items);
      reduce(ctx.collectives(), {sync::span_list<float>({std::span<float>(g)}), items, 1}, 1.0f);
      std::size_t sent = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        CHECK(g[i] + reduce.residual()[i] == input[i]);  // exact: each entry is in one of the two
        sent += g[i] != 0.0f;
      }
      CHECK(sent == 41);  // ceil(0.01 * 4096)
    }
    SECTION("PowerSGD") {
      std::vector<float> g = input;
      sync::bucket_reducer<Compress<PowerSGD<4>, ErrorFeedback>, Ring, loopback::communicator> reduce(
          {}, sync::compression_options{.powersgd_warmup_steps = 0}, items);
      reduce(ctx.collectives(), {sync::span_list<float>({std::span<float>(g)}), items, 1}, 1.0f);
      for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] + reduce.residual()[i] == Approx(input[i]).margin(1e-5));
    }
  });
}

TEST_CASE("TopK sends each rank's largest entries and sums them on every rank", "[compression]") {
  // Rank r's entries: small noise plus one large spike at position 10 r + 1.
  auto fill = [](int rank, std::vector<float>& g) {
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.001f * static_cast<float>(i % 7);
    g[static_cast<std::size_t>(10 * rank + 1)] = 100.0f + static_cast<float>(rank);
  };
  const auto result = reduce_bucket<Compress<TopK<0.01>>>(3, 100, fill, 1.0f);  // k = 1
  for (const auto& g : result) {
    CHECK(g[1] == 100.0f);
    CHECK(g[11] == 101.0f);
    CHECK(g[21] == 102.0f);
    CHECK(std::count(g.begin(), g.end(), 0.0f) == 97);
    CHECK(g == result[0]);
  }
}

TEST_CASE("PowerSGD recovers a low-rank average and warms up with a plain all-reduce", "[compression]") {
  // Every rank's gradient is a different multiple of one rank-2 matrix: the average has
  // rank 2 and a rank-4 approximation is exact up to rounding.
  const std::size_t rows = 40, cols = 30;
  auto fill = [&](int rank, std::vector<float>& g) {
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t k = 0; k < cols; ++k)
        g[i * cols + k] = static_cast<float>(rank + 1) *
                          (std::sin(0.1f * static_cast<float>(i)) * std::cos(0.2f * static_cast<float>(k)) +
                           0.5f * static_cast<float>(i % 3) * static_cast<float>(k % 4));
  };
  std::vector<float> average(rows * cols);
  std::vector<float> one(rows * cols);
  fill(0, one);
  for (std::size_t i = 0; i < one.size(); ++i) average[i] = one[i] * 2.0f;  // mean of 1..3
  const auto compressed = reduce_bucket<Compress<PowerSGD<4>>>(3, rows * cols, fill, 1.0f / 3.0f, 5, 0, rows);
  const auto warming = reduce_bucket<Compress<PowerSGD<4>>>(3, rows * cols, fill, 1.0f / 3.0f, 5, 10, rows);
  for (std::size_t i = 0; i < average.size(); ++i) {
    CHECK(compressed[0][i] == Approx(average[i]).margin(2e-3));
    CHECK(warming[0][i] == Approx(average[i]).epsilon(1e-6));
  }
  CHECK(compressed[1] == compressed[0]);
  CHECK(compressed[2] == compressed[0]);
}

TEST_CASE("low-rank helpers: orthonormal columns and exact products", "[compression]") {
  const std::size_t rows = 6, r = 3;
  std::vector<float> p(rows * r);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>((i * 7 + i / 3) % 5) + (i % 4 == 0 ? 2.0f : 0.0f);
  sync::low_rank::orthogonalize(p, rows, r);
  for (std::size_t a = 0; a < r; ++a)
    for (std::size_t b = 0; b < r; ++b) {
      float dot = 0.0f;
      for (std::size_t i = 0; i < rows; ++i) dot += p[i * r + a] * p[i * r + b];
      CHECK(dot == Approx(a == b ? 1.0f : 0.0f).margin(1e-5));
    }
  const std::vector<float> m = {1, 2, 3, 4, 5, 6};  // 2 x 3
  const std::vector<float> q = {1, 0, 0, 1, 1, 1};  // 3 x 2
  std::vector<float> out(4), back(6);
  sync::low_rank::multiply(m, q, out, 2, 3, 2);
  CHECK(out == std::vector<float>{4, 5, 10, 11});
  sync::low_rank::multiply_transposed(m, out, back, 2, 3, 2);
  CHECK(back == std::vector<float>{44, 49, 58, 65, 72, 81});
  sync::low_rank::reconstruct(out, q, back, 2, 3, 2);
  CHECK(back == std::vector<float>{4, 5, 9, 10, 11, 21});
}

TEST_CASE("compressed and partitioned strategies keep replicas bitwise identical", "[compression][executor]") {
  for (int ranks : {2, 3}) {
    INFO("ranks = " << ranks);
    using conformance::replicas_stay_bitwise_identical;
    CHECK_NOTHROW(loopback::run(ranks, replicas_stay_bitwise_identical<Ring, loopback::context, Compress<FP16>>));
    CHECK_NOTHROW(loopback::run(ranks, replicas_stay_bitwise_identical<Native, loopback::context, Compress<BF16, ErrorFeedback>>));
    CHECK_NOTHROW(loopback::run(ranks, replicas_stay_bitwise_identical<Ring, loopback::context, Compress<TopK<0.05>, ErrorFeedback>>));
    CHECK_NOTHROW(loopback::run(ranks, replicas_stay_bitwise_identical<Ring, loopback::context, Partition<0>>));
    CHECK_NOTHROW(loopback::run(ranks, replicas_stay_bitwise_identical<Native, loopback::context, Partition<1, 3>, Compress<FP16>>));
    CHECK_NOTHROW(loopback::run(ranks, replicas_stay_bitwise_identical<Tree, loopback::context, Compress<PowerSGD<2>, ErrorFeedback>>));
    CHECK_NOTHROW(loopback::run(ranks, replicas_stay_bitwise_identical<Hierarchical, loopback::context, Compress<BF16>>));
  }
}

TEST_CASE("error feedback keeps every rounding of the ring and of Hierarchical's rings", "[compression]") {
  struct layout {
    int ranks, ranks_per_node;  // 0: one node
  };
  // Hierarchical's node: rings (chunks through shared memory, or as messages), or reads.
  enum class within_node { shared_memory, messages, reads };
  // One rank, one node and one rank per node run one ring; the others Hierarchical's rings.
  for (const layout& l : {layout{1, 0}, layout{2, 1}, layout{3, 0}, layout{4, 2}, layout{6, 2}, layout{6, 3}}) {
    for (const within_node node : {within_node::shared_memory, within_node::messages, within_node::reads}) {
      const bool shared = node == within_node::shared_memory;
      INFO("ranks = " << l.ranks << ", ranks_per_node = " << l.ranks_per_node
                      << ", within the node: " << static_cast<int>(node));
      // Tiny chunks and pieces (bytes of the 16-bit wire), so that chunks span the bucket's
      // buffers and the rings within and between nodes work on different pieces at once.
      const sync::allreduce_options options{.ring_chunk_bytes = 10,
                                            .shared_memory_max_bytes = shared ? SIZE_MAX : 0,
                                            .shared_memory_chunk_bytes = 6,
                                            .ranks_per_node = l.ranks_per_node,
                                            .cross_node_chunk_bytes = 6,
                                            .cross_node_window = 3,
                                            .hierarchical_piece_bytes = 300,
                                            .read_within_node = node == within_node::reads};
      CHECK_NOTHROW(loopback::run(l.ranks, [&](auto& ctx) {
        conformance::cast_feedback_keeps_what_rounding_lost<FP16, Hierarchical>(ctx, options);
      }));
      CHECK_NOTHROW(loopback::run(l.ranks, [&](auto& ctx) {
        conformance::cast_feedback_keeps_what_rounding_lost<BF16, Hierarchical>(ctx, options);
      }));
      CHECK_NOTHROW(loopback::run(
          l.ranks, [&](auto& ctx) { conformance::cast_feedback_keeps_what_rounding_lost<FP16, Ring>(ctx, options); }));
    }
  }
}

TEST_CASE("FP16 and BF16 through the executor, with buckets and accumulation", "[compression][executor]") {
  for (int ranks : {2, 4}) {
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::cast_compression_is_close<FP16, Ring>(ctx, 2e-3); }));
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::cast_compression_is_close<BF16, Native>(ctx, 1.6e-2); }));
  }
  // Accumulation composes: K micro-batches of FP16 equal one step of their mean, within rounding.
  loopback::run(2, [](loopback::context& ctx) {
    using S = Strategy<Compress<FP16>, AllReduce<Ring>>;
    std::vector<float> w(100, 0.0f), g(100);
    auto m = make_model(variable<S>("w", w, g, {10, 10}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f},
                              {.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 128}, .accumulation_steps = 3});
    for (int k = 0; k < 3; ++k) {
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(k + 1 + ctx.rank()) * 0.01f * static_cast<float>(i);
      exec.step();
    }
    for (std::size_t i = 0; i < w.size(); ++i) {
      const float mean = 2.5f * 0.01f * static_cast<float>(i);  // mean over k = 1..3 and ranks 0, 1
      conformance::expect(std::abs(w[i] + mean) <= 1e-3f * mean + 1e-6f, "w[{}] = {}, expected {}", i, w[i], -mean);
    }
  });
}

TEST_CASE("partitioned all-reduce equals the unpartitioned one", "[compression][partition]") {
  std::vector<float> plain, by_rows, by_columns;
  auto train = [](auto strategy, std::vector<float>& out) {
    using S = typename decltype(strategy)::type;
    loopback::run(3, [&](loopback::context& ctx) {
      std::vector<float> w(7 * 5, 1.0f), g(w.size());
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i + 3 * static_cast<std::size_t>(ctx.rank())) % 8);
      auto m = make_model(variable<S>("w", w, g, {7, 5}));
      auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.5f}, {.buckets = {.first_bucket_bytes = 8, .bucket_bytes = 40}});
      exec.step();
      if (ctx.rank() == 0) out = w;
    });
  };
  train(std::type_identity<Strategy<AllReduce<Ring>>>{}, plain);
  train(std::type_identity<Strategy<AllReduce<Ring>, Partition<0>>>{}, by_rows);
  train(std::type_identity<Strategy<AllReduce<Ring>, Partition<1, 2>>>{}, by_columns);
  CHECK(by_rows == plain);
  CHECK(by_columns == plain);
}

TEST_CASE("a non-finite gradient is named, or the step is skipped on every rank", "[compression][errors]") {
  using S = Strategy<Compress<FP16>>;
  auto run = [](sync::nonfinite_policy policy) {
    loopback::run(2, [policy](loopback::context& ctx) {
      std::vector<float> w(8, 1.0f), g(8, 0.5f), b(2, 1.0f), gb(2, 0.5f);
      auto m = make_model(variable<S>("fc.weight", w, g, {2, 4}), variable<S>("fc.bias", b, gb, {2}));
      executor_options options;
      options.compression.on_nonfinite = policy;
      auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f}, options);
      if (ctx.rank() == 1) g[3] = std::numeric_limits<float>::infinity();
      const step_stats s = exec.step();
      conformance::expect(s.skipped && !s.updated && w[3] == 1.0f && b[0] == 1.0f, "rank {}: the step was not skipped",
                          ctx.rank());
      g.assign(8, 0.5f);  // the next step is healthy again
      conformance::expect(exec.step().updated && w[0] == 0.5f, "rank {}: no recovery after a skipped step", ctx.rank());
    });
  };
  CHECK_THROWS_WITH(run(sync::nonfinite_policy::raise),
                    Catch::Contains("the averaged gradient of \"fc.weight\" is NaN or infinite"));
  CHECK_NOTHROW(run(sync::nonfinite_policy::skip_step));
}

TEST_CASE("uncompressed gradients are scanned for NaN on request", "[compression][errors]") {
  auto run = [](bool scan) {
    loopback::run(2, [scan](loopback::context& ctx) {
      std::vector<float> w(8, 1.0f), g(8, 0.5f);
      auto m = make_model(variable<Strategy<AllReduce<Ring>>>("emb.weight", w, g, {2, 4}));
      executor_options options;
      options.compression.scan_uncompressed = scan;
      auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f}, options);
      if (ctx.rank() == 0) g[5] = std::numeric_limits<float>::quiet_NaN();
      exec.step();
    });
  };
  CHECK_NOTHROW(run(false));  // not scanned: the NaN reaches the parameters, as in DDP
  CHECK_THROWS_WITH(run(true), Catch::Contains("the averaged gradient of \"emb.weight\" is NaN or infinite"));
}
