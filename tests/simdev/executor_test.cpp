// The device executor (the nccl executor's code) on the simulated device at 2, 3, 4 and 8
// ranks: replicated fp32, fp16 and bf16 variables, PS<N> variables whose buckets do not
// divide among the ranks, Compress<FP16|BF16>, and accumulation, each against the host
// optimizers' update of the ranks' mean gradient, reduced as NCCL reduces (rank order,
// each addition rounded to the wire type). The gradients are written by a "backward" kernel
// on the user's stream, under random stream delays and with freed memory poisoned, so a
// missing stream wait or an early free changes the numbers. fp32 results must be equal
// bit for bit; 16-bit ones within a few units in the last place.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "deterministic.hpp"
#include "strata/comm/sim/sim.hpp"
#include "strata/sim/space.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

using Dense = Strategy<Replicate, AllReduce<Native>>;
using Server = Strategy<PS<2>, Partition<0>>;
using HalfWire = Strategy<Replicate, AllReduce<Native>, Compress<FP16>>;
using Bfloat16Wire = Strategy<Replicate, AllReduce<Native>, Compress<BF16>>;

constexpr sync::bucket_options several_buckets{.first_bucket_bytes = 64, .bucket_bytes = 2048};

void expect(bool holds, const std::string& what) {
  if (!holds) throw std::runtime_error("expected: " + what);
}

using strata_test::values;

/// Rank r's gradient of a variable at a micro-batch, in T.
template <class T>
std::vector<T> gradient(std::size_t n, std::uint32_t variable, std::int64_t micro_batch, int rank) {
  std::vector<T> g;
  for (float x : values(n, variable * 7919u + static_cast<std::uint32_t>(micro_batch) * 104729u +
                               static_cast<std::uint32_t>(rank) * 15485863u))
    g.push_back(T(x));
  return g;
}

/// NCCL's sum over the ranks' `wire` values, in rank order, each addition rounded to Wire;
/// with `premultiply`, each value first times it (ncclAvg, and the executor's averaging
/// before it narrows).
template <class Wire>
std::vector<float> nccl_sum(const std::vector<std::vector<Wire>>& per_rank, float premultiply) {
  std::vector<float> out(per_rank[0].size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    Wire acc{};
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      Wire x = per_rank[r][i];
      if (premultiply != 1.0f) x = Wire(static_cast<float>(x) * premultiply);
      acc = r == 0 ? x : Wire(static_cast<float>(acc) + static_cast<float>(x));
    }
    out[i] = static_cast<float>(acc);
  }
  return out;
}

enum class declared { replicated, ps, compressed };

/// One variable of a rank: its device buffers and the host's reference update.
template <class T, class O>
struct tracked {
  std::string name;
  std::uint32_t id;
  std::size_t size;
  sim::device_buffer<T> param, grad;
  std::vector<float> master;
  typename O::state state;

  tracked(std::string n, std::uint32_t variable, std::size_t elements, const O& opt, sim::stream_t s)
      : name(std::move(n)), id(variable), size(elements), param(elements, s), grad(elements, s),
        state(opt.make_state(elements)) {
    // The same on every rank, written late on the user's stream, which the executor's
    // start-up broadcast must wait for (initialized_on).
    auto start = std::make_shared<std::vector<T>>(gradient<T>(elements, variable + 1000, 0, 0));
    for (const T& x : *start) master.push_back(static_cast<float>(x));
    T* into = param.data();
    sim::launch(s, "initialize " + name, [start, into] {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      std::copy(start->begin(), start->end(), into);
    });
    sim::memset_async(grad.data(), 0, elements * sizeof(T), s);
  }

  template <class S>
  device_variable_binding binding() {
    return device_variable<S>(name, param.memory(), grad.memory(), {size});
  }

  /// The user's backward: writes this rank's gradient on `compute`, late (1 ms in).
  void backward(sim::stream_t compute, std::int64_t micro_batch, int rank) {
    auto g = std::make_shared<std::vector<T>>(gradient<T>(size, id, micro_batch, rank));
    T* into = grad.data();
    sim::launch(compute, "backward of " + name, [g, into] {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      std::copy(g->begin(), g->end(), into);
    });
  }

