#pragma once
// The nccl backend: collectives between GPUs, one GPU per rank, over NCCL. Host code only
// (no kernels of its own), compiled by nvcc or a host compiler with the CUDA headers; it
// includes no MPI (the MPI bootstrap is comm/nccl/mpi_bootstrap.hpp), so one process can
// make a one-rank communicator with `communicator::single_process()` and no launcher.
//
// It models the Collectives and PointToPoint concepts, with these differences from the mpi
// backend:
// - Buffers are device memory of the communicator's GPU. Every operation runs on the
//   communicator's own CUDA stream (`stream()`); data produced on another stream must be
//   ordered before the call (`depend_on(producer)` or a synchronization).
// - isend/irecv are posted, not started: NCCL has no unexpected-message queue, and a
//   send blocks its stream until the peer's receive runs, so a rank that sends right and
//   receives left (the ring) would deadlock with one operation at a time. The posted
//   operations start together, as one ncclGroupStart/End group, at the next wait or
//   collective. Tags are not matched: NCCL pairs one rank's sends to a peer with that
//   peer's receives in posting order, and the counts must be equal (MPI allows a larger
//   receive). Patterns that post a pair's messages in the same order on both sides, as
//   strata's ring and tree do, match as under MPI. Bytes travel like elements (device
//   memory too).
// - It has no iprobe (it does not model Probing): NCCL can only receive what the receiver
//   already expects. The parameter server, whose byte messages arrive unasked and are
//   found by probing, needs Probing and is refused at compile time; it runs over host
//   memory: nccl::context's parameter_server() is an mpi communicator.
// - wait() synchronizes with the stream, checks NCCL's asynchronous error state while it
//   polls, and gives up at a deadline (options::timeout): the communicator is then
//   aborted (ncclCommAbort) and timeout_error thrown, so a dead peer cannot hang a rank.
// - One thread at a time per communicator (the executor's communication thread).
//
// Every NCCL and CUDA status is checked; a failure throws comm_error or cuda_error naming
// the call, the rank and NCCL's explanation (ncclGetErrorString, ncclGetLastError). The
// NCCL communicator is non-blocking (ncclConfig_t::blocking = 0): initialization and
// every enqueue are polled with ncclCommGetAsyncError against the deadline.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/cuda/buffer.cuh"
#include "strata/error.hpp"
#include "strata/timeout_setting.hpp"

namespace strata::nccl {

struct options {
  /// How long initialization, a split and each wait may take before the communicator is
  /// aborted and timeout_error thrown: STRATA_TIMEOUT_SECONDS, as for every other wait.
  std::chrono::milliseconds timeout = std::chrono::ceil<std::chrono::milliseconds>(default_timeout());
};

/// What travels point to point: the element types, and bytes.
template <class T>
concept Payload = Element<T> || std::same_as<T, std::byte>;

namespace detail {

template <Payload T>
constexpr ncclDataType_t datatype() {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, half>) return ncclFloat16;
  else if constexpr (std::is_same_v<T, bfloat16>) return ncclBfloat16;
  else return ncclUint8;
}

inline std::string on_rank(int rank) { return rank >= 0 ? " on rank " + std::to_string(rank) : std::string(); }

inline void check_cuda(cudaError_t status, std::string_view call, int rank) {
  if (status != cudaSuccess)
    throw cuda_error(std::string(call) + " failed" + on_rank(rank) + ": " + cudaGetErrorString(status) + " (" +
                     cudaGetErrorName(status) + ")");
}

/// NCCL_VERSION_CODE's two encodings: 2.8.x and earlier are X*1000+Y*100+Z.
inline std::string nccl_version_text(int code) {
  const bool old = code < 10000;
  const int major = old ? code / 1000 : code / 10000;
  const int minor = old ? code % 1000 / 100 : code % 10000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}
inline int nccl_major(int code) { return code < 10000 ? code / 1000 : code / 10000; }

inline std::string cuda_version_text(int code) { return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10); }

}  // namespace detail

