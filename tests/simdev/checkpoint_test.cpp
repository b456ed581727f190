// The device executor's checkpoints across world sizes on the simulated device: a run of 4
// ranks saves after update 3; fresh executors of 2, 3 and 8 ranks, whose parameters started
// elsewhere, restore it and hold the saved parameters bit for bit, and those of 2 and 8
// ranks go on to end bitwise on the uninterrupted run's parameters after update 6 (every
// rank's gradient is the same, in multiples of 1/64, so its mean over any power-of-two
// number of ranks is exact).
// The model has every kind of bucket: replicated fp32 and fp16, PS<2> fp32 and fp16 (their
// master copies saved as shards, owned by other ranks at each size), fp32 with fp16 on the
// wire; SGD with momentum and Adam carry optimizer state across.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "conformance/temporary_folder.hpp"
#include "deterministic.hpp"
#include "strata/ckpt/store.hpp"
#include "strata/comm/sim/sim.hpp"
#include "strata/sim/space.hpp"

using namespace strata;

namespace {

using Dense = Strategy<Replicate, AllReduce<Native>>;
using Server = Strategy<PS<2>, Partition<0>>;
using HalfWire = Strategy<Replicate, AllReduce<Native>, Compress<FP16>>;

using strata_test::values;

/// One variable's device buffers, written on the user's stream.
template <class T>
struct variable {
  std::string name;
  std::uint32_t id;
  sim::device_buffer<T> param, grad;

  variable(std::string n, std::uint32_t variable_id, std::size_t size, std::uint32_t seed, sim::stream_t s)
      : name(std::move(n)), id(variable_id), param(size, s), grad(size, s) {
    write(param, values<T>(size, seed + id), s);
  }

  template <class S>
  device_variable_binding binding() {
    return device_variable<S>(name, param.memory(), grad.memory(), {param.size()});
  }
  /// Update u's gradient: the same on every rank and in every run, in multiples of 1/64,
  /// so that sums over up to 8 ranks and their means over powers of two are exact in fp16
  /// as in fp32.
  void set_gradient(std::int64_t u, sim::stream_t s) {
    std::vector<T> g;
    for (float x : values<float>(grad.size(), static_cast<std::uint32_t>(1000 * u) + id))
      g.push_back(T(std::round(x * 64.0f) / 64.0f));
    write(grad, std::move(g), s);
  }
  std::vector<T> read(sim::device& d, sim::stream_t s) const {
    std::vector<T> host(param.size());
    sim::copy_async(host.data(), param.data(), host.size() * sizeof(T), s);
    d.synchronize(s);
    return host;
  }

 private:
  static void write(const sim::device_buffer<T>& to, std::vector<T> from, sim::stream_t s) {
    sim::launch(s, "write", [from = std::move(from), into = to.data()] { std::copy(from.begin(), from.end(), into); });
  }
};

/// Every variable's parameters, as bytes: what must come back bit for bit.
using snapshot = std::map<std::string, std::vector<std::uint8_t>>;

struct model {
  variable<float> a, p, c;
  variable<half> h, q;
  model(std::uint32_t seed, sim::stream_t s)
      : a("a", 1, 1000, seed, s), p("p", 2, 777, seed, s), c("c", 3, 400, seed, s), h("h", 4, 513, seed, s),
        q("q", 5, 300, seed, s) {}

  std::vector<device_variable_binding> bindings() {
    return {a.binding<Dense>(), p.binding<Server>(), c.binding<HalfWire>(), h.binding<Dense>(), q.binding<Server>()};
  }
  template <class Executor>
  void train(Executor& exec, sim::stream_t s, std::int64_t from, std::int64_t to) {
    for (std::int64_t u = from; u <= to; ++u) {
      exec.parameters_ready(s);
      a.set_gradient(u, s), p.set_gradient(u, s), c.set_gradient(u, s), h.set_gradient(u, s), q.set_gradient(u, s);
      exec.step(s);
    }
    exec.wait();
  }
  snapshot parameters(sim::device& d, sim::stream_t s) const {
    snapshot out;
    auto put = [&](const auto& v) {
      const auto host = v.read(d, s);
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(host.data());
      out[v.name] = std::vector<std::uint8_t>(bytes, bytes + host.size() * sizeof(host[0]));
    };
    put(a), put(p), put(c), put(h), put(q);
    return out;
  }
};

sim::device_options quick() { return {.seed = 5, .max_delay = std::chrono::microseconds(30)}; }
device_executor_options<sim::stream_t> several_buckets_on(sim::stream_t s) {
  return {.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 2048}, .initialized_on = s};
}

/// What one run of `ranks` ranks saw: rank 0's parameters at the save (or restore) and at
/// the end, and whether every rank agreed with rank 0.
struct run_result {
  snapshot at_update_3, at_update_6;
  std::optional<std::int64_t> restored_step;
  bool ranks_agree = true;
};

/// Trains updates 1..6 from `seed`'s parameters, saving after 3; or, with `resume`, restores
/// the newest checkpoint and trains 4..6.
template <class O>
run_result run(int ranks, const O& opt, const ckpt::store& store, bool resume) {
  std::vector<run_result> per_rank(static_cast<std::size_t>(ranks));
  sim::run(ranks, quick(), [&](sim::communicator& comm, sim::device& d) {
    sim::owned_stream compute(d, "compute");
    model m(resume ? 99u : 1u, compute);
    auto exec = make_executor(comm, m.bindings(), opt, several_buckets_on(compute));
    run_result& mine = per_rank[static_cast<std::size_t>(comm.rank())];
    if (resume) {
      const auto restored = exec.restore_checkpoint(store);
      if (restored) mine.restored_step = restored->step;
    } else {
      m.train(exec, compute, 1, 3);
      exec.save_checkpoint(store, {{"world", std::to_string(ranks)}});
    }
    mine.at_update_3 = m.parameters(d, compute);
    m.train(exec, compute, 4, 6);
    mine.at_update_6 = m.parameters(d, compute);
  });
  run_result out = per_rank[0];
  for (const run_result& r : per_rank)
    out.ranks_agree = out.ranks_agree && r.at_update_3 == out.at_update_3 && r.at_update_6 == out.at_update_6 &&
                      r.restored_step == out.restored_step;
  return out;
}

template <class O>
void resumes_on_other_world_sizes(const O& opt, const std::string& what) {
  const conformance::temporary_folder folder;
  const ckpt::store store(folder.path);
  const run_result whole = run(4, opt, store, false);
  REQUIRE(whole.ranks_agree);
  for (const int ranks : {2, 3, 8}) {
    INFO(what << ": saved by 4 ranks, restored by " << ranks);
    const run_result resumed = run(ranks, opt, store, true);
    REQUIRE(resumed.ranks_agree);
    REQUIRE(resumed.restored_step == std::optional<std::int64_t>(3));
    REQUIRE(resumed.at_update_3 == whole.at_update_3);
    if (ranks != 3) REQUIRE(resumed.at_update_6 == whole.at_update_6);
  }
}

}  // namespace

TEST_CASE("the device executor's checkpoint saved by 4 ranks resumes on 2, 3 and 8 (sgd)", "[checkpoint]") {
  resumes_on_other_world_sizes(optim::sgd{.lr = 0.1f, .momentum = 0.9f}, "sgd");
}

TEST_CASE("the device executor's checkpoint saved by 4 ranks resumes on 2, 3 and 8 (adam)", "[checkpoint]") {
  resumes_on_other_world_sizes(optim::adam{.lr = 0.01f}, "adam");
}
