// The nccl backend in an MPI job (mpiexec -n 2): the bootstrap (NCCL's id over MPI, one GPU
// per local rank) and collectives across processes. Without a GPU every rank exits with
// STRATA_GPU_SKIP_CODE; with fewer GPUs than ranks on the machine, it checks instead that
// every rank is refused with a message naming the ranks left without one.
//
// Host code (the MPI bootstrap includes fmt, which nvcc does not compile): the C++
// compiler builds it against the CUDA runtime's host API.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/comm/mpi/mpi.hpp"
#include "strata/comm/nccl/mpi_bootstrap.hpp"
#include "strata/comm/nccl/nccl.hpp"
#include "strata/cuda/device.cuh"
#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"
#include "strata/parallel/tensor_parallel.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what, int rank) {
  if (ok) return;
  ++failures;
  std::printf("rank %d FAILED: %s\n", rank, what.c_str());
}

struct device_free {
  void operator()(float* p) const { static_cast<void>(cudaFree(p)); }
};
using device_floats = std::unique_ptr<float[], device_free>;

/// `host` copied to the communicator's device, ordered before its later operations.
device_floats to_device(strata::nccl::communicator& comm, const std::vector<float>& host) {
  float* p = nullptr;
  strata::nccl::detail::check_cuda(cudaMalloc(&p, host.size() * sizeof(float)), "cudaMalloc", comm.rank());
  device_floats owned(p);
  strata::nccl::detail::check_cuda(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
                                   "cudaMemcpy", comm.rank());
  comm.depend_on(nullptr);
  return owned;
}

std::vector<float> to_host(const device_floats& device, std::size_t n, int rank) {
  std::vector<float> host(n);
  strata::nccl::detail::check_cuda(cudaMemcpy(host.data(), device.get(), n * sizeof(float), cudaMemcpyDeviceToHost),
                                   "cudaMemcpy", rank);
  return host;
}

void across_ranks(strata::nccl::context& ctx) {
  strata::nccl::communicator& comm = ctx.collectives();
  const int rank = comm.rank(), size = comm.size();
  expect(rank == ctx.rank() && size == ctx.size(), "NCCL ranks follow MPI's", rank);

  // Rank r contributes (r + 1) * x: the sum is x * size * (size + 1) / 2.
  const std::vector<float> x = {1.0f, -2.0f, 0.5f};
  std::vector<float> mine;
  for (float v : x) mine.push_back(v * static_cast<float>(rank + 1));
  auto sum = to_device(comm, mine);
  comm.allreduce_sum(std::span<float>(sum.get(), x.size()));
  const std::vector<float> summed = to_host(sum, x.size(), rank);
  for (std::size_t i = 0; i < x.size(); ++i)
    expect(summed[i] == x[i] * static_cast<float>(size * (size + 1) / 2), "allreduce_sum element " + std::to_string(i), rank);

  // From the last rank, so that the root is not 0 by accident.
  auto from_last = to_device(comm, std::vector<float>(2, static_cast<float>(rank)));
  comm.broadcast(std::span<float>(from_last.get(), 2), size - 1);
  for (float v : to_host(from_last, 2, rank)) expect(v == static_cast<float>(size - 1), "broadcast from the last rank", rank);

  auto block = to_device(comm, {static_cast<float>(rank)});
  auto all = to_device(comm, std::vector<float>(static_cast<std::size_t>(size), -1.0f));
  comm.allgather(std::span<const float>(block.get(), 1), std::span<float>(all.get(), static_cast<std::size_t>(size)));
  const std::vector<float> gathered = to_host(all, static_cast<std::size_t>(size), rank);
  for (int r = 0; r < size; ++r)
    expect(gathered[static_cast<std::size_t>(r)] == static_cast<float>(r), "allgather block " + std::to_string(r), rank);

  // One step of a ring: receive from the left, send to the right, posted before waiting.
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  auto out = to_device(comm, {static_cast<float>(rank), 10.0f});
  auto in = to_device(comm, {-1.0f, -1.0f});
  auto received = comm.irecv(std::span<float>(in.get(), 2), left, 3);
  auto sent = comm.isend(std::span<const float>(out.get(), 2), right, 3);
  comm.wait(received);
  comm.wait(sent);
  const std::vector<float> got = to_host(in, 2, rank);
  expect(got[0] == static_cast<float>(left) && got[1] == 10.0f, "a ring step's receive from the left", rank);

  comm.barrier();
}

static_assert(strata::CommContext<strata::group_context<strata::nccl::context>>);

