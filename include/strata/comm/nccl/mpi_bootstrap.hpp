#pragma once
// nccl::context: the nccl backend in a job launched by mpiexec. MPI picks each rank's GPU
// (its rank among the processes of its machine) and carries NCCL's unique id to every
// rank. Gradient collectives then run over NCCL on device memory; control traffic and the
// parameter server stay on MPI over host memory, because the executor's start-up handshake
// exchanges host buffers and the server probes for requests, which NCCL cannot do.
#include <nccl.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/comm/communicator.hpp"
#include "strata/comm/launch_environment.hpp"
#include "strata/comm/mpi/mpi.hpp"
#include "strata/comm/nccl/nccl.hpp"
#include "strata/cuda/device.cuh"
#include "strata/error.hpp"

namespace strata::nccl {

namespace detail {

/// The GPU of this rank (device_of_local_rank): its local rank, or GPU 0 where it sees one.
/// Collective over `host`: when any rank has none, every rank throws, naming the ranks
/// without one, so that none is left waiting in NCCL's initialization.
inline int choose_device(mpi::context& host) {
  int devices = 0;
  std::string trouble;  // a failure to count is reported as having no GPU, after the exchange
  try {
    devices = cuda::device_count();
  } catch (const cuda_error& e) {
    trouble = std::string(" (counting them failed: ") + e.what() + ")";
  }
  const std::optional<int> device = device_of_local_rank(host.local_rank(), devices);
  const int lacking = device ? 0 : 1;
  std::vector<int> lacks(static_cast<std::size_t>(host.size()));
  host.control().allgather(std::span<const int>(&lacking, 1), std::span<int>(lacks));
  std::vector<int> without;
  for (int r = 0; r < host.size(); ++r)
    if (lacks[static_cast<std::size_t>(r)]) without.push_back(r);
  if (!without.empty())
    throw comm_error(fmt::format("nccl backend: no GPU for rank{} {} (local rank i of a machine takes its GPU i, or "
                                 "GPU 0 where it sees one). "
                                 "This is rank {}, local rank {} of {} on its machine, and it sees {} CUDA device(s){}; "
                                 "start at most one rank per GPU, or check CUDA_VISIBLE_DEVICES",
                                 without.size() > 1 ? "s" : "", fmt::join(without, ", "), host.rank(), host.local_rank(),
                                 host.local_size(), devices, trouble));
  return *device;
}

/// Rank 0 makes NCCL's unique id and broadcasts it, with the status of making it, so a
/// failure there stops every rank instead of leaving them waiting for an id.
inline ncclUniqueId shared_id(mpi::communicator& control) {
  struct message {
    ncclResult_t result = ncclSuccess;
    ncclUniqueId id{};
  } m;
  if (control.rank() == 0) m.result = ncclGetUniqueId(&m.id);
  control.broadcast(std::as_writable_bytes(std::span<message>(&m, 1)), 0);
  if (m.result != ncclSuccess)
    throw comm_error(fmt::format("ncclGetUniqueId failed on rank 0: {} (reported on rank {})",
                                 ncclGetErrorString(m.result), control.rank()));
  return m.id;
}

}  // namespace detail

/// The nccl backend's CommContext over an MPI job. `host` must outlive it.
class context {
 public:
  explicit context(mpi::context& host, options opts = {}) : context(host, detail::choose_device(host), opts) {}
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  int rank() const { return host_.rank(); }
  int size() const { return host_.size(); }
  /// This rank's GPU: every buffer given to collectives() lives there.
  int device() const { return collectives_.device(); }

  /// Dense gradient collectives, on device memory.
  communicator& collectives() { return collectives_; }
  /// Parameter-server requests and replies: MPI over host memory (NCCL cannot probe).
  mpi::communicator& parameter_server() { return host_.parameter_server(); }
  /// Start-up handshakes, barriers, checkpoints: MPI over host memory.
  mpi::communicator& control() { return host_.control(); }

  /// Stops this rank's NCCL kernels, then ends the whole job through MPI.
  [[noreturn]] void abort() {
    collectives_.abort("the job was aborted");
    host_.abort();
  }

 private:
  // Delegated to, so that the device is chosen (a collective) before the id is shared.
  // The rank's GPU is made current on the constructing thread and stays so: the buffers the
  // user allocates next (cudaMalloc, cuDNN, cuBLAS) must live on it, not on device 0, on
  // machines with several GPUs.
  context(mpi::context& host, int device, const options& opts)
      : host_(host), collectives_(detail::shared_id(host.control()), host.size(), host.rank(), device,
                                  host.control().node_color(), opts) {
    detail::check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")", host.rank());
  }

  mpi::context& host_;
  communicator collectives_;
};

static_assert(CommContext<context>);

}  // namespace strata::nccl
