// The executor on loopback ranks: averaging, bitwise-identical replicas, bucket boundaries,
// gradient accumulation, overlap bookkeeping and its errors.
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <random>
#include <thread>

#include <catch2/catch.hpp>

#include "conformance/cases.hpp"
#include "conformance/mismatch_cases.hpp"
#include "strata/plan/calibrate.hpp"

using namespace strata;

TEST_CASE("replicas stay bitwise identical after every step", "[executor]") {
  for (int ranks : {2, 3, 4}) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, conformance::replicas_stay_bitwise_identical<Ring, loopback::context>));
    CHECK_NOTHROW(loopback::run(ranks, conformance::replicas_stay_bitwise_identical<Native, loopback::context>));
  }
}

TEST_CASE("the executor averages gradients over ranks", "[executor]") {
  for (int ranks : {1, 2, 4}) {
    CHECK_NOTHROW(loopback::run(ranks, conformance::executor_averages_gradients<Ring, loopback::context>));
    CHECK_NOTHROW(loopback::run(ranks, conformance::executor_averages_gradients<Native, loopback::context>));
  }
}

namespace {
using Dense = Strategy<AllReduce<Ring>>;

/// Trains 6 variables of assorted sizes for `updates` updates with bucket sizes `first`,
/// `rest` and `micro` micro-batches each; micro-batch gradients are deterministic in
/// (update, micro-batch, rank). Returns rank 0's parameters.
std::vector<float> train(int ranks, std::size_t first, std::size_t rest, int micro, int updates, bool overlap) {
  std::vector<float> result;
  loopback::run(ranks, [&](loopback::context& ctx) {
    const std::vector<std::size_t> sizes = {1, 300, 7, 4096, 2, 1000};
    std::vector<std::vector<float>> params, grads;
    for (std::size_t n : sizes) {
      params.emplace_back(n, 0.5f);
      grads.emplace_back(n);
    }
    model<Dense> m;
    for (std::size_t k = 0; k < sizes.size(); ++k)
      m.add(variable<Dense>(fmt::format("v{}", k), params[k], grads[k], {sizes[k]}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f, .momentum = 0.5f},
                              {.buckets = {.first_bucket_bytes = first, .bucket_bytes = rest}, .accumulation_steps = micro});
    for (int u = 0; u < updates; ++u)
      for (int k = 0; k < micro; ++k) {
        for (std::size_t v = sizes.size(); v-- > 0;) {  // backward: last variable first
          for (std::size_t i = 0; i < sizes[v]; ++i)
            grads[v][i] = static_cast<float>((i + v + static_cast<std::size_t>(u * 3 + k) * 7 +
                                              static_cast<std::size_t>(ctx.rank()) * 5) % 11) / 8.0f;
          if (overlap) exec.grad_ready(variable_id{v});
        }
        const step_stats s = exec.step();
        conformance::expect(s.updated == (k == micro - 1), "step {} of {} reported updated = {}", k, micro, s.updated);
      }
    if (ctx.rank() == 0)
      for (auto& p : params) result.insert(result.end(), p.begin(), p.end());
  });
  return result;
}
}  // namespace

TEST_CASE("bucket sizes do not change the result", "[executor][buckets]") {
  const auto reference = train(3, 1 << 20, 25 << 20, 1, 3, false);
  for (std::size_t first : {4u, 64u, 4096u})
    for (std::size_t rest : {4u, 1024u, 16384u}) {
      INFO("first = " << first << ", rest = " << rest);
      CHECK(train(3, first, rest, 1, 3, true) == reference);
      CHECK(train(3, first, rest, 1, 3, false) == reference);
    }
}