/// Throws when the libraries loaded at run time cannot run code built against these
/// headers: an NCCL of another major version or older than the headers, a CUDA runtime of
/// another major version or older than the headers, or a driver older than the runtime's
/// major version (newer minors of one major run on that major's driver).
inline void check_versions() {
  int nccl = 0;
  if (const ncclResult_t r = ncclGetVersion(&nccl); r != ncclSuccess)
    throw comm_error(std::string("ncclGetVersion failed: ") + ncclGetErrorString(r));
  if (detail::nccl_major(nccl) != NCCL_MAJOR || nccl < NCCL_VERSION_CODE)
    throw comm_error("strata was compiled against NCCL " + detail::nccl_version_text(NCCL_VERSION_CODE) +
                     " but loaded NCCL " + detail::nccl_version_text(nccl) + "; load NCCL " + std::to_string(NCCL_MAJOR) +
                     ".x at least as new as the headers (LD_LIBRARY_PATH), or rebuild against the installed one");
  int runtime = 0, driver = 0;
  detail::check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion", -1);
  detail::check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion", -1);
  if (runtime / 1000 != CUDART_VERSION / 1000 || runtime < CUDART_VERSION)
    throw cuda_error("strata was compiled against CUDA runtime " + detail::cuda_version_text(CUDART_VERSION) +
                     " but loaded " + detail::cuda_version_text(runtime) + "; load a runtime of the same major version, at "
                     "least as new as the headers");
  if (driver < runtime / 1000 * 1000)
    throw cuda_error(driver == 0 ? std::string("no CUDA driver is installed")
                                 : "the CUDA driver supports CUDA " + detail::cuda_version_text(driver) +
                                       ", older than the CUDA " + detail::cuda_version_text(runtime) +
                                       " runtime strata loaded; update the driver");
}

namespace detail {

/// Makes `device` current for the scope (streams, events and memory belong to the device
/// current when they are created).
class device_scope {
 public:
  device_scope(int device, int rank) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice", rank);
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")", rank);
  }
  ~device_scope() { static_cast<void>(cudaSetDevice(previous_)); }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = 0;
};

/// A send or receive posted and not yet started.
struct transfer {
  bool send;
  void* data;
  std::size_t count;
  ncclDataType_t type;
  int peer;
};

