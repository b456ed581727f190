#pragma once
// Hierarchical all-reduce for ranks spread over several nodes: a ring reduce-scatter among
// the L ranks of each node leaves each rank the node's sum of one share (1/L) of the
// buffer; a ring all-reduce between the ranks holding the same share on every node sums
// it across nodes; a ring all-gather within the node spreads the shares. Each rank sends
// only its 1/L share across nodes, and the L ranks of a node use the links in parallel.
//
// The cross-node ring computes every element's result on one rank and the rest is copies,
// so all ranks end bitwise identical. The buffer goes through these phases in pieces, the
// rings within and between nodes running at once on different pieces. Through a 16-bit
// wire type every ring encodes and decodes its chunks as the flat ring does, while they
// are in cache: no pass over the whole buffer before or after.
//
// Where the node's ranks may read each other's memory (PeerReads), the node needs no
// rings: each rank sums its share of a piece from the node's buffers where they lie, and
// copies the others' finished shares straight from them (hierarchical_by_reads). A message
// ring within the node copies every byte twice, through the sender's and the receiver's
// hands, and waits on both; a read copies it once. The node's sum is then exact, and a
// 16-bit wire type rounds only between nodes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/model/huge_pages.hpp"
#include "strata/numeric/lanes.hpp"
#include "strata/sync/allreduce/ring.hpp"
#include "strata/sync/span_list.hpp"

namespace strata::sync {

/// The two communicators of a hierarchical all-reduce.
template <Communicator C>
struct node_groups {
  C local;  ///< this node's ranks, in rank order
  C cross;  ///< the ranks with this local rank, one per node, in node order
};

namespace detail {

// The cross-node rings pair local rank l of every node, so every node needs l.
template <Communicator C>
void require_equal_nodes(C& comm, int node, int node_size) {
  const int mine[] = {node, node_size};
  std::vector<int> all(2 * static_cast<std::size_t>(comm.size()));  // (node, its size) of each rank
  comm.allgather(std::span<const int>(mine), std::span<int>(all));
  std::map<int, int> sizes;
  for (std::size_t i = 0; i < all.size(); i += 2) sizes[all[i]] = all[i + 1];
  if (std::ranges::all_of(sizes, [&](const auto& entry) { return entry.second == node_size; })) return;
  std::string listed;
  for (const auto& [id, size] : sizes) listed += fmt::format("{}node {} has {}", listed.empty() ? "" : ", ", id, size);
  throw comm_error(fmt::format("hierarchical all-reduce needs the same number of ranks on every node, but {}", listed));
}

}  // namespace detail

/// Collective over `comm`: its ranks grouped by node, where node = rank / ranks_per_node
/// (simulated nodes) when ranks_per_node > 0, else the machine (`node_color`). Throws
/// comm_error, naming the node sizes, unless every node has the same number of ranks.
template <Communicator C>
node_groups<C> split_by_node(C& comm, int ranks_per_node) {
  const int node = ranks_per_node > 0 ? comm.rank() / ranks_per_node : comm.node_color();
  C local = comm.split(node, comm.rank());
  detail::require_equal_nodes(comm, node, local.size());
  C cross = comm.split(local.rank(), comm.rank());
  return {std::move(local), std::move(cross)};
}

/// Reusable state of a hierarchical all-reduce: one ring workspace per communicator, since
/// a ring within the node and one between nodes run at once; and, through a wire type, the
/// whole buffer as it travels, which both rings of a piece use (see hierarchical_allreduce).
template <Communicator C, Element W>
struct hierarchical_workspace {
  ring_workspace<C, W> within, across;
  host_vector<W> wire;
  // Through reads of the node's memory (hierarchical_by_reads): where each rank of the node
  // keeps each part of its buffer; a chunk read from another rank, to be added; the
  // messages that say a share is finished and that a rank has read all it needs.
  struct node_buffer {
    std::vector<peer_range> parts;       // address and bytes of each part, in its owner's memory
    std::vector<shared_region> regions;  // where each part lies in memory this rank may map (PeerViews)
    std::vector<std::size_t> starts;     // the first element of each part
  };
  std::vector<node_buffer> node;
  std::vector<peer_range> ranges;
  std::vector<std::pair<const std::byte*, std::size_t>> views;  // (where, elements) of a range seen in place
  host_vector<std::byte> read;  // values as they are (not W), read to be added
  // (Declared before the requests whose receives fill them, so that a request given up
  // unfinished, when a rank failed, is taken back before they are freed.)
  std::vector<std::byte> tokens;
  std::vector<typename C::request> finished, done_reading, sends;
};

namespace detail {

/// What each ring of a hierarchical all-reduce works on, from the caller's codec over the
/// whole buffer. In place the ring between nodes scales the sums it completes. Through a
/// wire type a value is scaled (and gets its residual) as it enters the sum within the
/// node; the ring between nodes adds the nodes' rounded sums, rounding again. Both keep
/// what rounding lost in the caller's residual: where this rank enters its node's sum into
/// the ring between nodes, the residual its node's ring left there is added back in before
/// it is overwritten, so error feedback carries every rounding this rank made. The rings'
/// wire buffers are pieces of one: the values the ring between nodes leaves in a share are
/// the ones the node's all-gather sends.
template <Element T, Element W>
struct hierarchical_parts {
  static constexpr bool in_place = ring_codec<T, W>::in_place;
  const ring_codec<T, W>& whole;
  std::span<W> wire;  // as long as the buffer through a wire type; empty in place
  int local_ranks, local_rank;