TEST_CASE("accumulating K micro-batches equals one batch of their mean", "[executor][accumulation]") {
  // With every micro-batch's gradient identical the accumulated mean is that gradient, so
  // K micro-batches per update must give exactly the K = 1 trajectory on gradients that
  // depend on the update only; check the general case against a direct computation instead.
  std::vector<float> accumulated, direct;
  loopback::run(2, [&](loopback::context& ctx) {
    std::vector<float> w(10, 1.0f), g(10), w2(10, 1.0f), g2(10);
    auto m1 = make_model(variable<Dense>("w", w, g, {10}));
    auto m2 = make_model(variable<Dense>("w", w2, g2, {10}));
    auto accumulate = make_executor(ctx, m1, optim::sgd{.lr = 1.0f}, {.accumulation_steps = 4});
    auto once = make_executor(ctx, m2, optim::sgd{.lr = 1.0f});
    std::vector<float> mean(10, 0.0f);
    for (int k = 0; k < 4; ++k) {
      for (std::size_t i = 0; i < 10; ++i) {
        g[i] = static_cast<float>(k + 1) * static_cast<float>(i) + static_cast<float>(ctx.rank());
        mean[i] += g[i] / 4.0f;
      }
      accumulate.step();
    }
    g2 = mean;
    once.step();
    if (ctx.rank() == 0) {
      accumulated = w;
      direct = w2;
    }
  });
  REQUIRE(accumulated.size() == 10);
  for (std::size_t i = 0; i < 10; ++i) CHECK(accumulated[i] == Approx(direct[i]).epsilon(1e-6));
  CHECK(accumulated[3] == Approx(1.0f - (2.5f * 3.0f + 0.5f)));  // mean over k and ranks
}

TEST_CASE("accumulation communicates only on the last micro-batch", "[executor][accumulation]") {
  loopback::run(2, [](loopback::context& ctx) {
    std::vector<float> w(1000, 0.0f), g(1000, 1.0f);
    auto m = make_model(variable<Dense>("w", w, g, {1000}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f}, {.accumulation_steps = 3});
    for (int k = 0; k < 2; ++k) {
      const step_stats s = exec.step();
      conformance::expect(!s.updated && s.bytes_sent == 0 && w[0] == 0.0f, "micro-batch {} communicated", k);
    }
    const step_stats s = exec.step();
    conformance::expect(s.updated && s.bytes_sent > 0 && w[0] == -1.0f, "last micro-batch: w[0] = {}", w[0]);
  });
}

TEST_CASE("overlap bookkeeping: a gradient marked twice or never is named", "[executor][errors]") {
  loopback::run(1, [](loopback::context& ctx) {
    std::vector<float> a(4), ga(4), b(4), gb(4);
    auto m = make_model(variable<Dense>("fc1.weight", a, ga, {2, 2}), variable<Dense>("fc1.bias", b, gb, {4}));
    auto exec = make_executor(ctx, m, optim::sgd{});
    exec.grad_ready("fc1.bias");
    CHECK_THROWS_WITH(exec.grad_ready("fc1.bias"), Catch::Contains("grad_ready(\"fc1.bias\") called twice in one step"));
    CHECK_THROWS_WITH(exec.step(), Catch::Contains("the gradient of \"fc1.weight\" was never marked ready"));
    CHECK_THROWS_WITH(exec.grad_ready("fc2.weight"), Catch::Contains("no variable called \"fc2.weight\""));
  });
}

TEST_CASE("detail checks name a gradient vector that reallocated after it was bound", "[executor][errors][debug]") {
  loopback::run(1, [](loopback::context& ctx) {  // one rank: Catch2's checks are not for threads
    std::vector<float> w(4), g(4, 1.0f), b(2), gb(2, 1.0f);
    auto m = make_model(variable<Dense>("fc.weight", w, g, {2, 2}), variable<Dense>("fc.bias", b, gb, {2}));
    CHECK(m.variables()[0].moved_buffer().empty());
    auto exec = make_executor(ctx, m, optim::sgd{}, {.detail_checks = true});
    CHECK(exec.step().updated);
    g.assign(4, 2.0f);  // same size, same memory: still in place
    CHECK(exec.step().updated);
    gb.reserve(gb.capacity() * 4 + 64);  // the memory the executor reads is freed
    CHECK(m.variables()[1].moved_buffer() == "gradient");
    CHECK_THROWS_WITH(exec.step(), Catch::Contains("variable \"fc.bias\": the std::vector its gradient buffer was bound "
                                                   "from has reallocated"));
  });
}

