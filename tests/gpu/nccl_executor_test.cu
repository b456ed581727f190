// The nccl executor on one rank, without MPI: its updates against the host optimizers on
// the same data (fp32 to rounding, since nvcc fuses multiply-adds; fp16 and bf16 to one unit
// in the last place of their type), replicated and PS variables side by side (the PS
// buckets reduce-scatter, update the rank's slice and all-gather; on one rank the slice is
// the whole padded bucket), fp16/bf16 on the wire, gradient accumulation over micro-batches,
// grad_ready's ordering after a user stream's work,
// step() returning while the device is busy, and the binding and usage errors. Exits with
// STRATA_GPU_SKIP_CODE when there is no GPU.
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "deterministic.hpp"
#include "gpu_test.hpp"
#include "strata/cuda/device.cuh"
#include "strata/exec/nccl_executor.cuh"

namespace {

using namespace strata;
using gpu_test::expect;
using gpu_test::expect_throws;
using Dense = Strategy<Replicate, AllReduce<Native>>;
using Server = Strategy<PS<2>, Partition<0>>;
using HalfWire = Strategy<Replicate, AllReduce<Native>, Compress<FP16>>;
using Bfloat16Wire = Strategy<Replicate, AllReduce<Native>, Compress<BF16>>;

/// How matches_host declares its variables.
enum class declared { replicated, ps, compressed };

// Small buckets, so a handful of variables fill several.
const nccl_executor_options several_buckets{.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 8192},
                                                .initialized_on = cudaStreamLegacy};

using strata_test::values;

