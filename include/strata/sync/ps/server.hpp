#pragma once
// A rank's parameter server: one thread that owns the shards the plan placed on this rank,
// their optimizer state and their clocks, and answers workers' pushes and pulls.
//
// Clocks. A worker's clock is the number of pushes it has made; the server keeps, per shard,
// how many of each worker's pushes its values reflect ("applied"). A pull at clock c is
// answered when the shard's consistency allows it:
//   BSP     every worker's pushes of clocks < c are applied (min applied >= c). Pushes of one
//           clock are averaged and applied once, as all-reduce training would;
//   SSP<S>  min applied >= c - S: every worker's first c - S pushes, and (messages from one
//           worker arrive in order) all of the worker's own. Each push is applied on arrival;
//   ASP     at once; each push is applied on arrival.
// A pull that must wait is parked with its shard and answered when a push makes it
// admissible: waiting costs the server nothing, and the worker sleeps (protocol.hpp).
//
// Pushes carry the pusher's optimizer (its hyper-parameters, such as a scheduled learning
// rate) and are applied with 1/workers of their gradient, the mean over workers.
//
// Replies are sent without waiting for them to arrive: a reply too large for MPI's eager
// protocol completes only once its worker receives it, and a worker that is stopped (or just
// slow) must not hold the server, and with it every other worker, under ASP. Each reply
// owns its buffer until it is delivered; delivered buffers are reused.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <compare>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/model/huge_pages.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/sync/ps/plan.hpp"
#include "strata/sync/ps/protocol.hpp"
#include "strata/sync/sparse_rows.hpp"
#include "strata/trace/timeline.hpp"
#include "strata/sync/stats.hpp"

namespace strata::sync::ps {

template <Communicator C, class O>
class server {
  static_assert(RowOptimizer<O>, "the parameter server applies the optimizer to rows: it needs a RowOptimizer");

 public:
  /// Takes the initial values of the shards placed on this rank from the bindings (which
  /// every rank holds equal after the start-up broadcast).
  server(C& comm, const plan& p, const O& optimizer) : comm_(&comm), plan_(&p) {
    for (std::size_t v = 0; v < p.variables.size(); ++v)
      for (std::size_t k = 0; k < p.variables[v].shards.size(); ++k) {
        const shard_plan& s = p.variables[v].shards[k];
        if (s.host != comm.rank()) continue;
        shard_state& state = shards_[key(v, k)];
        state.variable = &p.variables[v];
        state.plan = &s;
        for (const element_range& r : s.blocks) {
          const auto from = p.variables[v].binding.param.subspan(r.offset, r.size);
          state.values.insert(state.values.end(), from.begin(), from.end());
        }
        state.optimizer_state = make_state_for(
            optimizer, s.elements, p.variables[v].sparse() ? optim::gradient_form::sparse_rows : optim::gradient_form::dense);
        state.applied.assign(static_cast<std::size_t>(comm.size()), 0);
        held_.server_values += state.values.size() * sizeof(float);
        held_.optimizer_state += state_bytes<O>(state.optimizer_state);
      }
  }

  /// What this rank's shards hold (fixed at construction: shards never grow).
  const memory_use& held() const { return held_; }

  server(const server&) = delete;
  server& operator=(const server&) = delete;
  ~server() { join(); }

  void start() {
    thread_ = std::thread([this] {
      trace::name_thread("parameter server");
      try {
        run();
      } catch (const std::exception& e) {
        // Workers waiting on this server time out naming this rank; say why here.
        std::fputs(fmt::format("strata: the parameter server on rank {} stopped: {}\n", comm_->rank(), e.what()).c_str(), stderr);
      }
    });
  }