TEST_CASE("the executor starts every replica from rank 0's parameters", "[executor]") {
  loopback::run(3, [](loopback::context& ctx) {
    std::vector<float> w(5, static_cast<float>(ctx.rank() + 10)), g(5);
    auto m = make_model(variable<Dense>("w", w, g, {5}));
    auto exec = make_executor(ctx, m, optim::sgd{});
    conformance::expect(w[4] == 10.0f, "rank {} starts from {}", ctx.rank(), w[4]);
  });
}

TEST_CASE("accumulation_steps below 1 is refused", "[executor][errors]") {
  loopback::run(1, [](loopback::context& ctx) {
    std::vector<float> w(5), g(5);
    auto m = make_model(variable<Dense>("w", w, g, {5}));
    CHECK_THROWS_WITH(make_executor(ctx, m, optim::sgd{}, {.accumulation_steps = 0}),
                      Catch::Contains("executor_options::accumulation_steps is 0; it must be at least 1"));
  });
}

TEST_CASE("ranks that declare different models are told which variable differs", "[executor][signature]") {
  CHECK_THROWS_WITH(loopback::run(3,
                                  [](loopback::context& ctx) {
                                    std::vector<float> a(12), ga(12), b(4), gb(4);
                                    const std::size_t rows = ctx.rank() == 2 ? 4 : 3;  // rank 2 declares [4,3]
                                    auto m = make_model(variable<Dense>("fc1.weight", a, ga, {rows, 12 / rows}),
                                                        variable<Dense>("fc1.bias", b, gb, {4}));
                                    auto exec = make_executor(ctx, m, optim::sgd{});
                                  }),
                    Catch::Contains("of the signature is variable \"fc1.weight\" [3,4] float32 "
                                    "Replicate,AllReduce<Ring> on rank 0 but variable \"fc1.weight\" [4,3] float32 "
                                    "Replicate,AllReduce<Ring> on rank 2"));
  CHECK_THROWS_WITH(loopback::run(2,
                                  [](loopback::context& ctx) {
                                    std::vector<float> a(4), ga(4);
                                    auto m = make_model(variable<Dense>("w", a, ga, {4}));
                                    if (ctx.rank() == 1) m.add(variable<Dense>("extra", a, ga, {4}));
                                    auto exec = make_executor(ctx, m, optim::sgd{});
                                  }),
                    Catch::Contains("of the signature is nothing (fewer variables) on rank 0 but variable "
                                    "\"extra\""));
  // Different accumulation would pair one rank's update with another's micro-batch.
  CHECK_THROWS_WITH(loopback::run(2,
                                  [](loopback::context& ctx) {
                                    std::vector<float> a(4), ga(4);
                                    auto m = make_model(variable<Dense>("w", a, ga, {4}));
                                    executor_options options;
                                    options.accumulation_steps = ctx.rank() == 1 ? 2 : 1;
                                    auto exec = make_executor(ctx, m, optim::sgd{}, options);
                                  }),
                    Catch::Contains("the ranks disagree on setting accumulation_steps: 1 on rank 0 but 2 on rank 1"));
}

TEST_CASE("ranks that differ in any setting are told which setting and which ranks", "[executor][signature]") {
  for (int ranks : {2, 3}) {
    INFO(ranks << " ranks");
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) { conformance::every_differing_setting_is_refused(ctx); }));
  }
}

