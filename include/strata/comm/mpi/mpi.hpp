#pragma once
// The MPI backend (CPU transport; OpenMPI is the launcher).
//
// Threading: strata's executor runs collectives on a background thread while the training
// thread (and, for the parameter server, server threads) may call MPI too, so the context
// requests MPI_THREAD_MULTIPLE and refuses to run with less. Each purpose gets its own
// duplicated communicator, so traffic of one kind can never match or block another's.
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

// strata uses MPI's C interface only; skip the deprecated C++ bindings (and their library).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "strata/comm/communicator.hpp"
#include "strata/comm/node_memory.hpp"
#include "strata/comm/shared_memory.hpp"
#include "strata/error.hpp"
#include "strata/numeric/lanes.hpp"
#include "strata/trace/timeline.hpp"

namespace strata::mpi {

/// Set once any MPI call failed: MPI's state is then undefined (requests may be left
/// half-matched), and finalizing it can crash, so the context ends the job instead.
inline std::atomic<bool>& failed_call() {
  static std::atomic<bool> failed{false};
  return failed;
}

namespace detail {
/// Throws comm_error naming the call, the rank (if >= 0) and MPI's own explanation of `code`.
[[noreturn]] STRATA_DECL void throw_failed_call(int code, std::string_view call, int rank);
}  // namespace detail

/// Throws comm_error naming the call and MPI's own explanation when `code` is not success.
inline void check(int code, std::string_view call, int rank = -1) {
  if (code != MPI_SUCCESS) [[unlikely]]
    detail::throw_failed_call(code, call, rank);
}

template <class T>
MPI_Datatype datatype();
template <>
inline MPI_Datatype datatype<float>() { return MPI_FLOAT; }
template <>
inline MPI_Datatype datatype<double>() { return MPI_DOUBLE; }
template <>
inline MPI_Datatype datatype<std::byte>() { return MPI_BYTE; }
template <>
inline MPI_Datatype datatype<half>() { return MPI_UINT16_T; }
template <>
inline MPI_Datatype datatype<bfloat16>() { return MPI_UINT16_T; }

namespace detail {
template <class T>
void sum_into(void* in, void* inout, int* count, MPI_Datatype*) {
  T* b = static_cast<T*>(inout);
  lanes::add(b, static_cast<const T*>(in), b, static_cast<std::size_t>(*count));
}
}  // namespace detail

/// MPI_SUM for the predefined types; for the 16-bit floats, which MPI does not know, an
/// operation created once on first use.
template <Element T>
MPI_Op sum_op() {
  if constexpr (lanes::is_float16<T>) {
    static const MPI_Op op = [] {
      MPI_Op created = MPI_OP_NULL;
      check(MPI_Op_create(&detail::sum_into<T>, /*commute=*/1, &created), "MPI_Op_create");
      return created;
    }();
    return op;
  } else {
    return MPI_SUM;
  }
}

/// One MPI communicator. The context's are not owning (the context frees them); those made
/// by split() free their MPI_Comm with their last copy.
class communicator {
 public:
  /// Plain MPI request; MPI_REQUEST_NULL once complete.
  struct request {
    MPI_Request handle = MPI_REQUEST_NULL;
  };

  /// `node_color`: equal exactly for the ranks of `comm` that share a machine.
  /// Collective over `comm` (it learns whether the ranks share one machine).
  STRATA_DECL communicator(MPI_Comm comm, int node_color);

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string_view backend_name() const { return "mpi"; }
  int node_color() const { return node_color_; }
  /// Whether some ranks are on other machines: waits then nap (pace::collective).
  bool spans_machines() const { return spans_machines_; }
  MPI_Comm native_handle() const { return comm_; }

  template <class T>
  request isend(std::span<const T> data, int dest, int tag) {
    request r;
    check(MPI_Isend(data.data(), count(data.size()), datatype<T>(), dest, tag, comm_, &r.handle), "MPI_Isend", rank_);
    return r;
  }

  template <class T>
  request irecv(std::span<T> data, int source, int tag) {
    request r;
    check(MPI_Irecv(data.data(), count(data.size()), datatype<T>(), source, tag, comm_, &r.handle), "MPI_Irecv", rank_);
    return r;
  }