  /// Returns once every worker said it is done (executor destruction on every rank).
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct pending_pull {
    int worker;
    std::uint64_t clock;
    std::vector<std::uint32_t> rows;  // sparse pulls
    bool snapshot = false;            // values and optimizer state, at a BSP cut
  };
  /// A sparse push kept as it was received: its rows (sorted, unique) and their gradient.
  struct kept_push {
    message_bytes bytes;
    std::span<const std::uint32_t> rows;
    std::span<const float> grad;
  };
  /// A kept push's place in the merge: its next row, which push (arrival order breaks ties
  /// between equal rows), and which of its entries.
  struct merge_head {
    std::uint32_t row;
    std::size_t push, entry;
    auto operator<=>(const merge_head&) const = default;
  };
  /// The pushes of one clock under BSP, until every worker's has arrived.
  struct gathering {
    int arrivals = 0;
    std::vector<float> dense;       // sum of dense pushes
    std::vector<kept_push> sparse;  // in arrival order, summed row by row once all are in
    std::optional<O> optimizer;
  };
  struct shard_state {
    const variable_plan* variable = nullptr;
    const shard_plan* plan = nullptr;
    host_vector<float> values;  // random rows of a large table: huge pages spare the TLB
    typename O::state optimizer_state;
    std::vector<std::uint64_t> applied;  // per worker
    std::int64_t updates = 0;            // optimizer applications
    std::map<std::uint64_t, gathering> clocks;
    gathering spare;  // a finished clock's buffers, kept for the next
    std::vector<pending_pull> parked;
  };

  static std::uint64_t key(std::size_t variable, std::size_t shard) { return (std::uint64_t(variable) << 32) | shard; }

  void run() {
    backoff idle(pace::polling());
    int done = 0;
    while (done < comm_->size()) {
      bool busy = deliver();
      for (int worker = 0; worker < comm_->size(); ++worker)
        if (comm_->iprobe(worker, request_tag)) {
          busy = true;
          done += handle(worker) ? 1 : 0;
        }
      if (busy) idle.reset();
      else if (delivering_recently()) std::this_thread::yield();  // large replies move only while we call in
      else idle.pause();
    }
    outbox_.wait_all(*comm_);  // every worker said done, so every reply was received
  }

  /// Forgets the replies that were delivered (their buffers go to spare_); true if any was.
  bool deliver() {
    if (!outbox_.collect(*comm_, spare_)) return false;
    last_delivery_ = std::chrono::steady_clock::now();
    return true;
  }

  /// Whether replies are pending and one was delivered in the last few milliseconds: then they
  /// are moving and the server keeps calling in; a reply that waits longer is for a worker
  /// that stopped or is busy, and is then only checked between the idle sleeps.
  bool delivering_recently() const {
    return !outbox_.empty() && std::chrono::steady_clock::now() - last_delivery_ < std::chrono::milliseconds(5);
  }

  /// A buffer for a reply's payload, or for the next request when the last one is kept: the
  /// smallest spare that holds it, else the largest (allocating megabytes per message costs
  /// page faults).
  message_bytes take_buffer(std::size_t bytes) {
    message_bytes buffer;
    if (!spare_.empty()) {
      const auto holds = [&](const message_bytes& b) { return b.capacity() >= bytes; };
      const auto best = std::ranges::min_element(spare_, [&](const message_bytes& a, const message_bytes& b) {
        if (holds(a) != holds(b)) return holds(a);
        return holds(a) ? a.capacity() < b.capacity() : a.capacity() > b.capacity();
      });
      buffer = std::move(*best);
      spare_.erase(best);
    }
    resize_message(buffer, bytes);
    return buffer;
  }