TEST_CASE("hyper-parameters and options outside their ranges are refused at start-up and at each update",
          "[executor][errors]") {
  struct bad_case {
    std::string expected;
    std::function<void(executor_options&, optim::sgd&)> change;
  };
  const std::vector<bad_case> cases = {
      {"the optimizer's lr is nan at start-up; it must be a number in [0, inf)", [](auto&, auto& o) { o.lr = NAN; }},
      {"the optimizer's lr is -0.1 at start-up; it must be a number in [0, inf)", [](auto&, auto& o) { o.lr = -0.1f; }},
      {"the optimizer's lr is inf at start-up", [](auto&, auto& o) { o.lr = INFINITY; }},
      {"the optimizer's momentum is 1.5 at start-up; it must be a number in [0, 1]", [](auto&, auto& o) { o.momentum = 1.5f; }},
      {"the optimizer's weight_decay is nan", [](auto&, auto& o) { o.weight_decay = NAN; }},
      {"executor_options::allreduce.ring_chunk_bytes is 0; it must be at least 4",
       [](auto& e, auto&) { e.allreduce.ring_chunk_bytes = 0; }},
      {"executor_options::allreduce.ring_window is 0; it must be at least 1", [](auto& e, auto&) { e.allreduce.ring_window = 0; }},
      {"executor_options::allreduce.cross_node_chunk_bytes is 2; it must be at least 4",
       [](auto& e, auto&) { e.allreduce.cross_node_chunk_bytes = 2; }},
      {"executor_options::allreduce.cross_node_window is 0; it must be at least 1",
       [](auto& e, auto&) { e.allreduce.cross_node_window = 0; }},
      {"executor_options::compression.powersgd_warmup_steps is -1", [](auto& e, auto&) { e.compression.powersgd_warmup_steps = -1; }},
      {"executor_options::timeout is nan seconds", [](auto& e, auto&) { e.timeout = std::chrono::duration<double>(NAN); }},
  };
  for (const bad_case& c : cases) {
    INFO(c.expected);
    loopback::run(1, [&](loopback::context& ctx) {
      std::vector<float> w(5), g(5);
      auto m = make_model(variable<Dense>("w", w, g, {5}));
      executor_options options;
      optim::sgd optimizer{.lr = 0.1f};
      c.change(options, optimizer);
      CHECK_THROWS_WITH(make_executor(ctx, m, optimizer, options), Catch::Contains(c.expected));
    });
  }
  // A schedule that sets a NaN rate is caught at the update, before it reaches the parameters.
  loopback::run(1, [](loopback::context& ctx) {
    std::vector<float> w(5, 1.0f), g(5, 1.0f);
    auto m = make_model(variable<Dense>("w", w, g, {5}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f});
    exec.step();
    exec.optimizer().lr = NAN;
    CHECK_THROWS_WITH(exec.step(), Catch::Contains("the optimizer's lr is nan at update 2; it must be a number in [0, inf)"));
    CHECK(std::ranges::all_of(w, [](float x) { return std::isfinite(x); }));
  });
  // Momentum turned on by a schedule after the executor was made without it: there is no
  // velocity to update (each element would have shared one), so the update is refused.
  loopback::run(1, [](loopback::context& ctx) {
    std::vector<float> w(5, 1.0f), g(5, 1.0f);
    auto m = make_model(variable<Dense>("w", w, g, {5}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f});
    exec.step();
    exec.optimizer().momentum = 0.9f;
    CHECK_THROWS_WITH(exec.step(), Catch::Contains("at update 2: momentum was turned on, but it was 0 when the executor "
                                                   "was made"));
  });
  // Made with momentum, a schedule may lower it to 0 and raise it again.
  loopback::run(1, [](loopback::context& ctx) {
    std::vector<float> w(5, 1.0f), g(5, 1.0f);
    auto m = make_model(variable<Dense>("w", w, g, {5}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f, .momentum = 0.5f});
    exec.optimizer().momentum = 0.0f;
    exec.step();
    exec.optimizer().momentum = 0.5f;
    CHECK_NOTHROW(exec.step());
  });
}