  template <Element T>
  request iallreduce_sum(std::span<T> data) {
    request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, data.data(), count(data.size()), datatype<T>(), sum_op<T>(), comm_, &r.handle),
          "MPI_Iallreduce", rank_);
    return r;
  }

  template <Element T>
  void allreduce_sum(std::span<T> data) {
    check(MPI_Allreduce(MPI_IN_PLACE, data.data(), count(data.size()), datatype<T>(), sum_op<T>(), comm_), "MPI_Allreduce",
          rank_);
  }

  void wait(request& r) { check(MPI_Wait(&r.handle, MPI_STATUS_IGNORE), "MPI_Wait", rank_); }
  /// Whether `r` has completed (then it is as if waited for); never blocks.
  bool test(request& r) {
    int done = 0;
    check(MPI_Test(&r.handle, &done, MPI_STATUS_IGNORE), "MPI_Test", rank_);
    return done != 0;
  }

  /// Whether a message from `source` with `tag` is waiting, without receiving it.
  bool iprobe(int source, int tag) {
    int waiting = 0;
    check(MPI_Iprobe(source, tag, comm_, &waiting, MPI_STATUS_IGNORE), "MPI_Iprobe", rank_);
    return waiting != 0;
  }

  template <class T>
  void broadcast(std::span<T> data, int root) {
    check(MPI_Bcast(data.data(), count(data.size()), datatype<T>(), root, comm_), "MPI_Bcast", rank_);
  }

  /// Waits for every rank. Not MPI_Barrier: OpenMPI's waits spin without yielding unless the
  /// host is oversubscribed, and where mpirun binds a rank to one core (it does for up to 2
  /// ranks) a parameter server's thread behind a spinning barrier waited a whole scheduler
  /// time slice (~4 ms) to answer. The barrier is tested instead, yielding between tests.
  void barrier() {
    request r;
    check(MPI_Ibarrier(comm_, &r.handle), "MPI_Ibarrier", rank_);
    wait_paced(*this, r, pace::rendezvous());
  }

  /// Sent as bytes, so any trivially copyable type works.
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void allgather(std::span<const T> mine, std::span<T> all) {
    const int bytes = gathered_bytes(mine.size_bytes(), mine.size(), all.size(), "allgather");
    check(MPI_Allgather(mine.data(), bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, comm_), "MPI_Allgather", rank_);
  }
  /// Each rank's bytes in an all-gather of `mine` elements into `all`; comm_error unless
  /// `all` holds exactly every rank's block.
  STRATA_DECL int gathered_bytes(std::size_t bytes, std::size_t mine, std::size_t all, std::string_view call) const;
  /// allgather that returns at once: `mine` and `all` stay untouched until the request ends.
  template <class T>
    requires std::is_trivially_copyable_v<T>
  request iallgather(std::span<const T> mine, std::span<T> all) {
    const int bytes = gathered_bytes(mine.size_bytes(), mine.size(), all.size(), "iallgather");
    request r;
    check(MPI_Iallgather(mine.data(), bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, comm_, &r.handle), "MPI_Iallgather",
          rank_);
    return r;
  }

  /// Every rank's segment of POSIX shared memory (SharedMemory), or nothing where the ranks
  /// do not all share this machine. Copies of a communicator share its segments.
  std::span<std::byte* const> shared_segments(std::size_t bytes) { return segments_->get(*this, bytes); }
  /// A rank that gives up ends the job (MPI_Abort), so a wait on shared memory never outlives it.
  void throw_if_abandoned() const {}

  /// Whether every rank here may read every other's memory (PeerReads): they share this
  /// machine and the kernel allows it. Collective on the first call; copies share the answer.
  bool peer_reads() { return reads_->ready(*this); }
  void read_peer(int rank, std::span<const peer_range> from, std::span<std::byte> into) const {
    reads_->read(rank, from, into);
  }
  /// PeerViews over node memory (comm/node_memory.hpp), which another rank maps read-only
  /// once; other memory has no view.
  shared_region region_of(const void* p) const { return node_region_of(p); }
  const std::byte* view_peer(int rank, const shared_region& region, std::uintptr_t address) {
    return reads_->view(rank, region, address);
  }

  /// `color` must be non-negative (MPI's rule).
  STRATA_DECL communicator split(int color, int key);

 private:
  // A communicator that outlives MPI_Finalize has nothing left to free.
  STRATA_DECL static void free_comm(MPI_Comm* c);

  /// `n` as MPI's int count; comm_error beyond INT_MAX.
  int count(std::size_t n) const {
    if (n > static_cast<std::size_t>(INT_MAX)) [[unlikely]]
      too_many_elements(n);
    return static_cast<int>(n);
  }
  [[noreturn]] STRATA_DECL void too_many_elements(std::size_t n) const;

  MPI_Comm comm_;
  std::shared_ptr<MPI_Comm> owner_;  // set when this communicator frees comm_
  std::shared_ptr<process_segments> segments_ = std::make_shared<process_segments>();
  std::shared_ptr<process_reads> reads_ = std::make_shared<process_reads>();
  int node_color_;
  bool spans_machines_ = false;
  int rank_ = 0;
  int size_ = 1;
};

static_assert(Communicator<communicator> && SharedMemory<communicator> && PeerReads<communicator>);

/// Owns MPI's lifetime and one duplicated communicator per purpose.
///
/// If MPI is already initialized (a test harness, a host application), the context uses it
/// and leaves finalization to its owner.
class context {
 public:
  context(int& argc, char**& argv) { init(&argc, &argv); }
  context() { init(nullptr, nullptr); }
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  /// Finalizes MPI, unless an MPI call failed: then the job is ended with MPI_Abort (exit
  /// status 1) instead, since finalizing after a failed collective can crash.
  STRATA_DECL ~context();

  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  /// Rank among the processes on this machine (picks the GPU on GPU backends).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  /// Dense gradient collectives.
  communicator& collectives() { return *collectives_; }
  /// Parameter-server requests and replies.
  communicator& parameter_server() { return *parameter_server_; }
  /// Start-up handshakes, barriers, checkpoints.
  communicator& control() { return *world_; }

  /// Ends the whole job: mpirun then stops every rank and exits with `status` (not 0).
  [[noreturn]] void abort(int status = 3) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
    std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
  }

 private:
  STRATA_DECL void init(int* argc, char*** argv);

  // The machine's first rank names it: a color every communicator's split can use.
  STRATA_DECL static int first_world_rank(MPI_Comm node);

  STRATA_DECL MPI_Comm dup(MPI_Comm from);

  bool owns_mpi_ = false;
  bool writes_timeline_ = false;  // this context started STRATA_TIMELINE's recording
  std::vector<MPI_Comm> owned_;
  std::optional<communicator> world_, collectives_, parameter_server_;
  int local_rank_ = 0;
  int local_size_ = 1;
};

static_assert(CommContext<context>);

}  // namespace strata::mpi

#if defined(STRATA_HEADER_ONLY)
#include "strata/comm/mpi/impl/mpi.ipp"
#endif