  /// Handles one request; true when it was the worker's last ("done").
  bool handle(int worker) {
    request_header header;
    receive(*comm_, worker, request_tag, std::as_writable_bytes(std::span<request_header>(&header, 1)));
    message_bytes& payload = request_;  // reused, or a spare where a kept push took it: no allocation per request
    resize_message(payload, header.payload_bytes);
    if (!payload.empty()) receive(*comm_, worker, request_payload_tag, payload);
    if (header.kind == op::done) return true;
    try {
      shard_state& shard = find(header);
      switch (header.kind) {
        case op::push_dense:
        case op::push_sparse: push(shard, worker, header); break;
        case op::pull_dense:
        case op::pull_sparse:
        case op::snapshot: pull(shard, worker, header, payload); break;
        case op::restore: restore(shard, worker, header, payload); break;
        default: throw usage_error(fmt::format("unknown request kind {}", static_cast<std::uint32_t>(header.kind)));
      }
    } catch (const std::exception& e) {
      // A rejected request changes nothing; pulls are answered with the error, pushes
      // report it with the worker's next pull.
      errors_[worker] = fmt::format("the parameter server on rank {} rejected a request from rank {}: {}", comm_->rank(),
                                    worker, e.what());
      if (header.kind != op::push_dense && header.kind != op::push_sparse) reply_error(worker, header);
    }
    return false;
  }

  shard_state& find(const request_header& header) {
    const auto at = shards_.find(key(header.variable, header.shard));
    if (at == shards_.end())
      throw usage_error(fmt::format("variable {} shard {} is not hosted here", header.variable, header.shard));
    return at->second;
  }