/// One NCCL communicator, its stream and what waits need. Shared by a communicator's
/// copies; the last one finalizes (or, after a failure, has aborted) the NCCL communicator.
class comm_state {
 public:
  /// Starts a non-blocking NCCL communicator with `initiate(&comm, &config)` (an init or a
  /// split) on `device` and waits for it within the deadline. `rank` names this rank in
  /// errors until NCCL reports its own. A split's `parent` is waited for first: NCCL fills
  /// the child's handle only once the parent has left ncclInProgress (NVIDIA/nccl#1472).
  template <class Initiate>
  static std::shared_ptr<comm_state> create(int device, int rank, int node_color, const options& opts,
                                            std::string_view call, Initiate initiate, comm_state* parent = nullptr) {
    static const bool versions_checked = (check_versions(), true);
    static_cast<void>(versions_checked);
    device_scope on_device(device, rank);
    auto state = std::shared_ptr<comm_state>(new comm_state(device, rank, node_color, opts));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t started = initiate(&state->comm_, &config);
    if (started != ncclSuccess && started != ncclInProgress) state->fail(started, call);
    try {
      if (parent) parent->settle(call, state->deadline());
      if (!state->comm_) throw comm_error(std::string(call) + on_rank(rank) + " finished without a communicator");
      state->settle(call, state->deadline());
    } catch (...) {
      // A split that failed or timed out leaves neither communicator usable (the parent's
      // bootstrap may still wait in it): both are aborted, so no peer waits on either.
      state->abort(std::string(call) + " failed");
      if (parent) parent->abort("a split from it failed");
      throw;
    }
    state->check(ncclCommUserRank(state->comm_, &state->rank_), "ncclCommUserRank");
    state->check(ncclCommCount(state->comm_, &state->size_), "ncclCommCount");
    check_cuda(cudaStreamCreateWithFlags(&state->stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", state->rank_);
    check_cuda(cudaEventCreateWithFlags(&state->done_, cudaEventDisableTiming), "cudaEventCreateWithFlags", state->rank_);
    check_cuda(cudaEventCreateWithFlags(&state->ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags", state->rank_);
    check_cuda(cudaMalloc(&state->scratch_, sizeof(float)), "cudaMalloc (barrier scratch)", state->rank_);
    check_cuda(cudaMemsetAsync(state->scratch_, 0, sizeof(float), state->stream_), "cudaMemsetAsync", state->rank_);
    return state;
  }

  comm_state(const comm_state&) = delete;
  comm_state& operator=(const comm_state&) = delete;

  ~comm_state() {
    if (comm_) {
      // Finalize flushes what is still in flight; if it fails or outlasts the deadline, abort.
      ncclResult_t result = ncclCommFinalize(comm_);
      const auto until = deadline();
      for (unsigned polls = 0; result == ncclInProgress && std::chrono::steady_clock::now() < until; ++polls) {
        if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) break;
        if (result == ncclInProgress) pause(polls);
      }
      static_cast<void>(result == ncclSuccess ? ncclCommDestroy(comm_) : ncclCommAbort(comm_));
    }
    // Destructors cannot throw; these fail only in a context that is already broken.
    if (scratch_) static_cast<void>(cudaFree(scratch_));
    if (ready_) static_cast<void>(cudaEventDestroy(ready_));
    if (done_) static_cast<void>(cudaEventDestroy(done_));
    if (stream_) static_cast<void>(cudaStreamDestroy(stream_));
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  int node_color() const { return node_color_; }
  const options& settings() const { return options_; }
  cudaStream_t stream() const { return stream_; }
  ncclComm_t native_handle() const { return comm_; }
  float* scratch() const { return scratch_; }

  std::chrono::steady_clock::time_point deadline() const { return std::chrono::steady_clock::now() + options_.timeout; }

  /// Throws comm_error when the communicator was aborted; `call` is what was attempted.
  void ensure_usable(std::string_view call) const {
    if (!comm_)
      throw comm_error(std::string(call) + on_rank(rank_) + ": the nccl communicator was aborted after an earlier failure: " +
                       abort_reason_);
  }

  /// Throws on failure; see fail().
  void check(ncclResult_t result, std::string_view call) {
    if (result != ncclSuccess && result != ncclInProgress) fail(result, call);
  }

  /// Throws comm_error naming the call, the rank and NCCL's explanation. A communicator
  /// NCCL still reports healthy (an argument rejected before anything started) stays
  /// usable; otherwise it is aborted first, so no peer is left waiting on it.
  [[noreturn]] void fail(ncclResult_t result, std::string_view call) {
    std::string message = std::string(call) + " failed" + on_rank(rank_) + ": " + ncclGetErrorString(result);
    if (const char* last = ncclGetLastError(comm_); last && *last) message += " (" + std::string(last) + ")";
    ncclResult_t state = ncclSuccess;
    if (comm_ && (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state != ncclSuccess)) {
      message += "; the communicator was aborted";
      abort(message);
    }
    throw comm_error(message);
  }

  /// Polls until NCCL has finished what the last call started (non-blocking mode returns
  /// ncclInProgress while it works), failing at `until`.
  void settle(std::string_view call, std::chrono::steady_clock::time_point until) {
    for (unsigned polls = 0;; ++polls) {
      ncclResult_t state = ncclInProgress;
      check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(state, call);
      if (std::chrono::steady_clock::now() > until) time_out(call);
      pause(polls);
    }
  }

  /// Aborts the communicator and throws timeout_error.
  [[noreturn]] void time_out(std::string_view call) {
    const std::string message = std::string(call) + on_rank(rank_) + " did not finish within " +
                                std::to_string(options_.timeout.count()) +
                                " ms (nccl::options::timeout): a peer has failed or stopped calling the same "
                                "operations; the communicator was aborted";
    abort(message);
    throw timeout_error(message);
  }

  /// Gives the communicator up: NCCL stops its kernels and frees it; later calls throw.
  void abort(std::string reason) noexcept {
    if (!comm_) return;
    static_cast<void>(ncclCommAbort(comm_));
    comm_ = nullptr;
    abort_reason_ = std::move(reason);
    pending_.clear();
  }

  /// Yields while an answer is likely soon, then sleeps briefly to leave the core.
  static void pause(unsigned polls) {
    if (polls < 1000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  // Operations are numbered as they are posted; a stream runs them in order, so one that
  // is numbered at most `completed_` has finished.
  std::uint64_t posted_ = 0, launched_ = 0, completed_ = 0;
  std::vector<transfer> pending_;
  cudaEvent_t done_ = nullptr;   // recorded by wait()
  cudaEvent_t ready_ = nullptr;  // recorded by depend_on()

 private:
  comm_state(int device, int rank, int node_color, const options& opts)
      : device_(device), rank_(rank), node_color_(node_color), options_(opts) {}

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;
  int device_;
  int rank_;
  int size_ = 0;
  int node_color_;
  options options_;
  std::string abort_reason_;
};

}  // namespace detail

/// One NCCL communicator over device memory. Copies share it; the last copy finalizes it.
class communicator {
 public:
  /// An operation posted or launched; waiting one that finished is a no-op.
  struct request {
    std::uint64_t ticket = 0;
  };

  /// Joins the communicator named by `id` (the same id on all `size` ranks) as `rank`,
  /// on `device`. Collective: blocks until every rank has joined or the timeout passes.
  communicator(const ncclUniqueId& id, int size, int rank, int device, int node_color = 0, options opts = {})
      : state_(detail::comm_state::create(device, rank, node_color, opts, "ncclCommInitRankConfig",
                                          [&](ncclComm_t* comm, ncclConfig_t* config) {
                                            return ncclCommInitRankConfig(comm, size, id, rank, config);
                                          })) {}

  /// A one-rank communicator on `device`, for single-process use and tests: no launcher,
  /// no MPI.
  static communicator single_process(int device = 0, options opts = {}) {
    ncclUniqueId id;
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      throw comm_error(std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r));
    return communicator(id, 1, 0, device, 0, opts);
  }

  int rank() const { return state_->rank(); }
  int size() const { return state_->size(); }
  std::string_view backend_name() const { return "nccl"; }
  int node_color() const { return state_->node_color(); }
  /// The CUDA device every buffer must live on.
  int device() const { return state_->device(); }
  /// The stream all of this communicator's operations run on.
  cudaStream_t stream() const { return state_->stream(); }
  /// Null once aborted.
  ncclComm_t native_handle() const { return state_->native_handle(); }

  /// `n` floats of this communicator's GPU, allocated and freed in order on its stream: a
  /// buffer for data strata stages itself (the pipeline driver's messages).
  cuda::device_buffer<float> allocate(std::size_t n) const { return cuda::device_buffer<float>(n, stream()); }

  /// Orders this communicator's later operations after the work queued so far on
  /// `producer` (a stream of the same device), without blocking the host.
  void depend_on(cudaStream_t producer) {
    detail::check_cuda(cudaEventRecord(state_->ready_, producer), "cudaEventRecord (depend_on)", rank());
    detail::check_cuda(cudaStreamWaitEvent(stream(), state_->ready_, 0), "cudaStreamWaitEvent (depend_on)", rank());
  }

  /// Posted; starts at the next wait or collective (see the file comment). `tag` is not
  /// matched: sends and receives between two ranks pair in posting order.
  template <Payload T>
  request isend(std::span<const T> data, int dest, int /*tag*/) {
    return post({true, const_cast<T*>(data.data()), data.size(), detail::datatype<T>(), dest}, "isend");
  }

  template <Payload T>
  request irecv(std::span<T> data, int source, int /*tag*/) {
    return post({false, data.data(), data.size(), detail::datatype<T>(), source}, "irecv");
  }

  template <Element T>
  request iallreduce_sum(std::span<T> data) {
    return iallreduce(data, ncclSum);
  }
  /// The mean over the ranks, in place. NCCL multiplies each rank's 16-bit values by
  /// 1/size() before it adds them (ncclAvg is a pre-multiplied sum for floating types), so
  /// the mean stays in range wherever the values do; their sum over 8 ranks may not.
  template <Element T>
  request iallreduce_average(std::span<T> data) {
    return iallreduce(data, ncclAvg);
  }

  /// In place: `data` holds size() equal blocks; afterwards this rank's block (at
  /// rank() * block) holds the sum of every rank's block of that index, and the others are
  /// unspecified. The first half of a sharded update.
  template <Element T>
  request ireduce_scatter_sum(std::span<T> data) {
    return ireduce_scatter(data, ncclSum);
  }
  /// ireduce_scatter_sum's mean instead of its sum, pre-multiplied as iallreduce_average's.
  template <Element T>
  request ireduce_scatter_average(std::span<T> data) {
    return ireduce_scatter(data, ncclAvg);
  }

  /// In place: every rank's block of `data` (size() equal blocks; rank r's at r * block)
  /// reaches every rank. The second half of a sharded update.
  template <Element T>
  request iallgather_blocks(std::span<T> data) {
    const std::size_t block = equal_blocks(data.size(), "iallgather_blocks");
    return launch("ncclAllGather", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllGather(data.data() + static_cast<std::size_t>(rank()) * block, data.data(), block, detail::datatype<T>(), comm, stream);
    });
  }

  template <Element T>
  void allreduce_sum(std::span<T> data) {
    request r = iallreduce_sum(data);
    wait(r);
  }

  /// Returns once the operation (and every one launched before it) has finished on the
  /// GPU. Starts posted sends and receives first. Throws timeout_error after aborting the
  /// communicator when options::timeout passes, comm_error when NCCL reports a failure.
  void wait(request& r) {
    detail::comm_state& s = *state_;
    if (r.ticket <= s.completed_) {
      r.ticket = 0;
      return;
    }
    s.ensure_usable("wait");
    if (r.ticket > s.launched_) start_pending();
    drain();
    r.ticket = 0;
  }

  /// Returns once everything enqueued on stream() so far has finished: the launched
  /// operations, and any other work ordered onto the stream (an executor's kernels). Posted
  /// sends and receives are not started. Fails as wait() does.
  void synchronize() {
    state_->ensure_usable("synchronize");
    drain();
  }

  /// Returns once nothing enqueued on stream() still runs, for destructors: never throws.
  /// Waits within the deadline; past it (or on any failure) the communicator is aborted,
  /// which ends NCCL's kernels, and the stream's other work is then waited for.
  void quiesce() noexcept {
    try {
      synchronize();
      return;
    } catch (...) {
      abort("given up while its stream was drained for a destructor");
    }
    static_cast<void>(cudaStreamSynchronize(stream()));
  }

  /// Blocks the host until `e` (recorded on a stream of this communicator's GPU) has
  /// completed, within the deadline, checking NCCL's asynchronous error state while it
  /// polls: a stalled peer aborts the communicator and throws timeout_error naming `call`.
  void wait_event(cudaEvent_t e, std::string_view call) {
    detail::comm_state& s = *state_;
    s.ensure_usable(call);
    const auto until = s.deadline();
    for (unsigned polls = 0;; ++polls) {
      const cudaError_t status = cudaEventQuery(e);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) {
        s.abort("the communication stream failed");
        detail::check_cuda(status, "cudaEventQuery (" + std::string(call) + ")", rank());
      }
      ncclResult_t state = ncclSuccess;
      s.check(ncclCommGetAsyncError(s.native_handle(), &state), "ncclCommGetAsyncError (" + std::string(call) + ")");
      if (state != ncclSuccess && state != ncclInProgress) s.fail(state, call);
      if (std::chrono::steady_clock::now() > until) s.time_out(call);
      detail::comm_state::pause(polls);
    }
  }

  /// Any trivially copyable type (sent as bytes), from rank `root`, in place. NCCL checks
  /// the root.
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void broadcast(std::span<T> data, int root) {
    request r = launch("ncclBroadcast", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclBroadcast(data.data(), data.data(), data.size_bytes(), ncclUint8, root, comm, stream);
    });
    wait(r);
  }

  /// A one-element all-reduce: returns once every rank has reached it.
  void barrier() {
    request r = launch("ncclAllReduce (barrier)", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(state_->scratch(), state_->scratch(), 1, ncclFloat32, ncclSum, comm, stream);
    });
    wait(r);
  }

