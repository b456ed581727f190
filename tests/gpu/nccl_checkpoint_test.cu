// The nccl executor's checkpoints on one GPU: a run saved after update 3 and resumed by a
// fresh executor, whose parameters started elsewhere, ends bitwise on the uninterrupted
// run's parameters after update 6, for fp32 and fp16 variables replicated, on the parameter
// server (their master copies saved as shards) and fp16 on the wire, with SGD momentum and
// with Adam (whose bias correction reads the restored update count). The state carries the
// host executor's tensor names, an empty store restores nothing, and a diverged model is
// not saved. Exits with STRATA_GPU_SKIP_CODE when there is no GPU.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include "deterministic.hpp"
#include "gpu_test.hpp"
#include "strata/ckpt/store.hpp"
#include "strata/exec/nccl_executor.cuh"

namespace {

using namespace strata;
using gpu_test::expect;
using Dense = Strategy<Replicate, AllReduce<Native>>;
using Server = Strategy<PS<2>, Partition<0>>;
using HalfWire = Strategy<Replicate, AllReduce<Native>, Compress<FP16>>;

const nccl_executor_options several_buckets{.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 4096},
                                                .initialized_on = cudaStreamLegacy};

using strata_test::values;

/// One variable's device buffers.
template <class T>
struct buffers {
  using value_type = T;
  std::size_t size;
  cuda::device_buffer<T> param, grad;
  buffers(std::size_t n, std::uint32_t seed)
      : size(n), param(gpu_test::to_device(values<T>(n, seed))), grad(n, nullptr) {}
};

/// A model of every kind of bucket: replicated fp32 and fp16, PS fp32 and fp16, fp32 with
/// fp16 on the wire.
struct model {
  buffers<float> a, p, c;
  buffers<strata::half> h, q;
  explicit model(std::uint32_t seed)
      : a(1000, seed), p(777, seed + 1), c(400, seed + 2), h(513, seed + 3), q(300, seed + 4) {
    STRATA_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  std::vector<device_variable_binding> bindings() {
    return {device_variable<Dense>("a", a.param.memory(), a.grad.memory(), {a.size}),
            device_variable<Server>("p", p.param.memory(), p.grad.memory(), {p.size}),
            device_variable<HalfWire>("c", c.param.memory(), c.grad.memory(), {c.size}),
            device_variable<Dense>("h", h.param.memory(), h.grad.memory(), {h.size}),
            device_variable<Server>("q", q.param.memory(), q.grad.memory(), {q.size})};
  }

  /// Update `u`'s gradients: the same in every run.
  void set_gradients(std::int64_t u) {
    const auto seed = static_cast<std::uint32_t>(1000 * u);
    auto put = [&](auto& b, std::uint32_t offset) {
      using T = typename std::remove_reference_t<decltype(b)>::value_type;
      const std::vector<T> g = values<T>(b.size, seed + offset);
      STRATA_CUDA_CHECK(cudaMemcpy(b.grad.data(), g.data(), b.size * sizeof(T), cudaMemcpyHostToDevice));
    };
    put(a, 1), put(p, 2), put(c, 3), put(h, 4), put(q, 5);
  }

  template <class Executor>
  void train(Executor& exec, std::int64_t from, std::int64_t to) {
    for (std::int64_t u = from; u <= to; ++u) {
      exec.parameters_ready(cudaStreamLegacy);
      set_gradients(u);
      exec.step(cudaStreamLegacy);
    }
    exec.wait();
  }

  void expect_equal_to(model& other, const std::string& what) {
    auto same = [&](auto& mine, auto& theirs, const std::string& name) {
      const auto x = gpu_test::to_host(mine.param), y = gpu_test::to_host(theirs.param);
      using T = typename std::decay_t<decltype(x)>::value_type;
      gpu_test::expect_equal(std::span<const T>(x), std::span<const T>(y), what + ": " + name);
    };
    same(a, other.a, "a"), same(p, other.p, "p"), same(c, other.c, "c"), same(h, other.h, "h"), same(q, other.q, "q");
  }
};

/// A folder of its own under the system's temporary folder, removed at the end.
struct temporary_folder {
  std::filesystem::path path;
  explicit temporary_folder(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("strata-nccl-ckpt-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~temporary_folder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

template <class O>
void resumes_bitwise(const O& opt, const std::string& what, const std::set<std::string>& state_names) {
  temporary_folder folder(what);
  const ckpt::store store(folder.path);

  model whole(1);  // uninterrupted: updates 1..6, saving after 3
  {
    auto exec = make_executor(nccl::communicator::single_process(0), whole.bindings(), opt, several_buckets);
    expect(!exec.restore_checkpoint(store).has_value(), what + ": an empty store restores nothing");
    whole.train(exec, 1, 3);
    exec.save_checkpoint(store, {{"epoch", "7"}});
    std::set<std::string> names;
    const ckpt::state_set state = exec.state();
    for (const ckpt::tensor_state& t : state.tensors()) {
      names.insert(t.name);
      const bool ps = t.name.starts_with("p") || t.name.starts_with("q");
      expect(t.how == (ps ? ckpt::sharing::sharded : ckpt::sharing::replicated),
             what + ": \"" + t.name + "\" is " + (ps ? "sharded" : "replicated"));
    }
    expect(names == state_names, what + ": the state's tensors carry the host executor's names");
    whole.train(exec, 4, 6);
  }

  model resumed(99);  // other initial parameters: the restore must replace every one
  auto exec = make_executor(nccl::communicator::single_process(0), resumed.bindings(), opt, several_buckets);
  const auto restored = exec.restore_checkpoint(store);
  expect(restored && restored->step == 3 && exec.updates() == 3, what + ": restored update 3");
  expect(restored && restored->meta.at("epoch") == "7", what + ": the metadata comes back");
  resumed.train(exec, 4, 6);
  resumed.expect_equal_to(whole, what + ": resumed after update 3, parameters after update 6");
}

/// A NaN in a parameter refuses the save on every rank, naming the tensor; nothing is
/// committed.
void diverged_model_is_not_saved() {
  temporary_folder folder("diverged");
  const ckpt::store store(folder.path);
  model m(5);
  auto exec =
      make_executor(nccl::communicator::single_process(0), m.bindings(), optim::sgd{.lr = 0.1f}, several_buckets);
  m.train(exec, 1, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  STRATA_CUDA_CHECK(cudaMemcpy(m.a.param.data() + 17, &nan, sizeof(float), cudaMemcpyHostToDevice));
  gpu_test::expect_throws<numeric_error>([&] { exec.save_checkpoint(store); }, {"\"a\"", "NaN or infinite", "diverged"},
                                         "a NaN parameter");
  expect(store.committed_steps().empty(), "a diverged model: no checkpoint committed");
}

}  // namespace

int main() {
  return gpu_test::main_on_gpu(STRATA_GPU_SKIP_CODE, [] {
    resumes_bitwise(optim::sgd{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f}, "sgd",
                    {"a", "a/momentum_buffer", "p", "p/momentum_buffer", "c", "c/momentum_buffer", "h",
                     "h/momentum_buffer", "q", "q/momentum_buffer"});
    resumes_bitwise(optim::adam{.lr = 0.01f, .weight_decay = 0.01f}, "adam",
                    {"a", "a/exp_avg", "a/exp_avg_sq", "p", "p/exp_avg", "p/exp_avg_sq", "c", "c/exp_avg",
                     "c/exp_avg_sq", "h", "h/exp_avg", "h/exp_avg_sq", "q", "q/exp_avg", "q/exp_avg_sq"});
    diverged_model_is_not_saved();
  });
}