  /// The reference update from the mean gradient of every rank's micro-batches `first`..
  /// `first + k - 1`, travelling as Wire.
  template <class Wire = T>
  void host_update(const O& opt, int ranks, std::int64_t first, int k, std::int64_t update) {
    const float p = 1.0f / static_cast<float>(ranks);
    std::vector<std::vector<Wire>> wire(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      std::vector<float> mean(size, 0.0f);
      for (int m = 0; m < k; ++m) {
        const std::vector<T> g = gradient<T>(size, id, first + m, r);
        for (std::size_t i = 0; i < size; ++i) mean[i] = m == 0 ? static_cast<float>(g[i]) : mean[i] + static_cast<float>(g[i]);
      }
      if (k > 1)
        for (float& x : mean) x *= 1.0f / static_cast<float>(k);
      // Compress<...> narrows the fp32 mean, already times 1/ranks, once.
      if constexpr (std::is_same_v<T, float> && !std::is_same_v<Wire, float>)
        for (float& x : mean) x *= p;
      for (float x : mean) wire[static_cast<std::size_t>(r)].push_back(Wire(x));
    }
    std::vector<float> average;
    if constexpr (std::is_same_v<T, float> && std::is_same_v<Wire, float>) {
      average = nccl_sum(wire, 1.0f);  // summed, then scaled inside the optimizer's kernel
      for (float& x : average) x = p * x;
    } else if constexpr (std::is_same_v<T, float>) {
      average = nccl_sum(wire, 1.0f);  // narrowed averages, summed
    } else {
      average = nccl_sum(wire, p);  // 16-bit variables: averaged by the all-reduce (ncclAvg)
    }
    opt.update(master, average, state, update);
  }

  /// Every element of the parameters against the reference: equal for fp32, within
  /// `ulps` units of T's last place near 1 for 16-bit types.
  void compare(sim::device& d, sim::stream_t s, float tolerance, const std::string& what) {
    std::vector<T> got(size);
    sim::copy_async(got.data(), param.data(), size * sizeof(T), s);
    d.synchronize(s);
    for (std::size_t i = 0; i < size; ++i) {
      const float want = static_cast<float>(T(master[i]));
      const float have = static_cast<float>(got[i]);
      if (tolerance == 0.0f ? have != want : !(std::abs(have - want) <= tolerance))
        throw std::runtime_error(what + ": " + name + "[" + std::to_string(i) + "] is " + std::to_string(have) +
                                 ", the host's " + std::to_string(want));
    }
  }
};

sim::device_options fast(std::chrono::milliseconds timeout = std::chrono::milliseconds(30000)) {
  return {.seed = 11, .max_delay = std::chrono::microseconds(50), .poison = true, .timeout = timeout};
}

/// Two updates of three fp32 variables, one fp16 and one bf16, the first taking every
/// gradient from step()'s stream, the second marking each in backward order.
template <class O>
void matches_host(int ranks, const O& opt, declared how, int accumulation = 1) {
  sim::run(ranks, fast(), [&](sim::communicator& comm, sim::device& d) {
    sim::owned_stream compute(d, "compute");
    tracked<float, O> a("a", 1, 1000, opt, compute), b("b", 2, 7, opt, compute), c("c", 3, 4097, opt, compute);
    tracked<half, O> h("h", 4, 513, opt, compute);
    tracked<bfloat16, O> bf("bf", 5, 300, opt, compute);
    const bool ps = how == declared::ps, compressed = how == declared::compressed;
    auto bind = [&](auto& v) { return ps ? v.template binding<Server>() : v.template binding<Dense>(); };
    auto exec = make_executor(comm,
                              {compressed ? a.template binding<HalfWire>() : bind(a), bind(h),
                               compressed ? b.template binding<Bfloat16Wire>() : b.template binding<Dense>(),
                               bf.template binding<Dense>(), bind(c)},
                              opt, {.buckets = several_buckets, .initialized_on = compute, .accumulation_steps = accumulation});
    std::int64_t micro_batch = 0;
    for (std::int64_t update = 1; update <= 2; ++update) {
      const std::int64_t first = micro_batch;
      for (int m = 0; m < accumulation; ++m, ++micro_batch) {
        exec.parameters_ready(compute);
        for (auto* v : {&c, &b, &a}) v->backward(compute, micro_batch, comm.rank());
        h.backward(compute, micro_batch, comm.rank());
        bf.backward(compute, micro_batch, comm.rank());
        if (update == 1) {
          exec.step(compute);
        } else {
          for (const char* name : {"c", "bf", "b", "h", "a"}) exec.grad_ready(name, compute);
          exec.step(compute);
        }
      }
      exec.parameters_ready(compute);
      d.synchronize(compute);
      if (compressed) {
        a.template host_update<half>(opt, ranks, first, accumulation, update);
        b.template host_update<bfloat16>(opt, ranks, first, accumulation, update);
      } else {
        a.host_update(opt, ranks, first, accumulation, update);
        b.host_update(opt, ranks, first, accumulation, update);
      }
      c.host_update(opt, ranks, first, accumulation, update);
      h.host_update(opt, ranks, first, accumulation, update);
      bf.host_update(opt, ranks, first, accumulation, update);
      const std::string at = "rank " + std::to_string(comm.rank()) + " of " + std::to_string(ranks) + ", update " +
                             std::to_string(update);
      // Compress<FP16 | BF16> rounds each rank's share to the wire type before the sum: the
      // reference does the same, so fp32 stays exact.
      for (auto* v : {&a, &b, &c}) v->compare(d, compute, 0.0f, at);
      h.compare(d, compute, 4.0f / 1024, at);
      bf.compare(d, compute, 4.0f / 128, at);
    }
    expect(exec.updates() == 2, "two updates");
    exec.wait();
  });
}

