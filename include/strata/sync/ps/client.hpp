#pragma once
// A worker's side of the parameter server: pushes gradients to the shards' hosts, asks for
// values, and collects the replies into the worker's parameter memory. One client serves
// every PS variable of an executor, so that replies from one server for different variables
// are routed by (variable, shard), whichever synchronizer asked.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/sync/ps/plan.hpp"
#include "strata/sync/ps/protocol.hpp"
#include "strata/sync/sparse_rows.hpp"
#include "strata/trace/timeline.hpp"

namespace strata::sync::ps {

/// What one pull reflected: the worker's own clock, and how many pushes of every worker the
/// values it received include. The SSP property test checks these.
struct read_record {
  std::string variable;
  std::size_t shard = 0;
  int worker = 0;
  std::uint64_t clock = 0;
  std::vector<std::uint64_t> applied;
};

/// The SSP bound for one read, or what breaks it: every worker's updates of clocks
/// <= clock - staleness - 1 must be reflected, and all of the reader's own.
inline std::optional<std::string> staleness_violation(const read_record& r, int staleness) {
  const std::uint64_t s = static_cast<std::uint64_t>(staleness);
  for (std::size_t w = 0; w < r.applied.size(); ++w) {
    const std::uint64_t needed = static_cast<int>(w) == r.worker ? r.clock : (r.clock > s ? r.clock - s : 0);
    if (r.applied[w] < needed)
      return fmt::format("a read of \"{}\" shard {} by rank {} at clock {} reflects {} pushes of rank {}, fewer than the {} "
                         "that SSP<{}> requires",
                         r.variable, r.shard, r.worker, r.clock, r.applied[w], w, needed, staleness);
  }
  return std::nullopt;
}

/// A reply did not come before the deadline (the message names the server's rank).
struct no_reply : std::runtime_error {
  no_reply(const std::string& what, std::vector<int> ranks) : std::runtime_error(what), servers(std::move(ranks)) {}
  std::vector<int> servers;  ///< the ranks whose servers did not answer
};

template <Communicator C, class O>
class client {
  // Payloads are [optimizer][rows][values]: rows and values stay aligned after the optimizer.
  static_assert(sizeof(O) % alignof(float) == 0 && std::is_trivially_copyable_v<O>,
                "the optimizer travels with each push as bytes: it must be trivially copyable");

 public:
  client(C& comm, const plan& p) : comm_(&comm), plan_(&p) {}

  /// Sends variable `v`'s dense gradient, shard by shard, with the optimizer to apply it.
  void push_dense(std::size_t v, std::span<const float> grad, std::uint64_t clock, const O& optimizer) {
    begin_pushes(clock);
    const variable_plan& var = plan_->variables[v];
    for (std::size_t k = 0; k < var.shards.size(); ++k) {
      message_bytes& payload = payload_buffer(optimizer, var.shards[k].elements * sizeof(float));
      std::byte* out = payload.data() + sizeof(O);
      for (const element_range& r : var.shards[k].blocks) {
        std::memcpy(out, grad.data() + r.offset, r.size * sizeof(float));
        out += r.size * sizeof(float);
      }
      send(var.shards[k].host, {.kind = op::push_dense, .variable = u32(v), .shard = u32(k), .clock = clock}, payload);
    }
  }

  /// Sends the gradient rows of a sparse variable, each shard its own rows, sorted, written
  /// straight from the sums into the messages; every shard hears from the worker, with no
  /// rows if none of its rows were touched, so that its clocks advance.
  void push_sparse(std::size_t v, const row_sums& gradient, std::uint64_t clock, const O& optimizer) {
    begin_pushes(clock);
    const variable_plan& var = plan_->variables[v];
    const std::span<const std::uint32_t> slots = gradient.slots_by_row();
    const std::span<const std::uint32_t> rows = gradient.rows();
    const std::size_t row_bytes = var.row_elements * sizeof(float);
    std::size_t begin = 0;
    for (std::size_t k = 0; k < var.shards.size(); ++k) {
      std::size_t end = begin;
      while (end < slots.size() && var.shard_of_row(rows[slots[end]]) == k) ++end;
      const std::size_t n = end - begin;
      message_bytes& payload = payload_buffer(optimizer, n * (sizeof(std::uint32_t) + row_bytes));
      std::byte* row_out = payload.data() + sizeof(O);
      std::byte* value_out = row_out + n * sizeof(std::uint32_t);
      for (std::size_t i = begin; i < end; ++i) {
        std::memcpy(row_out, &rows[slots[i]], sizeof(std::uint32_t));
        std::memcpy(value_out, gradient.sum(slots[i]).data(), row_bytes);
        row_out += sizeof(std::uint32_t);
        value_out += row_bytes;
      }
      send(var.shards[k].host,
           {.kind = op::push_sparse, .variable = u32(v), .shard = u32(k), .rows = u32(n), .clock = clock}, payload);
      begin = end;
    }
  }