  /// The rows a sparse request names, checked against the shard: within it, sorted, each
  /// once (what clients send; sorted, a repeat is caught by comparing neighbours).
  static std::span<const std::uint32_t> rows_in(const shard_state& shard, const request_header& header,
                                                std::span<const std::byte> bytes) {
    if (bytes.size() < header.rows * sizeof(std::uint32_t)) throw usage_error("the payload is shorter than its rows");
    const std::span<const std::uint32_t> rows(reinterpret_cast<const std::uint32_t*>(bytes.data()), header.rows);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] < shard.plan->first_row || rows[i] >= shard.plan->first_row + shard.plan->rows)
        throw usage_error(fmt::format("row {} of \"{}\" is outside shard rows [{}, {})", rows[i], shard.variable->binding.name,
                                      shard.plan->first_row, shard.plan->first_row + shard.plan->rows));
      if (i > 0 && rows[i] <= rows[i - 1])
        throw usage_error(fmt::format("the rows of a request for \"{}\" are not sorted and unique (row {} after {})",
                                      shard.variable->binding.name, rows[i], rows[i - 1]));
    }
    return rows;
  }

  /// Applies the push in request_; a sparse BSP push is kept instead, until its clock is complete.
  void push(shard_state& shard, int worker, const request_header& header) {
    std::span<const std::byte> payload = request_;
    const bool sparse = header.kind == op::push_sparse;
    if (payload.size() < sizeof(O)) throw usage_error("a push without its optimizer");
    O optimizer;
    std::memcpy(static_cast<void*>(&optimizer), payload.data(), sizeof(O));
    payload = payload.subspan(sizeof(O));
    const std::span<const std::uint32_t> rows = sparse ? rows_in(shard, header, payload) : std::span<const std::uint32_t>();
    payload = payload.subspan(rows.size_bytes());
    const std::size_t expected = sparse ? rows.size() * shard.variable->row_elements : shard.plan->elements;
    if (payload.size() != expected * sizeof(float))
      throw usage_error(fmt::format("a gradient of {} values for \"{}\" where {} were expected", payload.size() / sizeof(float),
                                    shard.variable->binding.name, expected));
    if (header.clock != shard.applied[static_cast<std::size_t>(worker)] && shard.variable->strategy.consistency !=
                                                                                consistency_kind::bsp)
      throw usage_error(fmt::format("push of clock {} after {} pushes", header.clock, shard.applied[worker]));
    const std::span<const float> grad(reinterpret_cast<const float*>(payload.data()), expected);
    const trace::span traced("apply", "ps", payload.size(), [&] {
      return fmt::format("\"{}\" shard {}: rank {}'s push of clock {}", shard.variable->binding.name, shard_index(shard), worker,
                         header.clock);
    });
    const float share = 1.0f / static_cast<float>(comm_->size());
    const std::size_t width = shard.variable->row_elements;

    if (shard.variable->strategy.consistency == consistency_kind::bsp) {
      auto [slot, fresh] = shard.clocks.try_emplace(header.clock);
      gathering& g = slot->second;
      if (fresh) std::swap(g, shard.spare);  // the buffers of an earlier clock, emptied
      if (sparse) {
        // Kept where it was received (the spans stay valid as the buffer moves); the next
        // request is received into a spare that holds this one.
        g.sparse.push_back({std::exchange(request_, take_buffer(request_.size())), rows, grad});
      } else {
        g.dense.resize(expected, 0.0f);
        add(g.dense, grad, 1.0f);
      }
      g.optimizer = optimizer;
      if (++g.arrivals < comm_->size()) return;
      // Every worker's push of this clock is in: apply their mean once.
      ++shard.updates;
      if (sparse) {
        apply_merged(shard, g.sparse, *g.optimizer, share);
        for (kept_push& k : g.sparse) spare_.push_back(std::move(k.bytes));
        g.sparse.clear();
      } else {
        for (float& x : g.dense) x *= share;
        g.optimizer->update(shard.values, g.dense, shard.optimizer_state, shard.updates);
      }
      for (auto& a : shard.applied) a = header.clock + 1;
      g.arrivals = 0;
      g.dense.clear();
      shard.spare = std::move(g);
      shard.clocks.erase(header.clock);
    } else {
      ++shard.updates;
      std::vector<float>& scaled = scaled_;
      scaled.assign(grad.begin(), grad.end());
      for (float& x : scaled) x *= share;
      const std::int64_t step = 1 + (shard.updates - 1) / comm_->size();  // Adam's step: updates per worker
      if (sparse)
        for (std::size_t i = 0; i < rows.size(); ++i) {  // sorted by the client
          if (i + rows_ahead < rows.size()) prefetch_row<true>(row_in(shard, rows[i + rows_ahead]), width);
          apply_row(shard, optimizer, rows[i], std::span<const float>(scaled).subspan(i * width, width), step);
        }
      else optimizer.update(shard.values, scaled, shard.optimizer_state, step);
      ++shard.applied[static_cast<std::size_t>(worker)];
    }
    answer_parked(shard);
  }

  /// Applies, row by row, `share` of the sum of a BSP clock's sparse pushes. Their rows are
  /// sorted, so walking them together (a heap of each push's next row, ties by arrival)
  /// visits the shard forwards and meets each row's gradients together: a row's sum adds
  /// them in arrival order from 0.0f, without combining the pushes into a table of sums first.
  void apply_merged(shard_state& shard, std::span<const kept_push> pushes, const O& optimizer, float share) {
    const std::size_t width = shard.variable->row_elements;
    std::vector<merge_head>& heads = merge_heads_;
    heads.clear();
    for (std::size_t k = 0; k < pushes.size(); ++k)
      if (!pushes[k].rows.empty()) heads.push_back({pushes[k].rows[0], k, 0});
    constexpr std::greater<> later;
    std::ranges::make_heap(heads, later);
    std::vector<float>& sum = scaled_;
    sum.resize(width);
    while (!heads.empty()) {
      const std::uint32_t row = heads.front().row;
      std::ranges::fill(sum, 0.0f);
      while (!heads.empty() && heads.front().row == row) {
        std::ranges::pop_heap(heads, later);
        merge_head& head = heads.back();
        const kept_push& push = pushes[head.push];
        if (head.entry + rows_ahead < push.rows.size())
          prefetch_row<true>(row_in(shard, push.rows[head.entry + rows_ahead]), width);
        add(sum, push.grad.subspan(head.entry * width, width), 1.0f);
        if (++head.entry < push.rows.size()) {
          head.row = push.rows[head.entry];
          std::ranges::push_heap(heads, later);
        } else {
          heads.pop_back();
        }
      }
      for (float& x : sum) x *= share;
      apply_row(shard, optimizer, row, sum, shard.updates);
    }
  }

  static void add(std::span<float> into, std::span<const float> values, float scale) {
    for (std::size_t i = 0; i < into.size(); ++i) into[i] += scale * values[i];
  }

  /// Where row `row` of the whole table is in the shard's values.
  static float* row_in(shard_state& shard, std::uint32_t row) {
    return shard.values.data() + (row - shard.plan->first_row) * shard.variable->row_elements;
  }

  /// Applies the optimizer to one row of the shard.
  static void apply_row(shard_state& shard, const O& optimizer, std::uint32_t row, std::span<const float> grad,
                        std::int64_t step) {
    float* values = row_in(shard, row);
    optimizer.update(std::span<float>(values, grad.size()), grad, shard.optimizer_state, step,
                     static_cast<std::size_t>(values - shard.values.data()));
  }

  bool admissible(const shard_state& shard, const pending_pull& pull) const {
    const std::uint64_t slowest = *std::min_element(shard.applied.begin(), shard.applied.end());
    if (pull.snapshot) return slowest >= pull.clock;
    switch (shard.variable->strategy.consistency) {
      case consistency_kind::bsp: return slowest >= pull.clock;
      case consistency_kind::ssp: {
        const auto s = static_cast<std::uint64_t>(shard.variable->strategy.staleness);
        return pull.clock <= s || slowest >= pull.clock - s;
      }
      case consistency_kind::asp: return true;
    }
    return true;
  }

  void pull(shard_state& shard, int worker, const request_header& header, std::span<const std::byte> payload) {
    pending_pull p{worker, header.clock, {}, header.kind == op::snapshot};
    if (header.kind == op::pull_sparse) {
      const auto rows = rows_in(shard, header, payload);
      p.rows.assign(rows.begin(), rows.end());
    }
    if (admissible(shard, p)) {
      answer(shard, p);
    } else {
      trace::instant("park", "ps", [&] {
        return fmt::format("\"{}\" shard {}: rank {}'s pull of clock {} waits for slower workers", shard.variable->binding.name,
                           shard_index(shard), worker, header.clock);
      });
      shard.parked.push_back(std::move(p));
    }
  }

  /// Replaces the shard's values and optimizer state (a checkpoint restored) and sets every
  /// worker's clock to header.clock: the restored update count.
  void restore(shard_state& shard, int worker, const request_header& header, std::span<const std::byte> payload) {
    const std::vector<optim::named_state> state = O::tensors(shard.optimizer_state);
    const std::size_t expected = shard.values.size() * (1 + state.size());
    if (payload.size() != expected * sizeof(float))
      throw usage_error(fmt::format("a restore of {} values for \"{}\" where {} were expected", payload.size() / sizeof(float),
                                    shard.variable->binding.name, expected));
    const float* in = reinterpret_cast<const float*>(payload.data());
    std::copy_n(in, shard.values.size(), shard.values.begin());
    in += shard.values.size();
    for (const optim::named_state& t : state) {
      std::copy_n(in, t.values.size(), t.values.begin());
      in += t.values.size();
    }
    std::ranges::fill(shard.applied, header.clock);
    // Applications so far: once per clock under BSP, once per push otherwise (Adam's step).
    const bool bsp = shard.variable->strategy.consistency == consistency_kind::bsp;
    shard.updates = static_cast<std::int64_t>(header.clock) * (bsp ? 1 : comm_->size());
    for (auto& [clock, g] : shard.clocks)
      for (kept_push& k : g.sparse) spare_.push_back(std::move(k.bytes));
    shard.clocks.clear();
    message_bytes ack = take_buffer(shard.applied.size() * sizeof(std::uint64_t));
    std::memcpy(ack.data(), shard.applied.data(), ack.size());
    send_reply(worker, {.variable = variable_index(shard), .shard = shard_index(shard)}, std::move(ack));
    answer_parked(shard);
  }

  void answer_parked(shard_state& shard) {
    std::vector<pending_pull> still;
    for (pending_pull& p : shard.parked)
      if (admissible(shard, p)) answer(shard, p);
      else still.push_back(std::move(p));
    shard.parked = std::move(still);
  }

  /// Replies with the applied clocks, then the shard's values (dense) or the rows asked for.
  void answer(shard_state& shard, const pending_pull& p) {
    if (auto error = errors_.find(p.worker); error != errors_.end()) {
      const std::string message = std::move(error->second);
      errors_.erase(error);
      return reply_error(p.worker, {.variable = variable_index(shard), .shard = shard_index(shard)}, message);
    }
    const std::size_t width = shard.variable->row_elements;
    const std::vector<optim::named_state> state = O::tensors(shard.optimizer_state);
    const std::size_t values = p.snapshot ? shard.values.size() * (1 + state.size())
                               : p.rows.empty() ? shard.values.size()
                                                : p.rows.size() * width;
    const trace::span traced("answer", "ps", values * sizeof(float), [&] {
      return fmt::format("\"{}\" shard {} to rank {}, clock {}", shard.variable->binding.name, shard_index(shard), p.worker, p.clock);
    });
    message_bytes payload = take_buffer(shard.applied.size() * sizeof(std::uint64_t) + values * sizeof(float));
    std::memcpy(payload.data(), shard.applied.data(), shard.applied.size() * sizeof(std::uint64_t));
    float* out = reinterpret_cast<float*>(payload.data() + shard.applied.size() * sizeof(std::uint64_t));
    if (p.snapshot) {
      out = std::ranges::copy(shard.values, out).out;
      for (const optim::named_state& t : state) out = std::ranges::copy(t.values, out).out;
    } else if (p.rows.empty()) std::ranges::copy(shard.values, out);
    else
      for (std::size_t i = 0; i < p.rows.size(); ++i) {
        if (i + rows_ahead < p.rows.size()) prefetch_row(row_in(shard, p.rows[i + rows_ahead]), width);
        std::copy_n(row_in(shard, p.rows[i]), width, out + i * width);
      }
    send_reply(p.worker, {.variable = variable_index(shard), .shard = shard_index(shard)}, std::move(payload));
  }

  void reply_error(int worker, const request_header& header, std::string message = {}) {
    if (message.empty()) {
      message = std::move(errors_[worker]);
      errors_.erase(worker);
    }
    message_bytes bytes = take_buffer(message.size());
    std::memcpy(bytes.data(), message.data(), message.size());
    send_reply(worker, {.variable = header.variable, .shard = header.shard, .failed = 1}, std::move(bytes));
  }

  /// Starts sending a reply (its header's payload_bytes set here, from the payload) and
  /// returns: deliver() completes it once the worker received it.
  void send_reply(int worker, reply_header header, message_bytes payload) {
    header.payload_bytes = payload.size();
    if (outbox_.empty()) last_delivery_ = std::chrono::steady_clock::now();  // the clock of delivering_recently
    outbox_.send(*comm_, worker, reply_tag, reply_payload_tag, header, std::move(payload));
  }

  std::uint32_t variable_index(const shard_state& shard) const {
    return static_cast<std::uint32_t>(shard.variable - plan_->variables.data());
  }
  std::uint32_t shard_index(const shard_state& shard) const {
    return static_cast<std::uint32_t>(shard.plan - shard.variable->shards.data());
  }

  C* comm_;
  const plan* plan_;
  std::map<std::uint64_t, shard_state> shards_;
  std::map<int, std::string> errors_;  // per worker: a rejected push, reported with its next pull
  outbox<C> outbox_;                           // replies in flight, each owning its payload
  std::vector<message_bytes> spare_;  // payload buffers of delivered replies and of applied BSP pushes
  std::chrono::steady_clock::time_point last_delivery_{};
  message_bytes request_;
  std::vector<float> scaled_;
  std::vector<merge_head> merge_heads_;  // the merge's heap, least row first
  memory_use held_;
  std::thread thread_;
};

}  // namespace strata::sync::ps