template <class T>
std::vector<T> rounded(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
std::vector<float> widened(const std::vector<T>& v) {
  return std::vector<float>(v.begin(), v.end());
}

/// One variable: its device buffers and the host's reference of the same update (fp32
/// master parameters and optimizer state).
template <class T, class O>
struct tracked {
  std::string name;
  std::size_t size;
  cuda::device_buffer<T> param, grad;
  std::vector<float> master;
  typename O::state state;

  tracked(std::string n, std::size_t elements, const O& opt, std::uint32_t seed)
      : name(std::move(n)), size(elements), param(gpu_test::to_device(rounded<T>(values(elements, seed)))),
        grad(elements, nullptr), master(widened(rounded<T>(values(elements, seed)))), state(opt.make_state(elements)) {
    STRATA_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  template <class S = Dense>
  device_variable_binding binding() {
    return device_variable<S>(name, param.memory(), grad.memory(), {size});
  }

  /// This step's gradient (the same on device and host), written on the null stream.
  std::vector<T> set_gradient(std::uint32_t seed) {
    std::vector<T> g = rounded<T>(values(size, seed));
    STRATA_CUDA_CHECK(cudaMemcpy(grad.data(), g.data(), size * sizeof(T), cudaMemcpyHostToDevice));
    return g;
  }

  /// `wire`: the type the gradient travels in (rounded to it on one rank).
  template <class Wire = T>
  void host_update(const O& opt, const std::vector<T>& g, std::int64_t step) {
    host_update_averaged(opt, widened(rounded<Wire>(widened(g))), step);
  }

  void host_update_averaged(const O& opt, const std::vector<float>& average, std::int64_t step) {
    opt.update(master, average, state, step);
  }

  /// The device's parameters equal the host's to `tolerance`, and the gradient was only read.
  void compare(const std::vector<T>& g, float tolerance, const std::string& what) {
    gpu_test::expect_near(widened(gpu_test::to_host(param)), widened(rounded<T>(master)), tolerance,
                          what + ": parameters of " + name);
    const std::vector<T> after = gpu_test::to_host(grad);
    gpu_test::expect_equal(std::span<const T>(after), std::span<const T>(g), what + ": gradient of " + name + " untouched");
  }
};

/// Two steps of a model of three fp32 variables and one of each 16-bit type, against the
/// host: the first marks nothing (step() takes every gradient from the null stream), the
/// second marks every gradient on a stream of its own, in backward order. Declared `ps`, a,
/// h and c are PS variables (fp32 and fp16 PS buckets among replicated ones); declared
/// `compressed`, a travels as fp16 and b as bf16 (Compress<...>).
template <class O>
void matches_host(const O& opt, const std::string& what, declared how = declared::replicated) {
  const bool ps = how == declared::ps, compressed = how == declared::compressed;
  tracked<float, O> a("a", 1000, opt, 1), b("b", 7, opt, 2), c("c", 4097, opt, 3);
  tracked<strata::half, O> h("h", 513, opt, 4);
  tracked<bfloat16, O> bf("bf", 300, opt, 5);
  auto bind = [&](auto& v) { return ps ? v.template binding<Server>() : v.binding(); };
  auto exec = make_executor(nccl::communicator::single_process(0),
                     {compressed ? a.template binding<HalfWire>() : bind(a), bind(h),
                      compressed ? b.template binding<Bfloat16Wire>() : b.binding(), bf.binding(), bind(c)},
                     opt, several_buckets);
  cudaStream_t stream = nullptr;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (std::int64_t step = 1; step <= 2; ++step) {
    const auto seed = static_cast<std::uint32_t>(100 * step);
    const auto ga = a.set_gradient(seed + 1), gb = b.set_gradient(seed + 2), gc = c.set_gradient(seed + 3);
    const auto gh = h.set_gradient(seed + 4);
    const auto gbf = bf.set_gradient(seed + 5);
    if (step == 1) {
      exec.step(cudaStreamLegacy);
    } else {
      // The gradients were copied on the null stream (a pageable cudaMemcpy may return before
      // its DMA lands), which a non-blocking stream does not wait for by itself.
      cudaEvent_t written = nullptr;
      STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
      STRATA_CUDA_CHECK(cudaEventRecord(written, nullptr));
      STRATA_CUDA_CHECK(cudaStreamWaitEvent(stream, written, 0));
      STRATA_CUDA_CHECK(cudaEventDestroy(written));
      for (const char* name : {"c", "bf", "b", "h", "a"}) exec.grad_ready(name, stream);
      exec.step(stream);
    }
    exec.parameters_ready(stream);
    STRATA_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (compressed) {
      a.template host_update<strata::half>(opt, ga, step);
      b.template host_update<bfloat16>(opt, gb, step);
    } else {
      a.host_update(opt, ga, step);
      b.host_update(opt, gb, step);
    }
    c.host_update(opt, gc, step);
    h.host_update(opt, gh, step);
    bf.host_update(opt, gbf, step);
    const std::string at = what + ", step " + std::to_string(step);
    a.compare(ga, 1e-5f, at), b.compare(gb, 1e-5f, at), c.compare(gc, 1e-5f, at);
    h.compare(gh, 1.0f / 1024, at);  // one unit in the last place of half near 1
    bf.compare(gbf, 1.0f / 128, at);
  }
  expect(exec.updates() == 2, what + ": two updates");
  // State for every element (one rank owns every slice), PS slices padded to 64 elements;
  // the PS buckets' master copies are the server's values.
  const std::size_t per_element = exec.memory().optimizer_state == 0 ? 0 : std::is_same_v<O, optim::adam> ? 8 : 4;
  if (ps) {
    expect(exec.memory().server_values > 0 && exec.memory().server_values % (64 * 4) == 0,
           what + ": PS master slices in whole aligned slices");
    expect(exec.memory().server_values >= (1000 + 513 + 4097) * 4, what + ": every PS element has a master value");
  } else {
    expect(exec.memory().server_values == 0, what + ": no PS variables, no server values");
  }
  expect(exec.memory().optimizer_state >= (1000 + 7 + 4097 + 513 + 300) * per_element,
         what + ": optimizer state for every element");
  exec.wait();
  STRATA_CUDA_CHECK(cudaStreamDestroy(stream));
}

/// With accumulation_steps = 3, the first two step() calls only add the gradients up (in
/// fp32; they update nothing) and the third reduces their mean, rounded once to the wire
/// type, and updates with it: replicated fp32 and fp16, compressed to fp16 on the wire, PS.
void accumulates_micro_batches() {
  const optim::sgd opt{.lr = 0.1f, .momentum = 0.9f};
  constexpr int micro_batches = 3;
  tracked<float, optim::sgd> a("a", 1000, opt, 11), c("c", 500, opt, 13), p("p", 700, opt, 14);
  tracked<strata::half, optim::sgd> h("h", 300, opt, 12);
  auto exec = make_executor(nccl::communicator::single_process(0),
                     {a.binding(), h.binding(), c.template binding<HalfWire>(), p.template binding<Server>()}, opt,
                     {.buckets = several_buckets.buckets, .initialized_on = cudaStreamLegacy, .accumulation_steps = micro_batches});
  const float scale = 1.0f / micro_batches;
  for (std::int64_t update = 1; update <= 2; ++update) {
    std::vector<float> sum_a(a.size, 0.0f), sum_h(h.size, 0.0f), sum_c(c.size, 0.0f), sum_p(p.size, 0.0f);
    std::vector<float> ga, gc, gp;
    std::vector<strata::half> gh;
    for (int micro = 0; micro < micro_batches; ++micro) {
      const auto seed = static_cast<std::uint32_t>(1000 * update + 10 * micro);
      ga = a.set_gradient(seed + 1);
      gh = h.set_gradient(seed + 2);
      gc = c.set_gradient(seed + 3);
      gp = p.set_gradient(seed + 4);
      for (std::size_t i = 0; i < a.size; ++i) sum_a[i] += ga[i];
      for (std::size_t i = 0; i < h.size; ++i) sum_h[i] += static_cast<float>(gh[i]);
      for (std::size_t i = 0; i < c.size; ++i) sum_c[i] += gc[i];
      for (std::size_t i = 0; i < p.size; ++i) sum_p[i] += gp[i];
      const bool updated = exec.step(cudaStreamLegacy);
      expect(updated == (micro + 1 == micro_batches), "step() reports an update on the last micro-batch only");
      exec.parameters_ready(cudaStreamLegacy);  // the next gradients overwrite this one's only after it was read
      STRATA_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    }
    // The mean is taken in fp32, then rounded to the wire type (one rank: the all-reduce
    // and its 1/ranks change nothing).
    auto mean = [&]<class Wire>(const std::vector<float>& sum, Wire) {
      std::vector<float> m(sum.size());
      for (std::size_t i = 0; i < sum.size(); ++i) m[i] = static_cast<float>(Wire(sum[i] * scale));
      return m;
    };
    a.host_update_averaged(opt, mean(sum_a, 0.0f), update);
    h.host_update_averaged(opt, mean(sum_h, strata::half()), update);
    c.host_update_averaged(opt, mean(sum_c, strata::half()), update);
    p.host_update_averaged(opt, mean(sum_p, 0.0f), update);
    const std::string at = "accumulation, update " + std::to_string(update);
    a.compare(ga, 1e-5f, at);
    h.compare(gh, 1.0f / 1024, at);
    c.compare(gc, 1e-5f, at + " (fp16 on the wire)");
    p.compare(gp, 1e-5f, at + " (PS)");
  }
  expect(exec.updates() == 2, "accumulation: two updates from six micro-batches");
  expect_throws<usage_error>(
      [&] { make_executor(nccl::communicator::single_process(0), {a.binding()}, opt, {.buckets = {}, .initialized_on = cudaStreamLegacy, .accumulation_steps = 0}); },
      {"accumulation_steps", "at least 1"}, "zero micro-batches");
}

__global__ void sleep_kernel(unsigned milliseconds) {
  for (unsigned i = 0; i < milliseconds; ++i) __nanosleep(1000000);
}

/// grad_ready(v, stream) orders the reduction after the stream's work: the gradient is
/// copied in on the user's stream only after a 100 ms kernel, and the update still sees it.
void waits_for_the_user_stream() {
  const optim::sgd opt{.lr = 0.5f};
  tracked<float, optim::sgd> a("a", 4096, opt, 7);
  auto exec = make_executor(nccl::communicator::single_process(0), {a.binding()}, opt, {.buckets = {}, .initialized_on = cudaStreamLegacy});
  const std::vector<float> g = values(a.size, 8);
  const auto source = gpu_test::to_device(g);
  STRATA_CUDA_CHECK(cudaMemset(a.grad.data(), 0, a.size * sizeof(float)));
  STRATA_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t user = nullptr;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking));
  sleep_kernel<<<1, 1, 0, user>>>(100);
  STRATA_CUDA_CHECK(cudaGetLastError());
  STRATA_CUDA_CHECK(cudaMemcpyAsync(a.grad.data(), source.data(), a.size * sizeof(float), cudaMemcpyDeviceToDevice, user));
  exec.grad_ready("a", user);
  exec.step(user);
  exec.parameters_ready(user);
  STRATA_CUDA_CHECK(cudaStreamSynchronize(user));
  a.host_update(opt, g, 1);
  a.compare(g, 1e-5f, "a gradient written late on the user's stream");
  STRATA_CUDA_CHECK(cudaStreamDestroy(user));
}