/// A job of one fp32 variable "a" of 100 elements per rank, for the tests of stalls and
/// errors: body(exec, a, compute, comm) on every rank.
template <class Body>
void one_variable_job(int ranks, sim::device_options options, Body body) {
  sim::run(ranks, options, [&](sim::communicator& comm, sim::device& d) {
    sim::owned_stream compute(d, "compute");
    const optim::sgd opt{.lr = 0.1f};
    tracked<float, optim::sgd> a("a", 1, 100, opt, compute);
    auto exec = make_executor(comm, {a.binding<Dense>()}, opt, {.buckets = {}, .initialized_on = compute});
    body(exec, a, compute, comm);
  });
}

}  // namespace

TEST_CASE("simdev executor: replicated fp32, fp16 and bf16 equal the host's update of the mean", "[simdev]") {
  const int ranks = GENERATE(2, 3, 4, 8);
  CAPTURE(ranks);
  REQUIRE_NOTHROW(matches_host(ranks, optim::sgd{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f}, declared::replicated));
  REQUIRE_NOTHROW(matches_host(ranks, optim::adam{.lr = 0.01f, .weight_decay = 0.01f}, declared::replicated));
}

TEST_CASE("simdev executor: PS<N> buckets that do not divide among the ranks", "[simdev]") {
  const int ranks = GENERATE(2, 3, 4, 8);
  CAPTURE(ranks);
  REQUIRE_NOTHROW(matches_host(ranks, optim::adam{.lr = 0.01f, .weight_decay = 0.01f}, declared::ps));
}

TEST_CASE("simdev executor: Compress<FP16> and Compress<BF16>, and accumulation over micro-batches", "[simdev]") {
  const int ranks = GENERATE(2, 3, 4, 8);
  CAPTURE(ranks);
  REQUIRE_NOTHROW(matches_host(ranks, optim::sgd{.lr = 0.1f, .momentum = 0.9f}, declared::compressed));
  REQUIRE_NOTHROW(matches_host(ranks, optim::sgd{.lr = 0.1f, .momentum = 0.9f}, declared::replicated, 3));
}

TEST_CASE("simdev executor: a rank that stops calling step is named within the deadline", "[simdev]") {
  const int ranks = GENERATE(2, 4);
  CAPTURE(ranks);
  const auto deadline = std::chrono::milliseconds(1000);
  std::vector<std::string> messages(static_cast<std::size_t>(ranks));
  std::vector<std::chrono::steady_clock::duration> took(static_cast<std::size_t>(ranks));
  REQUIRE_NOTHROW(one_variable_job(ranks, fast(deadline), [&](auto& exec, auto& a, sim::stream_t compute, sim::communicator& comm) {
    a.backward(compute, 0, comm.rank());
    exec.step(compute);
    exec.wait();
    if (comm.rank() == 1) return;  // stops after one step
    exec.parameters_ready(compute);
    a.backward(compute, 1, comm.rank());
    exec.step(compute);
    const auto start = std::chrono::steady_clock::now();
    try {
      exec.wait();
    } catch (const timeout_error& e) {
      messages[static_cast<std::size_t>(comm.rank())] = e.what();
    }
    took[static_cast<std::size_t>(comm.rank())] = std::chrono::steady_clock::now() - start;
  }));
  for (int r = 0; r < ranks; ++r) {
    if (r == 1) continue;
    CAPTURE(r);
    CHECK_THAT(messages[static_cast<std::size_t>(r)], Contains("waits for rank 1 "));
    CHECK(took[static_cast<std::size_t>(r)] < deadline + std::chrono::seconds(2));
  }
}

TEST_CASE("simdev executor: a forgotten stream is refused, naming the call", "[simdev]") {
  REQUIRE_THROWS_WITH(one_variable_job(2, fast(), [&](auto& exec, auto&, sim::stream_t, sim::communicator&) {
                        exec.grad_ready("a", nullptr);
                      }),
                      Contains("grad_ready(\"a\"): no stream given"));
  REQUIRE_THROWS_WITH(one_variable_job(2, fast(), [&](auto& exec, auto&, sim::stream_t, sim::communicator&) {
                        exec.step(nullptr);
                      }),
                      Contains("step(): no stream given"));
  REQUIRE_THROWS_WITH(one_variable_job(2, fast(), [&](auto& exec, auto&, sim::stream_t, sim::communicator&) {
                        exec.parameters_ready(nullptr);
                      }),
                      Contains("parameters_ready(): no stream given") && Contains("cudaStreamLegacy"));
  REQUIRE_THROWS_WITH(sim::run(2, fast(), [&](sim::communicator& comm, sim::device& d) {
                        sim::owned_stream compute(d, "compute");
                        const optim::sgd opt{.lr = 0.1f};
                        tracked<float, optim::sgd> a("a", 1, 10, opt, compute);
                        auto exec = make_executor(comm, {a.binding<Dense>()}, opt);  // no initialized_on
                      }),
                      Contains("the options' initialized_on: no stream given"));
}