  /// Asks for variable `v`'s values into `param` (the whole variable) at `clock`.
  void pull_dense(std::size_t v, std::span<float> param, std::uint64_t clock) {
    const variable_plan& var = plan_->variables[v];
    for (std::size_t k = 0; k < var.shards.size(); ++k) {
      expect(v, k, {param, {}, clock});
      send(var.shards[k].host, {.kind = op::pull_dense, .variable = u32(v), .shard = u32(k), .clock = clock}, {});
    }
  }

  /// Asks for rows (unique, sorted) of sparse variable `v`, into those rows of `table`.
  void pull_sparse(std::size_t v, std::span<const std::uint32_t> rows, std::span<float> table, std::uint64_t clock) {
    const variable_plan& var = plan_->variables[v];
    std::size_t begin = 0;
    for (std::size_t k = 0; k < var.shards.size(); ++k) {
      std::size_t end = begin;
      while (end < rows.size() && var.shard_of_row(rows[end]) == k) ++end;
      if (end > begin) {
        auto& wanted = expect(v, k, {table, std::vector<std::uint32_t>(rows.begin() + begin, rows.begin() + end), clock}).rows;
        send(var.shards[k].host,
             {.kind = op::pull_sparse, .variable = u32(v), .shard = u32(k), .rows = u32(end - begin), .clock = clock},
             std::as_bytes(std::span<const std::uint32_t>(wanted)));
      }
      begin = end;
    }
  }

  /// Asks for shard `k` of variable `v`: its values, then each optimizer state tensor, into
  /// `into`, once every worker's first `clock` pushes are applied (a checkpoint's cut).
  void snapshot(std::size_t v, std::size_t k, std::span<float> into, std::uint64_t clock) {
    expect(v, k, {into, {}, clock, true});
    send(plan_->variables[v].shards[k].host, {.kind = op::snapshot, .variable = u32(v), .shard = u32(k), .clock = clock}, {});
  }

  /// Replaces shard `k` of variable `v` with `from` (laid out as snapshot() returns it) and
  /// sets every worker's clock there to `clock`. `from` must stay untouched until complete().
  void restore(std::size_t v, std::size_t k, std::span<const float> from, std::uint64_t clock) {
    expect(v, k, {{}, {}, clock, true});
    send(plan_->variables[v].shards[k].host, {.kind = op::restore, .variable = u32(v), .shard = u32(k), .clock = clock},
         std::as_bytes(from));
  }

  /// Receives every expected reply, probing all servers that owe one, until `deadline`;
  /// throws no_reply naming the servers still silent, or usage_error with a server's
  /// rejection. Completes the sends too.
  void complete(std::chrono::steady_clock::time_point deadline) {
    const trace::span traced("wait", "wait", 0, [&] {
      return fmt::format("for the parameter server on rank{} {} to answer", hosts_owing().size() > 1 ? "s" : "",
                         fmt::join(hosts_owing(), ", "));
    });
    backoff idle(pace::polling());
    while (!expected_.empty()) {
      bool received = false;
      for (int host : hosts_owing())
        if (comm_->iprobe(host, reply_tag)) {
          take_reply(host);
          received = true;
        }
      if (received) {
        idle.reset();
      } else if (std::chrono::steady_clock::now() > deadline) {
        throw no_reply(fmt::format("the wait for the parameter server on rank{} {} to answer for {}", hosts_owing().size() > 1 ? "s" : "",
                                   fmt::join(hosts_owing(), ", "), describe_expected()),
                       hosts_owing());
      } else if (outbox_.sending(*comm_)) {
        std::this_thread::yield();  // no sleep while pushes are still moving: they move only while we call in
      } else {
        idle.pause();
      }
    }
    outbox_.wait_all(*comm_);
    payloads_in_use_ = 0;
  }

  /// Tells every server this worker is done (executor destruction).
  void finish() {
    for (int r = 0; r < comm_->size(); ++r) send(r, {.kind = op::done}, {});
    outbox_.wait_all(*comm_);
  }

  /// The reads since the last call (for tests and diagnostics); kept only when asked for.
  void record_reads(bool on) { recording_ = on; }
  std::vector<read_record> take_reads() { return std::exchange(reads_, {}); }

 private:
  struct destination {
    std::span<float> memory;           // the variable (dense) or its table (sparse)
    std::vector<std::uint32_t> rows;   // sparse: the rows asked for
    std::uint64_t clock = 0;
    bool whole = false;  // snapshot: the reply's values are copied into memory as they come
  };

  static std::uint32_t u32(std::size_t x) { return static_cast<std::uint32_t>(x); }

  static const char* request_name(op kind) {
    switch (kind) {
      case op::push_dense:
      case op::push_sparse: return "push";
      case op::pull_dense:
      case op::pull_sparse: return "pull";
      case op::snapshot: return "snapshot";
      case op::restore: return "restore";
      default: return "done";
    }
  }

  /// Pushes need not be waited for (a sparse update returns once they are posted): before
  /// the first push of update `clock`, the sends of earlier updates complete, so that at
  /// most one update's pushes are in flight and their buffers can be reused. A server
  /// handles one worker's messages in order, so a later pull still sees the pushes.
  void begin_pushes(std::uint64_t clock) {
    if (clock == pushing_clock_) return;
    pushing_clock_ = clock;
    outbox_.wait_all(*comm_);
    payloads_in_use_ = 0;
  }