  /// Any trivially copyable type (sent as bytes); rank i's block lands at i * mine.size().
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void allgather(std::span<const T> mine, std::span<T> all) {
    if (all.size() != mine.size() * static_cast<std::size_t>(size()))
      throw usage_error("allgather" + detail::on_rank(rank()) + ": " + std::to_string(mine.size()) +
                        " elements from each of " + std::to_string(size()) + " ranks do not fill " +
                        std::to_string(all.size()) + " elements");
    request r = launch("ncclAllGather", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllGather(mine.data(), all.data(), mine.size_bytes(), ncclUint8, comm, stream);
    });
    wait(r);
  }

  /// Collective (ncclCommSplit): the ranks of one color, ordered by (key, rank), on the
  /// same device with a stream of their own. `color` must be non-negative.
  communicator split(int color, int key) {
    if (color < 0)
      throw usage_error("split" + detail::on_rank(rank()) + ": color " + std::to_string(color) + " is negative");
    state_->ensure_usable("split");
    start_pending();
    ncclComm_t parent = state_->native_handle();
    return communicator(detail::comm_state::create(
        device(), rank(), node_color(), state_->settings(), "ncclCommSplit",
        [&](ncclComm_t* comm, ncclConfig_t* config) { return ncclCommSplit(parent, color, key, comm, config); },
        state_.get()));
  }

  /// Gives up: NCCL stops this communicator's kernels; every later call throws comm_error.
  void abort(std::string reason = "aborted by the caller") noexcept { state_->abort(std::move(reason)); }

 private:
  template <Element T>
  request iallreduce(std::span<T> data, ncclRedOp_t op) {
    return launch("ncclAllReduce", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(data.data(), data.data(), data.size(), detail::datatype<T>(), op, comm, stream);
    });
  }

  template <Element T>
  request ireduce_scatter(std::span<T> data, ncclRedOp_t op) {
    const std::size_t block = equal_blocks(data.size(), "ireduce_scatter");
    return launch("ncclReduceScatter", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclReduceScatter(data.data(), data.data() + static_cast<std::size_t>(rank()) * block, block,
                               detail::datatype<T>(), op, comm, stream);
    });
  }

  explicit communicator(std::shared_ptr<detail::comm_state> state) : state_(std::move(state)) {}

  // NCCL allows 2048 operations in one group.
  static constexpr std::size_t max_pending = 2048;

  request post(detail::transfer t, std::string_view call) {
    detail::comm_state& s = *state_;
    s.ensure_usable(call);
    if (s.pending_.size() == max_pending)
      throw usage_error(std::string(call) + detail::on_rank(rank()) + ": " + std::to_string(max_pending) +
                        " sends and receives are already posted, NCCL's limit for one group; wait before posting more");
    s.pending_.push_back(t);
    return {++s.posted_};
  }

  /// Waits, within the deadline, for what the stream holds now (an event recorded on it).
  void drain() {
    detail::comm_state& s = *state_;
    detail::check_cuda(cudaEventRecord(s.done_, s.stream()), "cudaEventRecord (wait)", rank());
    wait_event(s.done_, "wait");
    s.completed_ = s.launched_;
  }

  /// The block of a buffer of `elements` split evenly among the ranks.
  std::size_t equal_blocks(std::size_t elements, std::string_view call) const {
    const auto ranks = static_cast<std::size_t>(size());
    if (elements % ranks != 0)
      throw usage_error(std::string(call) + detail::on_rank(rank()) + ": " + std::to_string(elements) +
                        " elements do not split into " + std::to_string(ranks) + " equal blocks; pad the buffer");
    return elements / ranks;
  }

  /// Starts every posted send and receive as one group, so that they progress together.
  void start_pending() {
    detail::comm_state& s = *state_;
    if (s.pending_.empty()) return;
    s.check(ncclGroupStart(), "ncclGroupStart");
    const detail::transfer* failed = nullptr;
    ncclResult_t result = ncclSuccess;
    for (const detail::transfer& t : s.pending_) {
      result = t.send ? ncclSend(t.data, t.count, t.type, t.peer, s.native_handle(), s.stream())
                      : ncclRecv(t.data, t.count, t.type, t.peer, s.native_handle(), s.stream());
      if (result != ncclSuccess && result != ncclInProgress) {
        failed = &t;
        break;
      }
    }
    const ncclResult_t ended = ncclGroupEnd();  // the group is closed whatever happened inside it
    const std::string failed_call =
        failed ? (failed->send ? "ncclSend to rank " : "ncclRecv from rank ") + std::to_string(failed->peer) : std::string();
    s.pending_.clear();
    if (failed) s.fail(result, failed_call);
    s.check(ended, "ncclGroupEnd");
    s.settle("ncclGroupEnd", s.deadline());
    s.launched_ = s.posted_;
  }

  /// Starts a collective after everything posted before it.
  template <class Call>
  request launch(std::string_view name, Call call) {
    detail::comm_state& s = *state_;
    s.ensure_usable(name);
    start_pending();
    s.check(call(s.native_handle(), s.stream()), name);
    s.settle(name, s.deadline());
    s.launched_ = ++s.posted_;
    return {s.launched_};
  }

  std::shared_ptr<detail::comm_state> state_;
};

// No iprobe: NCCL receives only what the receiver already expects, so nothing can be probed,
// and the parameter server (which needs Probing) is refused for it at compile time.
static_assert(Collectives<communicator> && PointToPoint<communicator> && !Probing<communicator>);

}  // namespace strata::nccl

namespace strata {
/// The nccl backend's buffers are device memory of its GPU.
template <>
struct buffer_memory<nccl::communicator> {
  using type = device_memory;
};
}  // namespace strata