  /// This rank's share of `piece` (elements of the buffer), which it sums between nodes.
  segment share_of(segment piece) const {
    const segment s = ring_owned_segment(piece.size, local_ranks, local_rank);
    return {piece.begin + s.begin, s.size};
  }
  ring_codec<T, W> within(segment s) const { return codec_of(s, !in_place); }
  ring_codec<T, W> across(segment s) const { return codec_of(s, in_place); }
  std::span<W> wire_of(segment s) const { return in_place ? wire : wire.subspan(s.begin, s.size); }
  /// The ring between nodes over sums the node made exactly (hierarchical_by_reads): it
  /// scales them, and through a wire type rounds them, as they enter.
  ring_codec<T, W> across_node_sums(segment s) const { return codec_of(s, true); }
  /// A ring has finished: a non-finite value it saw reaches the caller's codec.
  void finished(const ring_codec<T, W>& ring) const { whole.nonfinite = whole.nonfinite || ring.nonfinite; }
  /// Another rank's finished share, copied, held a non-finite value.
  void saw_nonfinite() const { whole.nonfinite = true; }

 private:
  ring_codec<T, W> codec_of(segment s, bool scaled) const {
    const std::span<float> kept = whole.residual.empty() ? whole.residual : whole.residual.subspan(s.begin, s.size);
    return {scaled ? whole.scale : T{1}, kept};
  }
};

/// A ring that one thread advances among other work, and its codec, declared first: it
/// must outlive the run.
template <Communicator C, Element T, Element W>
struct ring_in_flight {
  ring_codec<T, W> codec;
  std::optional<ring_run<C, T, W>> run;
};

/// hierarchical_allreduce over `pieces` pieces of `data`, one ring within the node and one
/// between nodes running at once, advanced in turn without blocking by this thread.
template <Testable C, Element T, Element W>
std::size_t hierarchical_in_pieces(node_groups<C>& groups, const span_list<T>& data,
                                   const hierarchical_parts<T, W>& parts, hierarchical_workspace<C, W>& work,
                                   ring_pipeline within, ring_pipeline across, std::size_t pieces) {
  C& local = groups.local;
  const auto piece_at = [&](std::size_t k) {
    return ring_segment(data.size(), static_cast<int>(pieces), static_cast<int>(k));
  };
  const int l = local.size(), x = groups.cross.size();
  using ring = ring_in_flight<C, T, W>;
  ring in_node, between;
  // Rings within the node started (the pieces' reduce-scatters, then their all-gathers) and
  // rings between nodes started, and of each the ones finished.
  std::size_t started_within = 0, reduced = 0, started_across = 0, summed = 0, sent = 0;
  bool moved = false;  // in this pass, a ring started, finished or got on
  // Advances a ring; once it has finished, counts its bytes and ends it.
  auto finished = [&](ring& r) {
    const std::size_t before = r.run->progress();
    const bool done = r.run->advance(false);
    moved = moved || done || r.run->progress() != before;
    if (done) {
      sent += r.run->sent();
      r.run.reset();
      parts.finished(r.codec);
    }
    return done;
  };
  backoff idle(collective_pace(groups.cross));  // the ring between nodes is the one that waits on a network
  while (started_within < 2 * pieces || in_node.run || between.run) {
    moved = false;
    if (!in_node.run && started_within < 2 * pieces) {
      const bool gather = started_within >= pieces;
      const std::size_t k = gather ? started_within - pieces : started_within;
      if (!gather || k < summed) {  // a piece is spread once summed across nodes
        const int first = gather ? l - 1 : 0, last = gather ? 2 * (l - 1) : l - 1;
        const segment piece = piece_at(k);
        in_node.codec = parts.within(piece);
        in_node.run.emplace(local, data.slice(piece.begin, piece.size), in_node.codec, work.within, within, first, last,
                            parts.wire_of(piece));
        ++started_within;
        moved = true;
      }
    }
    if (!between.run && started_across < reduced) {
      const segment share = parts.share_of(piece_at(started_across));
      between.codec = parts.across(share);
      between.run.emplace(groups.cross, data.slice(share.begin, share.size), between.codec, work.across, across, 0,
                          2 * (x - 1), parts.wire_of(share));
      ++started_across;
      moved = true;
    }
    if (in_node.run && finished(in_node) && started_within <= pieces) ++reduced;  // a reduce-scatter finished
    if (between.run && finished(between)) ++summed;
    if (moved) idle.reset();
    else idle.pause();
  }
  return sent;
}

/// Every rank of the node learns where every other keeps its buffer, and where it lies in
/// memory the others may map (PeerViews). A collective: once it returns, every rank's buffer
/// is ready to be read. One allgather carries a buffer of up to `inline_parts` parts, the
/// count and each part's address, elements and region; a second, sized by the node's
/// longest list, only a buffer of more.
template <Communicator C, Element T, Element W>
void exchange_node_buffers(C& local, const span_list<T>& data, hierarchical_workspace<C, W>& work) {
  constexpr std::size_t inline_parts = 4, words = 6;  // per part: address, elements, region (4)
  const std::size_t l = static_cast<std::size_t>(local.size()), count = data.parts().size();
  const auto listed = [&](std::size_t most) {
    std::vector<std::uint64_t> mine(1 + words * most, 0);
    mine[0] = count;
    for (std::size_t k = 0; k < std::min(count, most); ++k) {
      const std::span<T> part = data.parts()[k];
      shared_region region;
      if constexpr (PeerViews<C>) region = local.region_of(part.data());
      const std::uint64_t entry[words] = {reinterpret_cast<std::uintptr_t>(part.data()), part.size(), region.id,
                                          static_cast<std::uint64_t>(region.handle), region.begin, region.bytes};
      std::ranges::copy(entry, mine.begin() + static_cast<std::ptrdiff_t>(1 + words * k));
    }
    return mine;
  };
  std::size_t most = inline_parts;
  std::vector<std::uint64_t> all(l * (1 + words * most));
  local.allgather(std::span<const std::uint64_t>(listed(most)), std::span<std::uint64_t>(all));
  std::size_t longest = 0;
  for (std::size_t r = 0; r < l; ++r) longest = std::max<std::size_t>(longest, all[r * (1 + words * most)]);
  if (longest > most) {
    most = longest;
    all.resize(l * (1 + words * most));
    local.allgather(std::span<const std::uint64_t>(listed(most)), std::span<std::uint64_t>(all));
  }
  work.node.resize(l);
  for (std::size_t r = 0; r < l; ++r) {
    const std::uint64_t* entry = all.data() + r * (1 + words * most);
    auto& buffer = work.node[r];
    buffer.parts.clear();
    buffer.regions.clear();
    buffer.starts.clear();
    std::size_t start = 0;
    for (std::size_t k = 0; k < entry[0]; ++k) {
      const std::uint64_t* part = entry + 1 + words * k;
      buffer.parts.push_back({static_cast<std::uintptr_t>(part[0]), static_cast<std::size_t>(part[1]) * sizeof(T)});
      buffer.regions.push_back({part[2], static_cast<std::int64_t>(part[3]), static_cast<std::uintptr_t>(part[4]),
                                static_cast<std::size_t>(part[5])});
      buffer.starts.push_back(start);
      start += static_cast<std::size_t>(part[1]);
    }
    if (start != data.size())
      throw usage_error(fmt::format("hierarchical all-reduce: local rank {} has {} elements, local rank {} {}",
                                    local.rank(), data.size(), r, start));
  }
}

/// Calls `visit(k, from, take)` for the pieces of elements [begin, begin + n) of local rank
/// `rank`'s buffer, part k of it from element `from` on, `take` elements, in order.
template <Communicator C, Element W, class Visit>
void walk_node_buffer(const hierarchical_workspace<C, W>& work, int rank, std::size_t begin, std::size_t n,
                      std::size_t element_bytes, Visit&& visit) {
  const auto& buffer = work.node[static_cast<std::size_t>(rank)];
  std::size_t k = static_cast<std::size_t>(std::ranges::upper_bound(buffer.starts, begin) - buffer.starts.begin()) - 1;
  for (std::size_t done = 0; done < n; ++k) {
    const std::size_t from = begin + done - buffer.starts[k];
    const std::size_t take = std::min(buffer.parts[k].bytes / element_bytes - from, n - done);
    visit(k, from, take);
    done += take;
  }
}

/// Copies elements [begin, begin + into.size()) of local rank `rank`'s buffer into `into`.
template <Communicator C, Element T, Element W>
void read_node_buffer(C& local, hierarchical_workspace<C, W>& work, int rank, std::size_t begin, std::span<T> into) {
  const auto& buffer = work.node[static_cast<std::size_t>(rank)];
  work.ranges.clear();
  walk_node_buffer(work, rank, begin, into.size(), sizeof(T), [&](std::size_t k, std::size_t from, std::size_t take) {
    work.ranges.push_back({buffer.parts[k].address + from * sizeof(T), take * sizeof(T)});
  });
  local.read_peer(rank, work.ranges, std::as_writable_bytes(into));
}

/// Elements [begin, begin + n) of local rank `rank`'s buffer as they lie, for `use(offset,
/// values)` to add or copy by plain loads: true where the rank's memory may be seen in place
/// here (PeerViews, node memory), else false, with nothing used: read it instead.
template <Communicator C, Element T, Element W, class Use>
bool view_node_buffer(C& local, hierarchical_workspace<C, W>& work, int rank, std::size_t begin, std::size_t n,
                      Use&& use) {
  if constexpr (PeerViews<C>) {
    const auto& buffer = work.node[static_cast<std::size_t>(rank)];
    work.views.clear();
    bool seen = true;
    walk_node_buffer(work, rank, begin, n, sizeof(T), [&](std::size_t k, std::size_t from, std::size_t take) {
      const std::byte* at = seen ? local.view_peer(rank, buffer.regions[k], buffer.parts[k].address + from * sizeof(T))
                                 : nullptr;
      seen = at != nullptr;
      work.views.push_back({at, take});
    });
    if (!seen) return false;
    std::size_t offset = 0;
    for (const auto& [at, take] : work.views) {
      use(offset, std::span<const T>(reinterpret_cast<const T*>(at), take));
      offset += take;
    }
    return true;
  } else {
    return false;
  }
}

/// hierarchical_allreduce where the node's ranks read each other's memory. In each piece a
/// rank owns a share (as the node's reduce-scatter would leave it): it reads the others'
/// values of its share a chunk at a time and adds them to its own, in T, one rank after
/// another; sums the share across nodes in the ring between nodes, which scales it (and,
/// through a wire type, rounds it, keeping what rounding lost in this rank's residual, the
/// only one that element has); and tells the node's other ranks, each of which then copies
/// the finished share straight from it, and learns from the message whether it held a NaN
/// or an infinity. One more message says a rank has read all it needs from the others, and
/// no rank returns (its buffer free to change) before every other has said so.
///
/// Where the node's memory may be seen in place (PeerViews: node memory, or loopback's
/// threads), a rank adds the others' values and copies their finished shares by plain loads
/// from where they lie; elsewhere it reads them through the kernel (read_peer) first.
///
/// A rank reads another's share of a piece only after that rank's message, so only after
/// the rank has finished reading the values this one holds there: the two never touch the
/// same memory at once. The ring between nodes advances between chunks. Returns the bytes
/// this rank sent between nodes and read within the node: what rings there would send.
template <Testable C, Element T, Element W>
  requires PeerReads<C>
std::size_t hierarchical_by_reads(node_groups<C>& groups, const span_list<T>& data,
                                  const hierarchical_parts<T, W>& parts, hierarchical_workspace<C, W>& work,
                                  ring_pipeline across, std::size_t pieces, std::size_t chunk) {
  C& local = groups.local;
  const int l = local.size(), me = local.rank(), x = groups.cross.size();
  exchange_node_buffers(local, data, work);
  const auto share = [&](std::size_t k, int rank) {
    const segment piece = ring_segment(data.size(), static_cast<int>(pieces), static_cast<int>(k));
    const segment s = ring_owned_segment(piece.size, l, rank);
    return segment{piece.begin + s.begin, s.size};
  };
  constexpr int finished_tag = 0x4852, done_reading_tag = 0x4853;  // "HR"
  work.finished.clear();  // (a call given up may have left receives into the tokens)
  work.done_reading.clear();
  work.sends.clear();
  // Rank r's message that its share of piece k is finished lands in tokens[2 + k * l + r]:
  // 1 where the share holds a NaN or an infinity (a rank that copies it learns so), else 0,
  // as tokens[1] and tokens[0], which this rank sends, are.
  work.tokens.assign(pieces * static_cast<std::size_t>(l) + static_cast<std::size_t>(l) + 2, std::byte{0});
  work.tokens[1] = std::byte{1};
  const std::span<const std::byte> token(work.tokens.data(), 1), nonfinite_token(work.tokens.data() + 1, 1);
  for (std::size_t k = 0; k < pieces; ++k)
    for (int r = 0; r < l; ++r)
      if (r != me)
        work.finished.push_back(local.irecv(std::span<std::byte>(&work.tokens[2 + k * l + r], 1), r, finished_tag));
  const auto finished_of = [&](int r, std::size_t k) -> typename C::request& {
    return work.finished[k * static_cast<std::size_t>(l - 1) + static_cast<std::size_t>(r < me ? r : r - 1)];
  };
  work.read.resize(chunk * sizeof(T));
  // Of each piece: elements of this rank's share summed within the node (of the piece
  // `summing`), shares started and finished across nodes; of each other rank, the next
  // piece to copy from it and the elements of that piece's share copied.
  std::size_t summing = 0, summed_at = 0, started_across = 0, finished_across = 0, sent = 0;
  std::vector<std::size_t> copying(static_cast<std::size_t>(l), 0), copied_at(static_cast<std::size_t>(l), 0);
  copying[static_cast<std::size_t>(me)] = pieces;
  ring_in_flight<C, T, W> between;
  backoff idle(collective_pace(groups.cross));
  const auto all_copied = [&] { return std::ranges::all_of(copying, [&](std::size_t k) { return k == pieces; }); };
  while (finished_across < pieces || !all_copied()) {
    bool moved = false;
    if (!between.run && started_across < summing) {
      const segment s = share(started_across++, me);
      between.codec = parts.across_node_sums(s);
      between.run.emplace(groups.cross, data.slice(s.begin, s.size), between.codec, work.across, across, 0,
                          2 * (x - 1), parts.wire_of(s));
      moved = true;
    }
    if (between.run) {
      const std::size_t before = between.run->progress();
      if (between.run->advance(false)) {
        sent += between.run->sent();
        between.run.reset();
        parts.finished(between.codec);
        const std::span<const std::byte> said = between.codec.nonfinite ? nonfinite_token : token;
        for (int r = 0; r < l; ++r)
          if (r != me) work.sends.push_back(local.isend(said, r, finished_tag));
        ++finished_across;
        moved = true;
      } else {
        moved = moved || between.run->progress() != before;
      }
    }
    for (int r = 0; r < l; ++r) {  // a chunk of each finished share that is left to copy
      std::size_t& k = copying[static_cast<std::size_t>(r)];
      std::size_t& at = copied_at[static_cast<std::size_t>(r)];
      if (k == pieces || !local.test(finished_of(r, k))) continue;
      if (at == 0 && work.tokens[2 + k * l + r] != std::byte{0}) parts.saw_nonfinite();
      const segment s = share(k, r);
      const std::size_t n = std::min(chunk, s.size - at);
      const auto copy = [&](std::size_t o, std::span<const T> values) {
        data.for_each(s.begin + at + o, values.size(), [&](std::size_t offset, std::span<T> d) {
          std::memcpy(d.data(), values.data() + offset, d.size_bytes());
        });
      };
      const bool seen = view_node_buffer<C, T>(local, work, r, s.begin + at, n, copy);
      if (!seen)
        data.for_each(s.begin + at, n, [&](std::size_t offset, std::span<T> d) {
          read_node_buffer(local, work, r, s.begin + at + offset, d);
        });
      sent += n * sizeof(T);
      if ((at += n) == s.size) {
        ++k;
        at = 0;
      }
      moved = true;
    }
    if (summing < pieces) {  // a chunk of this rank's share: the others' values added to its own
      const segment s = share(summing, me);
      const std::size_t n = std::min(chunk, s.size - summed_at), begin = s.begin + summed_at;
      for (int r = 0; r < l; ++r) {
        if (r == me) continue;
        const auto add = [&](std::size_t o, std::span<const T> values) {
          data.for_each(begin + o, values.size(), [&](std::size_t offset, std::span<T> d) {
            lanes::add(d.data(), values.data() + offset, d.data(), d.size());
          });
        };
        if (!view_node_buffer<C, T>(local, work, r, begin, n, add)) {
          const std::span<T> values(reinterpret_cast<T*>(work.read.data()), n);
          read_node_buffer(local, work, r, begin, values);
          add(0, values);
        }
        sent += n * sizeof(T);
      }
      if ((summed_at += n) == s.size) {
        ++summing;
        summed_at = 0;
      }
      moved = true;
    }
    if (moved) idle.reset();
    else idle.pause();
  }
  // Every share this rank reads is copied: say so, and wait until every other rank has.
  const pace schedule = collective_pace(local);
  for (int r = 0; r < l; ++r)
    if (r != me) {
      work.sends.push_back(local.isend(token, r, done_reading_tag));
      work.done_reading.push_back(local.irecv(std::span<std::byte>(&work.tokens[2 + pieces * l + r], 1), r,
                                              done_reading_tag));
    }
  for (auto& r : work.done_reading) wait_paced(local, r, schedule);
  for (auto& r : work.sends) wait_paced(local, r, schedule);
  return sent;
}

}  // namespace detail

/// Reduces `data` over all ranks of the communicator `groups` was split from, in place,
/// travelling as W: the sum times `codec.scale`, as ring_allreduce does. The rings within
/// a node run as `within`, the ring between nodes as `across`. Returns the bytes this rank
/// sent.
///
/// The buffer is cut into pieces of about `piece_elements` (0: one piece), so that while
/// the ring between nodes sums one piece, the rings within the node reduce the next or
/// spread one already summed: the network and the node's memory work at once. On each
/// communicator the rings run one at a time and in the same order on every rank (the
/// reduce-scatters of all pieces, then their all-gathers), as their messages must. A
/// backend that cannot test a request without blocking runs the phases one after another.
/// With one node, or one rank per node, it is one ring. With `read_within_node` and a
/// backend whose node's ranks may read each other's memory, the node's phases are reads
/// (hierarchical_by_reads), and the bytes they read count as sent.
template <Communicator C, Element T, Element W>
std::size_t hierarchical_allreduce(node_groups<C>& groups, const span_list<T>& data, const ring_codec<T, W>& codec,
                                   hierarchical_workspace<C, W>& work, ring_pipeline within, ring_pipeline across,
                                   std::size_t piece_elements, bool read_within_node = true) {
  C& local = groups.local;
  if (local.size() == 1) return ring_allreduce(groups.cross, data, codec, work.across, across);
  if (groups.cross.size() == 1) return ring_allreduce(local, data, codec, work.within, within);
  std::span<W> wire;
  if constexpr (!ring_codec<T, W>::in_place) {
    work.wire.resize(data.size());
    wire = work.wire;
  }
  const int l = local.size(), x = groups.cross.size();
  const detail::hierarchical_parts<T, W> parts{codec, wire, l, local.rank()};
  constexpr std::size_t most_pieces = 1024;
  const std::size_t wanted = piece_elements == 0 ? 1 : (data.size() + piece_elements - 1) / piece_elements;
  const std::size_t pieces = std::clamp<std::size_t>(wanted, 1, most_pieces);
  if constexpr (Testable<C> && PeerReads<C>)
    if (read_within_node && local.peer_reads()) {
      const std::size_t chunk = within.shared_chunk_elements > 0 ? within.shared_chunk_elements : within.chunk_elements;
      return detail::hierarchical_by_reads(groups, data, parts, work, across, pieces, std::max<std::size_t>(chunk, 1));
    }
  if constexpr (Testable<C>)
    if (pieces > 1) return detail::hierarchical_in_pieces(groups, data, parts, work, within, across, pieces);
  const segment all{0, data.size()}, share = parts.share_of(all);
  const ring_codec<T, W> in_node = parts.within(all), between = parts.across(share);
  std::size_t sent = detail::ring_steps(local, data, in_node, work.within, within, 0, l - 1, wire);
  sent += detail::ring_steps(groups.cross, data.slice(share.begin, share.size), between, work.across, across, 0,
                             2 * (x - 1), parts.wire_of(share));
  sent += detail::ring_steps(local, data, in_node, work.within, within, l - 1, 2 * (l - 1), wire);
  parts.finished(in_node);
  parts.finished(between);
  return sent;
}

}  // namespace strata::sync
