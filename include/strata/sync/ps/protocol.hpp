#pragma once
// The parameter server's messages, on the context's parameter_server() communicator only,
// so that a blocked collective never starves a server.
//
// A request is a header, then (if it carries any) a payload, from a worker to the rank
// hosting a shard; a reply is a header, then a payload, from that rank's server thread. A
// worker waits for replies by probing every server it expects one from, so a server that is
// sending to it is never left waiting while it listens to another.
//
// Waiting: OpenMPI's blocking calls spin on a core, and where the launcher binds a rank to
// one core (mpirun does for up to 2 ranks) a spinning worker starves the server thread it
// waits for, or the other way round, for whole scheduler time slices. Server and worker
// instead probe or test, yield a few hundred times, then sleep between tries (from 20 us,
// doubling to 1 ms while nothing arrives: pace::polling), so a worker blocked by SSP or a
// server with nothing to do uses almost no CPU, at the price of at most 1 ms of added
// latency after an idle period.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <list>
#include <span>
#include <thread>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/model/huge_pages.hpp"

namespace strata::sync::ps {

/// snapshot: the shard's values and optimizer state once every worker's first `clock` pushes
/// are applied (a checkpoint's consistent cut); restore: replace them and set every worker's
/// clock to `clock` (answered with the clocks only, once done).
enum class op : std::uint32_t { push_dense, push_sparse, pull_dense, pull_sparse, done, snapshot, restore };

struct request_header {
  op kind = op::done;
  std::uint32_t variable = 0;  // index in the plan
  std::uint32_t shard = 0;
  std::uint32_t rows = 0;      // sparse requests: rows listed in the payload
  std::uint64_t clock = 0;     // pushes this worker made before this request
  std::uint64_t payload_bytes = 0;
};

struct reply_header {
  std::uint32_t variable = 0, shard = 0;
  std::uint64_t payload_bytes = 0;  // the applied clocks of every worker, then the values
  std::uint32_t failed = 0;         // the payload is an error message instead
};

inline constexpr int request_tag = 0x5301, request_payload_tag = 0x5302, reply_tag = 0x5303, reply_payload_tag = 0x5304;

template <class T>
std::span<const std::byte> bytes_of(const T& value) {
  return std::as_bytes(std::span<const T>(&value, 1));
}

/// Whether `r` has completed, without blocking where the backend can test (backends without
/// `test` complete sends at once, so waiting there returns at once).
template <Communicator C>
bool completed(C& comm, typename C::request& r) {
  if constexpr (Testable<C>) return comm.test(r);
  else {
    comm.wait(r);
    return true;
  }
}

/// Messages sent and not yet known to be complete. Their headers live here. A payload lives
/// either with the caller until wait_all() (a borrowed span: a worker's gradients, sent
/// without a copy) or here (a moved-in buffer: a server's reply, which must not hold the
/// server until its worker receives it), and is handed back by collect() once delivered.
template <Communicator C>
class outbox {
 public:
  template <class Header>
  void send(C& comm, int dest, int header_tag, int payload_tag, const Header& header, std::span<const std::byte> payload) {
    message& m = start(comm, dest, header_tag, header);
    if (!payload.empty()) m.requests.push_back(comm.isend(payload, dest, payload_tag));
  }
  template <class Header>
  void send(C& comm, int dest, int header_tag, int payload_tag, const Header& header, message_bytes&& payload) {
    message& m = start(comm, dest, header_tag, header);
    m.owned = std::move(payload);
    if (!m.owned.empty()) m.requests.push_back(comm.isend(std::span<const std::byte>(m.owned), dest, payload_tag));
  }

  /// Whether a send is still in progress. Large messages move only while the sender calls
  /// into the backend (MPI's rendezvous protocol), so a sender must not sleep until this is
  /// false.
  bool sending(C& comm) {
    return !std::ranges::all_of(messages_, [&](message& m) { return delivered(comm, m); });
  }

  /// Forgets the messages that were delivered, moving the payloads they owned into `spare`
  /// for reuse; true if any was.
  bool collect(C& comm, std::vector<message_bytes>& spare) {
    const auto before = messages_.size();
    std::erase_if(messages_, [&](message& m) {
      if (!delivered(comm, m)) return false;
      if (m.owned.capacity() > 0) spare.push_back(std::move(m.owned));
      return true;
    });
    return messages_.size() != before;
  }

  bool empty() const { return messages_.empty(); }

  void wait_all(C& comm) {
    for (message& m : messages_)
      for (auto& request : m.requests) wait_paced(comm, request, pace::polling());
    messages_.clear();
  }

 private:
  struct message {
    std::vector<std::byte> header;
    message_bytes owned;
    std::vector<typename C::request> requests;
  };

  template <class Header>
  message& start(C& comm, int dest, int header_tag, const Header& header) {
    message& m = messages_.emplace_back();
    m.header.resize(sizeof(Header));
    std::memcpy(m.header.data(), &header, sizeof(Header));
    m.requests.push_back(comm.isend(std::span<const std::byte>(m.header), dest, header_tag));
    return m;
  }

  bool delivered(C& comm, message& m) {
    return std::ranges::all_of(m.requests, [&](typename C::request& r) { return completed(comm, r); });
  }

  std::list<message> messages_;  // a list: a message's header and payload never move while in flight
};

/// Receives a message already known to be waiting (returning when it is complete).
template <Communicator C>
void receive(C& comm, int source, int tag, std::span<std::byte> into) {
  auto request = comm.irecv(into, source, tag);
  wait_paced(comm, request, pace::polling());
}

}  // namespace strata::sync::ps