/// A mesh over the nccl backend: every rank one pipeline stage. The driver's messages are
/// device memory; stage s adds s + 1 to the activation, and gradients come back unchanged.
/// (Synchronous copies stand in for kernels here; tests/simdev/model_parallel_test.cpp has
/// the asynchronous case.)
void pipeline_on_device(strata::nccl::context& ctx) {
  strata::mesh grid(ctx, strata::mesh_shape{1, 1, ctx.size()});
  cudaStream_t compute = nullptr;
  strata::nccl::detail::check_cuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate", ctx.rank());
  auto pipe = strata::pipeline::make_driver(grid, std::vector<std::size_t>(static_cast<std::size_t>(ctx.size() - 1), 2),
                                            compute);
  auto& tp = grid.tensor().collectives();  // one rank: the all-reduce of a split layer is the identity
  const int rank = ctx.rank(), stages = ctx.size();
  auto host_of = [&](std::span<const float> device) {
    std::vector<float> host(device.size());
    strata::nccl::detail::check_cuda(cudaStreamSynchronize(grid.pipeline().collectives().stream()), "cudaStreamSynchronize", rank);
    strata::nccl::detail::check_cuda(cudaMemcpy(host.data(), device.data(), device.size_bytes(), cudaMemcpyDeviceToHost),
                                     "cudaMemcpy", rank);
    return host;
  };
  auto write = [&](std::span<float> device, float value) {
    const std::vector<float> host(device.size(), value);
    strata::nccl::detail::check_cuda(cudaMemcpy(device.data(), host.data(), device.size_bytes(), cudaMemcpyHostToDevice),
                                     "cudaMemcpy", rank);
  };
  pipe.run(
      strata::pipeline::one_f_one_b{}, 3,
      [&](int i, std::span<const float> in, std::span<float> out) {
        const float x = pipe.first() ? static_cast<float>(10 * i) : host_of(in)[0];
        if (pipe.last()) expect(x == static_cast<float>(10 * i + stages * (stages - 1) / 2), "the last stage's activation", rank);
        else write(out, x + static_cast<float>(rank + 1));
      },
      [&](int i, std::span<const float> out_grad, std::span<float> in_grad) {
        const float g = pipe.last() ? static_cast<float>(-i) : host_of(out_grad)[0];
        expect(g == static_cast<float>(-i), "a gradient passed back unchanged", rank);
        if (!pipe.first()) write(in_grad, g);
      });
  auto ones = to_device(tp, {1.0f, 1.0f});
  strata::tensor_parallel::reduce_from_group::forward(grid.tensor(), std::span<float>(ones.get(), 2), compute);
  expect(to_host(ones, 2, rank)[0] == 1.0f, "a one-rank tensor group's sum", rank);
  strata::nccl::detail::check_cuda(cudaStreamDestroy(compute), "cudaStreamDestroy", rank);
}

/// Fewer GPUs than ranks on this machine: every rank must refuse, naming the ranks.
void refused(strata::mpi::context& host, int devices) {
  try {
    strata::nccl::context ctx(host);
    expect(false, "nccl::context with " + std::to_string(devices) + " GPU(s) for " + std::to_string(host.local_size()) +
                      " local ranks was accepted",
           host.rank());
  } catch (const strata::comm_error& e) {
    const std::string_view message = e.what();
    const std::string lacking = "rank" + std::string(host.local_size() - devices > 1 ? "s " : " ") + std::to_string(devices);
    expect(message.find("no GPU for " + lacking) != std::string_view::npos, "the refusal names the ranks: " + std::string(message),
           host.rank());
  }
}

}  // namespace

int main(int argc, char** argv) {
  strata::mpi::context host(argc, argv);
  try {
    const int devices = strata::cuda::device_count();
    if (devices == 0) {
      std::printf("rank %d: no CUDA device: skipped\n", host.rank());
      return STRATA_GPU_SKIP_CODE;
    }
    if (devices < host.local_size()) {
      refused(host, devices);
    } else {
      // A rank that fails leaves its peer waiting in a collective until the deadline.
      strata::nccl::context ctx(host, {.timeout = std::chrono::seconds(60)});
      across_ranks(ctx);
      pipeline_on_device(ctx);
    }
  } catch (const std::exception& e) {
    std::printf("rank %d FAILED with an exception: %s\n", host.rank(), e.what());
    ++failures;
  }
  // Every rank reports the job's verdict, so mpiexec's exit code does not depend on which
  // rank ended first.
  double total = failures;
  host.control().allreduce_sum(std::span<double>(&total, 1));
  if (host.rank() == 0) std::printf("%s\n", total == 0 ? "all passed" : "some checks FAILED");
  return total == 0 ? 0 : 1;
}
