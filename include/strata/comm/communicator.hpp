#pragma once
// The interface every synchronizer is written against, one concept per capability. Backends
// (mpi, loopback, and nccl on GPUs) model what they can do; nothing above this layer knows
// which one it talks to.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "strata/comm/pacing.hpp"
#include "strata/error.hpp"
#include "strata/model/memory.hpp"
#include "strata/numeric/float16.hpp"

namespace strata {

/// Element types every backend moves and sums: the 16-bit types are what compressed
/// gradients travel as.
template <class T>
concept Element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, half> || std::same_as<T, bfloat16>;

/// A group of ranks, split by what a backend can do: collectives (every backend),
/// point-to-point (every backend), probing (host backends only). The synchronizer table
/// (exec/synchronizer_table.hpp) asks for what a synchronizer needs, so a backend that lacks
/// a capability is refused there at compile time (PS<N> without Probing); the host
/// synchronizers themselves are written against Communicator, all three.
///
/// Non-blocking calls return a `request`; the operation's buffers must stay untouched until
/// `wait` returns. Collectives must be called in the same order on every rank.
///
/// `split` makes sub-groups (a hierarchical all-reduce's nodes); their traffic never matches
/// the parent's or a sibling's. `node_color` is equal exactly for the ranks that share a
/// machine, so `split(node_color(), rank())` groups each machine's ranks.
template <class C>
concept Collectives = requires(C& c, const C& cc, std::span<float> f, std::span<const float> cf, std::span<double> d,
                               std::span<std::byte> b, std::span<const std::byte> cb, int root, int color, int key,
                               typename C::request& r) {
  { cc.rank() } -> std::same_as<int>;
  { cc.size() } -> std::same_as<int>;
  { cc.backend_name() } -> std::convertible_to<std::string_view>;
  { c.iallreduce_sum(f) } -> std::same_as<typename C::request>;  // in place
  { c.iallreduce_sum(d) } -> std::same_as<typename C::request>;
  c.allreduce_sum(f);  // in place, blocking
  c.allreduce_sum(d);
  c.wait(r);
  c.broadcast(f, root);  // from rank `root`, blocking
  c.broadcast(b, root);
  c.barrier();
  c.allgather(cf, f);  // blocking; any trivially copyable type; rank i's block at i * cf.size()
  c.allgather(cb, b);
  { c.split(color, key) } -> std::same_as<C>;  // collective; ranks of one color, ordered by (key, rank)
  { cc.node_color() } -> std::same_as<int>;
};

/// Messages between two ranks. Messages between one pair of ranks with one tag arrive in
/// send order; the receiver names the sender.
template <class C>
concept PointToPoint = requires(C& c, std::span<float> f, std::span<const float> cf, std::span<double> d,
                                std::span<const double> cd, std::span<std::byte> b, std::span<const std::byte> cb, int peer,
                                int tag, typename C::request& r) {
  { c.isend(cf, peer, tag) } -> std::same_as<typename C::request>;
  { c.isend(cd, peer, tag) } -> std::same_as<typename C::request>;
  { c.irecv(f, peer, tag) } -> std::same_as<typename C::request>;
  { c.irecv(d, peer, tag) } -> std::same_as<typename C::request>;
  { c.isend(cb, peer, tag) } -> std::same_as<typename C::request>;  // bytes: parameter-server messages
  { c.irecv(b, peer, tag) } -> std::same_as<typename C::request>;
  c.wait(r);
};

/// A backend that can tell whether a request has completed without blocking (MPI_Test).
template <class C>
concept Testable = PointToPoint<C> && requires(C& c, typename C::request& r) {
  { c.test(r) } -> std::same_as<bool>;
};

/// The pace of a collective's waits on `comm`: napping where its ranks do not all share a
/// machine (pace::collective).
template <class C>
pace collective_pace(const C& comm) {
  if constexpr (requires { { comm.spans_machines() } -> std::same_as<bool>; })
    return pace::collective(comm.spans_machines());
  else return pace::collective(false);
}

/// Waits for `r`: where the backend can test, by tests at `schedule`'s pace, never inside
/// the backend's blocking wait (which spins); otherwise in that wait.
template <PointToPoint C>
void wait_paced(C& comm, typename C::request& r, pace schedule) {
  if constexpr (Testable<C>) {
    for (backoff idle(schedule); !comm.test(r);) idle.pause();
  } else {
    comm.wait(r);
  }
}

/// Finding a message nobody asked for: what the parameter server's servers need, since
/// requests arrive from any worker at any time. NCCL cannot: a receive must be posted for
/// exactly what will arrive.
template <class C>
concept Probing = PointToPoint<C> && requires(C& c, int peer, int tag) {
  { c.iprobe(peer, tag) } -> std::same_as<bool>;  // a message is waiting (not received)
};

/// Memory that every rank of a group maps, for the ranks of one machine: a ring then writes
/// each chunk straight into its neighbour's landing slots, one copy with no kernel call,
/// where a message on OpenMPI's shared-memory transport is copied by the kernel
/// (process_vm_readv) after a handshake, pinning the sender's pages each time.
///
/// `shared_segments(bytes)` is collective: it returns every rank's segment of at least
/// `bytes` bytes (rank i's at i), zeroed when new, the same until a later call asks for
/// more; or nothing, where the group's ranks do not all share this machine. A rank writes
/// only into segments whose owner expects it (the ring's counters say when). Waits on such
/// memory call `throw_if_abandoned()`, which throws where the job has been given up (MPI's
/// abort ends the process instead).
template <class C>
concept SharedMemory = requires(C& c, std::size_t bytes) {
  { c.shared_segments(bytes) } -> std::same_as<std::span<std::byte* const>>;
  c.throw_if_abandoned();
};

/// A range of another rank's memory: its address in that rank's address space, and bytes.
struct peer_range {
  std::uintptr_t address;
  std::size_t bytes;
};

/// Reads of another rank's memory on this machine, with no part taken by that rank: the
/// hierarchical all-reduce sums a node's gradients where they lie, and spreads the node's
/// sums by copying each straight from its owner, once per byte, with no handshake.
///
/// `peer_reads()` is collective: whether every rank of the group may read every other's
/// memory (false where they do not share a machine, or the kernel refuses). `read_peer`
/// copies the ranges `from` of `rank`'s memory, in order, into `into` (as many bytes); it
/// throws comm_error, naming the rank, where it cannot. The owner says when memory is ready
/// to be read, and when it may change again, by messages.
template <class C>
concept PeerReads = requires(C& c, int rank, std::span<const peer_range> from, std::span<std::byte> into) {
  { c.peer_reads() } -> std::same_as<bool>;
  c.read_peer(rank, from, into);
};

/// Memory a rank may hand to the others of its machine to map (comm/node_memory.hpp): an id
/// unique within its process (0: none), the handle its owner maps it by, its first address
/// in the owner's address space, and bytes.
struct shared_region {
  std::uint64_t id = 0;
  std::int64_t handle = -1;
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
};

/// PeerReads where a rank may also see another's memory in place, and add or copy it with
/// plain loads. `region_of(p)` is where this rank's `p` lies in memory others may map (id 0:
/// nowhere), as the owner tells the others; `view_peer(rank, region, address)` is where
/// `address` of `rank`'s `region` may be loaded here, or nullptr where it may not (read it
/// with read_peer). The owner says when memory is ready and when it may change, by messages.
template <class C>
concept PeerViews = PeerReads<C> && requires(C& c, const void* p, int rank, const shared_region& region,
                                              std::uintptr_t address) {
  { c.region_of(p) } -> std::same_as<shared_region>;
  { c.view_peer(rank, region, address) } -> std::same_as<const std::byte*>;
};

/// The memory a communicator's buffers live in: host memory, unless its backend says
/// otherwise (nccl: device memory of its GPU). Code that stages data itself (the pipeline
/// driver's messages, a gather's reordering) asks, and allocates device buffers from a
/// backend whose buffers are device memory (its allocate(n)).
template <class C>
struct buffer_memory {
  using type = host_memory;
};
template <class C>
using buffer_memory_t = typename buffer_memory<C>::type;

/// A communicator whose buffers are host memory, which the host may read and write.
template <class C>
concept HostBuffers = std::same_as<buffer_memory_t<C>, host_memory>;

/// `stream`, refused when null. On CUDA a null stream is the legacy default stream: a caller
/// who forgot the argument gets it silently, and it orders against every blocking stream (a
/// stall, or a race where a non-blocking stream was meant). `caller` names the call for the
/// message (a string, or a callable that builds one only on failure); `role` says which
/// stream belongs there.
template <class Stream, class Caller>
Stream require_stream(Stream stream, Caller&& caller, std::string_view role) {
  if (stream) return stream;
  std::string who;
  if constexpr (std::invocable<Caller&>) who = std::string(caller());
  else who = std::string(caller);
  throw usage_error(who + ": no stream given; pass " + std::string(role) +
                    " (on CUDA, cudaStreamLegacy names the legacy default stream)");
}

/// Every capability: what the host backends (mpi, loopback) model and host synchronizers use.
template <class C>
concept Communicator = Collectives<C> && PointToPoint<C> && Probing<C>;

/// Every rank's host, as its node color. Collective.
template <Collectives C>
std::vector<int> host_of_each_rank(C& comm) {
  const int mine = comm.node_color();
  std::vector<int> colors(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const int>(&mine, 1), std::span<int>(colors));
  return colors;
}

/// Hosts numbered 0, 1, ... in order of their first rank: each rank's number, and the ranks
/// on each host.
struct host_numbering {
  std::vector<std::size_t> host_of_rank, ranks_on_host;
};

/// Numbers the hosts of ranks whose hosts are `host_of_rank` (any ids, such as node colors).
inline host_numbering number_hosts(std::span<const int> host_of_rank) {
  host_numbering n;
  std::map<int, std::size_t> number;
  for (const int host : host_of_rank) {
    const std::size_t k = number.try_emplace(host, number.size()).first->second;
    if (k == n.ranks_on_host.size()) n.ranks_on_host.push_back(0);
    ++n.ranks_on_host[k];
    n.host_of_rank.push_back(k);
  }
  return n;
}

}  // namespace strata

namespace strata {

/// A backend's context: one communicator per purpose over the same ranks, so traffic of
/// one kind (a blocked collective) never stalls another (parameter-server requests). The
/// parameter server's and the control communicator can probe; the collectives' need not
/// (NCCL's cannot).
template <class X>
concept CommContext = requires(X& x) {
  x.abort();  // give up on the job: every rank stops waiting (MPI: MPI_Abort)
  requires Collectives<std::remove_reference_t<decltype(x.collectives())>>;
  requires PointToPoint<std::remove_reference_t<decltype(x.collectives())>>;
  requires Communicator<std::remove_reference_t<decltype(x.parameter_server())>>;
  requires Communicator<std::remove_reference_t<decltype(x.control())>>;
};

}  // namespace strata