TEST_CASE("a rank that never arrives is named in a timeout instead of a hang", "[executor][timeout]") {
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(loopback::run(3,
                                  [](loopback::context& ctx) {
                                    std::vector<float> w(100), g(100, 1.0f);
                                    auto m = make_model(variable<Dense>("fc.weight", w, g, {10, 10}));
                                    executor_options options;
                                    options.timeout = std::chrono::milliseconds(300);
                                    auto exec = make_executor(ctx, m, optim::sgd{}, options);
                                    exec.step();  // every rank arrives once
                                    if (ctx.rank() != 2) exec.step();  // rank 2 stops participating
                                  }),
                    Catch::Contains("no progress for 0.3 s: update 2, in the all-reduce of bucket 1 of 1 (variables "
                                    "\"fc.weight\") under Replicate,AllReduce<Ring>; rank 2 did not reach this step"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("a rank that never starts is named in a timeout of the start-up handshake", "[executor][timeout]") {
  CHECK_THROWS_WITH(loopback::run(3,
                                  [](loopback::context& ctx) {
                                    std::vector<float> w(100), g(100, 1.0f);
                                    auto m = make_model(variable<Dense>("fc.weight", w, g, {10, 10}));
                                    if (ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
                                    auto exec = make_executor(ctx, m, optim::sgd{}, {.timeout = std::chrono::milliseconds(300)});
                                  }),
                    Catch::Contains("no progress for 0.3 s: start-up (the model-signature check and the parameter "
                                    "broadcast); rank 1 did not reach this step"));
}

TEST_CASE("STRATA_TIMEOUT_SECONDS sets the default timeout and is checked", "[executor][timeout]") {
  ::setenv("STRATA_TIMEOUT_SECONDS", "12.5", 1);
  CHECK(default_timeout().count() == 12.5);
  ::setenv("STRATA_TIMEOUT_SECONDS", "soon", 1);
  CHECK_THROWS_WITH(default_timeout(), Catch::Contains("STRATA_TIMEOUT_SECONDS=\"soon\" is not a number of seconds in (0, 1000000]"));
  // Values the clocks cannot hold, and values that are no deadline, are refused with the range.
  for (const char* bad : {"inf", "1e10", "-3", "0", "nan", "1e400"}) {
    INFO(bad);
    ::setenv("STRATA_TIMEOUT_SECONDS", bad, 1);
    CHECK_THROWS_WITH(default_timeout(), Catch::Contains("it must be in (0, 1000000]") || Catch::Contains("in (0, 1000000]"));
  }
  ::setenv("STRATA_TIMEOUT_SECONDS", "1000000", 1);
  CHECK(default_timeout().count() == 1e6);
  // A huge value is quoted as an excerpt, not echoed whole.
  ::setenv("STRATA_TIMEOUT_SECONDS", std::string(100000, '9').append("x").c_str(), 1);
  try {
    default_timeout();
    FAIL("accepted a 100 kB value");
  } catch (const usage_error& e) {
    CHECK(std::string_view(e.what()).size() < 300);
  }
  // executor_options::timeout set in code is checked the same way.
  CHECK_THROWS_WITH(checked_timeout(1e12, "executor_options::timeout"), Catch::Contains("executor_options::timeout is 1000000000000 seconds"));
  ::unsetenv("STRATA_TIMEOUT_SECONDS");
  CHECK(default_timeout().count() == 300.0);
}

TEST_CASE("the planner's barriers and link measurements name the rank that never comes", "[plan][timeout]") {
  ::setenv("STRATA_TIMEOUT_SECONDS", "0.3", 1);  // the planner's deadline
  CHECK_THROWS_WITH(loopback::run(3,
                                  [](loopback::context& ctx) {
                                    if (ctx.rank() == 2) return;  // never comes to the measurement
                                    plan::slowest_rank_median(ctx, 3, [] {});
                                  }),
                    Catch::Contains("no progress for 0.3 s: in the barrier before a timed step; rank 2 did not arrive"));
  CHECK_THROWS_WITH(loopback::run(2,
                                  [](loopback::context& ctx) {
                                    if (ctx.rank() == 1) return;
                                    plan::measure_link(ctx, 0, 1, 3);
                                  }),
                    Catch::Contains("measuring the link to rank 1 with 8 bytes (calibration); rank 1 did not"));
  ::unsetenv("STRATA_TIMEOUT_SECONDS");
}