TEST_CASE("simdev executor: host memory bound as device memory is refused, naming the variable", "[simdev]") {
  REQUIRE_THROWS_WITH(sim::run(2, fast(), [&](sim::communicator& comm, sim::device& d) {
                        sim::owned_stream compute(d, "compute");
                        std::vector<float> host(16);
                        sim::device_buffer<float> grad(16, compute);
                        auto exec = make_executor(comm,
                                                  {device_variable<Dense>("host.weight", device_span<float>(host.data(), 16),
                                                                          grad.memory(), {16})},
                                                  optim::sgd{}, {.buckets = {}, .initialized_on = compute});
                      }),
                      Contains("variable \"host.weight\" on rank") && Contains("not memory of rank"));
}

TEST_CASE("simdev executor: ranks that keep stepping past a stopped rank fail within the deadline", "[simdev]") {
  // They never call wait(): only step()'s bound on run-ahead stops them.
  const int ranks = GENERATE(2, 3);
  CAPTURE(ranks);
  const auto deadline = std::chrono::milliseconds(1000);
  std::vector<std::string> messages(static_cast<std::size_t>(ranks));
  std::vector<std::chrono::steady_clock::duration> took(static_cast<std::size_t>(ranks));
  REQUIRE_NOTHROW(one_variable_job(ranks, fast(deadline), [&](auto& exec, auto& a, sim::stream_t compute, sim::communicator& comm) {
    const int stopped = ranks - 1;
    const auto start = std::chrono::steady_clock::now();
    try {
      for (std::int64_t step = 0; step < 10000; ++step) {
        if (comm.rank() == stopped && step == 3) return;
        exec.parameters_ready(compute);
        a.backward(compute, step, comm.rank());
        exec.step(compute);
      }
      messages[static_cast<std::size_t>(comm.rank())] = "ran 10000 steps ahead of a stopped rank";
    } catch (const timeout_error& e) {
      messages[static_cast<std::size_t>(comm.rank())] = e.what();
    }
    took[static_cast<std::size_t>(comm.rank())] = std::chrono::steady_clock::now() - start;
  }));
  for (int r = 0; r + 1 < ranks; ++r) {
    CAPTURE(r);
    CHECK_THAT(messages[static_cast<std::size_t>(r)],
               Contains("(step())") && Contains("waits for rank " + std::to_string(ranks - 1) + " "));
    CHECK(took[static_cast<std::size_t>(r)] < deadline + std::chrono::seconds(2));
  }
}

TEST_CASE("simdev executor: a step without parameters_ready since the last is refused, naming it", "[simdev]") {
  REQUIRE_THROWS_WITH(one_variable_job(2, fast(), [&](auto& exec, auto& a, sim::stream_t compute, sim::communicator& comm) {
                        a.backward(compute, 0, comm.rank());
                        exec.step(compute);
                        exec.step(compute);  // the next step, without parameters_ready
                      }),
                      Contains("step() of a new step without parameters_ready(stream)"));
}

TEST_CASE("simdev executor: fp16 gradients are averaged before they are summed", "[simdev]") {
  // 30000 on each of 4 ranks: their mean is a half, their sum (120000) is not (max 65504).
  REQUIRE_NOTHROW(sim::run(4, fast(), [&](sim::communicator& comm, sim::device& d) {
    sim::owned_stream compute(d, "compute");
    sim::device_buffer<half> param(8, compute), grad(8, compute);
    const std::vector<half> zero(8, half(0.0f)), large(8, half(30000.0f));
    sim::copy_async(param.data(), zero.data(), 8 * sizeof(half), compute);
    sim::copy_async(grad.data(), large.data(), 8 * sizeof(half), compute);
    auto exec = make_executor(comm, {device_variable<Dense>("h", param.memory(), grad.memory(), {8})},
                              optim::sgd{.lr = 1e-5f}, {.buckets = {}, .initialized_on = compute});
    exec.step(compute);
    exec.wait();
    std::vector<half> after(8);
    sim::copy_async(after.data(), param.data(), 8 * sizeof(half), compute);
    d.synchronize(compute);
    for (const half& x : after)
      expect(std::abs(static_cast<float>(x) + 0.3f) < 1e-3f, "the parameter moved by lr x the mean (30000), not by inf");
  }));
}