/// Spins until the host sets `*flag` (mapped host memory) or about two seconds pass, and
/// reports which.
__global__ void wait_for_host(const volatile int* flag, int* released) {
  int seen = 0;
  for (int i = 0; i < 2000000 && !(seen = *flag); ++i) __nanosleep(1000);
  *released = seen;
}

/// step() returns while the user's stream is still busy: a device-wide synchronize in it
/// would wait for the kernel, which only the host can release after step() has returned.
void step_does_not_block() {
  const optim::sgd opt{.lr = 0.1f};
  tracked<float, optim::sgd> a("a", 256, opt, 9);
  auto exec = make_executor(nccl::communicator::single_process(0), {a.binding()}, opt, {.buckets = {}, .initialized_on = cudaStreamLegacy});
  int* flag = nullptr;
  STRATA_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flag), 2 * sizeof(int), cudaHostAllocMapped));
  flag[0] = flag[1] = 0;
  int* device_flag = nullptr;
  STRATA_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0));
  cudaStream_t user = nullptr;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking));
  wait_for_host<<<1, 1, 0, user>>>(device_flag, device_flag + 1);
  STRATA_CUDA_CHECK(cudaGetLastError());
  exec.grad_ready("a", user);
  exec.step(user);
  *static_cast<volatile int*>(flag) = 1;
  exec.wait();
  STRATA_CUDA_CHECK(cudaStreamSynchronize(user));
  expect(static_cast<volatile int*>(flag)[1] == 1, "step() returned before the user's stream finished");
  STRATA_CUDA_CHECK(cudaStreamDestroy(user));
  STRATA_CUDA_CHECK(cudaFreeHost(flag));
}