  message_bytes& payload_buffer(const O& optimizer, std::size_t bytes) {
    // Buffers are reused from update to update: allocating megabytes each time costs more
    // in page faults than sending them.
    if (payloads_in_use_ == payloads_.size()) payloads_.emplace_back();
    message_bytes& payload = payloads_[payloads_in_use_++];
    resize_message(payload, sizeof(O) + bytes);
    std::memcpy(payload.data(), &optimizer, sizeof(O));
    return payload;
  }

  void send(int host, request_header header, std::span<const std::byte> payload) {
    header.payload_bytes = payload.size();
    const trace::span traced(request_name(header.kind), "ps", payload.size(), [&] {
      return fmt::format("\"{}\" shard {} on rank {}, clock {}", plan_->variables[header.variable].binding.name, header.shard,
                         host, header.clock);
    });
    outbox_.send(*comm_, host, request_tag, request_payload_tag, header, payload);
  }

  destination& expect(std::size_t v, std::size_t k, destination d) {
    auto [at, fresh] = expected_.try_emplace({u32(v), u32(k)}, std::move(d));
    if (!fresh) throw usage_error(fmt::format("two pulls of \"{}\" shard {} at once", plan_->variables[v].binding.name, k));
    return at->second;
  }

  std::vector<int> hosts_owing() const {
    std::vector<int> hosts;
    for (const auto& [where, d] : expected_) {
      const int host = plan_->variables[where.first].shards[where.second].host;
      if (std::ranges::find(hosts, host) == hosts.end()) hosts.push_back(host);
    }
    return hosts;
  }

  std::string describe_expected() const {
    std::vector<std::string> what;
    for (const auto& [where, d] : expected_)
      what.push_back(fmt::format("\"{}\" shard {}", plan_->variables[where.first].binding.name, where.second));
    return fmt::format("{}", fmt::join(what, ", "));
  }

  void take_reply(int host) {
    reply_header header;
    receive(*comm_, host, reply_tag, std::as_writable_bytes(std::span<reply_header>(&header, 1)));
    const trace::span traced("reply", "ps", header.payload_bytes, [&] { return fmt::format("from rank {}", host); });
    message_bytes& payload = reply_;
    resize_message(payload, header.payload_bytes);
    if (!payload.empty()) receive(*comm_, host, reply_payload_tag, payload);
    const auto at = expected_.find({header.variable, header.shard});
    if (header.failed) {
      expected_.clear();
      throw usage_error(std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
    }
    if (at == expected_.end())
      throw comm_error(fmt::format("rank {}: an unexpected parameter-server reply from rank {}", comm_->rank(), host));
    const variable_plan& var = plan_->variables[header.variable];
    const shard_plan& shard = var.shards[header.shard];
    const std::size_t workers = static_cast<std::size_t>(comm_->size());
    const auto* values = reinterpret_cast<const float*>(payload.data() + workers * sizeof(std::uint64_t));
    destination& d = at->second;
    if (d.whole) {
      if (payload.size() != workers * sizeof(std::uint64_t) + d.memory.size_bytes())
        throw comm_error(fmt::format("rank {}: a snapshot of \"{}\" shard {} of {} bytes where {} were expected", comm_->rank(),
                                     var.binding.name, header.shard, payload.size(),
                                     workers * sizeof(std::uint64_t) + d.memory.size_bytes()));
      if (!d.memory.empty()) std::memcpy(d.memory.data(), values, d.memory.size_bytes());  // a restore's ack: none
    } else if (d.rows.empty()) {
      for (const element_range& r : shard.blocks) {
        std::memcpy(d.memory.data() + r.offset, values, r.size * sizeof(float));
        values += r.size;
      }
    } else {
      for (std::size_t i = 0; i < d.rows.size(); ++i) {
        if (i + rows_ahead < d.rows.size())
          prefetch_row<true>(d.memory.data() + d.rows[i + rows_ahead] * var.row_elements, var.row_elements);
        std::memcpy(d.memory.data() + d.rows[i] * var.row_elements, values, var.row_elements * sizeof(float));
        values += var.row_elements;
      }
    }
    if (recording_ && !d.whole) {  // reads only: not a checkpoint's snapshot or restore
      read_record& r = reads_.emplace_back(read_record{var.binding.name, header.shard, comm_->rank(), d.clock, {}});
      r.applied.resize(workers);
      std::memcpy(r.applied.data(), payload.data(), workers * sizeof(std::uint64_t));
    }
    expected_.erase(at);
  }

  C* comm_;
  const plan* plan_;
  outbox<C> outbox_;
  std::deque<message_bytes> payloads_;  // push payloads until their sends complete
  std::size_t payloads_in_use_ = 0;
  std::uint64_t pushing_clock_ = ~std::uint64_t{0};  // the update whose pushes were posted last
  message_bytes reply_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, destination> expected_;
  bool recording_ = false;
  std::vector<read_record> reads_;
};

}  // namespace strata::sync::ps