/// Host memory bound as device memory, and an executor used out of order, are named.
void errors() {
  const optim::sgd opt{};
  std::vector<float> host(16);
  cuda::device_buffer<float> grad(16, nullptr), param(16, nullptr);
  auto make = [&](std::vector<device_variable_binding> variables) {
    return make_executor(nccl::communicator::single_process(0), std::move(variables), opt, {.buckets = {}, .initialized_on = cudaStreamLegacy});
  };
  expect_throws<binding_error>(
      [&] { make({device_variable<Dense>("host.weight", device_span<float>(host.data(), 16), grad.memory(), {16})}); },
      {"\"host.weight\"", "rank 0", "parameter", "host memory", "device memory of GPU 0"}, "a pageable host parameter");
  float* pinned = nullptr;
  STRATA_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), 16 * sizeof(float)));
  expect_throws<binding_error>(
      [&] { make({device_variable<Dense>("pinned.bias", param.memory(), device_span<float>(pinned, 16), {16})}); },
      {"\"pinned.bias\"", "rank 0", "gradient", "pinned host memory"}, "a pinned host gradient");
  STRATA_CUDA_CHECK(cudaFreeHost(pinned));
  cuda::device_buffer<float> other_param(16, nullptr), other_grad(16, nullptr);
  expect_throws<binding_error>(
      [&] {
        make({device_variable<Dense>("w", param.memory(), grad.memory(), {16}),
              device_variable<Dense>("w", other_param.memory(), other_grad.memory(), {16})});
      },
      {"\"w\"", "declared twice"}, "a name declared twice");

  auto twice = make({device_variable<Dense>("w", param.memory(), grad.memory(), {16}),
                     device_variable<Dense>("v", other_param.memory(), other_grad.memory(), {16})});
  twice.grad_ready("w", cudaStreamLegacy);
  expect_throws<usage_error>([&] { twice.grad_ready("w", cudaStreamLegacy); }, {"\"w\"", "twice"}, "grad_ready twice");
  expect_throws<usage_error>([&] { twice.step(cudaStreamLegacy); }, {"\"v\"", "never marked"}, "a step with one gradient unmarked");
  expect_throws<binding_error>([&] { twice.index("nothing"); }, {"\"nothing\"", "rank 0"}, "an unknown name");
}

}  // namespace

int main() {
  return gpu_test::main_on_gpu(STRATA_GPU_SKIP_CODE, [] {
    matches_host(optim::sgd{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f}, "sgd with momentum");
    matches_host(optim::sgd{.lr = 0.1f}, "plain sgd");
    matches_host(optim::adam{.lr = 0.01f, .weight_decay = 0.01f}, "adam");
    matches_host(optim::sgd{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f}, "PS, sgd with momentum", declared::ps);
    matches_host(optim::adam{.lr = 0.01f, .weight_decay = 0.01f}, "PS, adam", declared::ps);
    matches_host(optim::adam{.lr = 0.01f}, "fp16 and bf16 on the wire, adam", declared::compressed);
    accumulates_micro_batches();
    waits_for_the_user_stream();
    step_does_not_block();
    errors();
  });
}
