#pragma once
// Where the parameter-server variables of a model live: each PS<N> variable is split into
// its shards (Partition<Axis>, as even as the axis allows), and each shard is placed, in
// declaration order, on the host with the fewest bytes so far per rank on it and there on its
// rank with the fewest (ties: the lower rank), or on rank 0 when a builder asks for the first
// server (AutoDist's PS builder). A host's bytes are what its link carries to and from the
// other hosts' workers, and its ranks share its cores: PS<2> on 2 hosts x 2 ranks puts a shard
// on each host, not both on the first. Per rank, because a host of r of the job's p ranks
// serving s of all T bytes carries (p - r) x s in and r x (T - s) out, which are equal where
// s = T x r / p. Every rank computes the same plan from the same model and hosts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/model/variable.hpp"
#include "strata/strategy/builders.hpp"
#include "strata/strategy/canonical_string.hpp"
#include "strata/sync/partition.hpp"

namespace strata::sync::ps {

struct shard_plan {
  int host = 0;                       // the rank whose server thread owns the shard
  std::vector<element_range> blocks;  // the shard's elements in the variable
  std::size_t elements = 0;
  std::size_t first_row = 0, rows = 0;  // sparse variables: rows [first_row, first_row + rows)
};

struct variable_plan {
  std::size_t model_index = 0;  // in the model's declaration order
  variable_binding binding;
  strategy_descriptor strategy;
  std::size_t row_elements = 0;  // elements per row (axis 0)
  std::vector<shard_plan> shards;

  bool sparse() const { return strategy.sparse_rows; }
  std::size_t table_rows() const { return binding.shape.empty() ? 1 : binding.shape[0]; }
  /// The shard holding `row` (sparse variables are split by rows).
  std::size_t shard_of_row(std::size_t row) const {
    std::size_t k = 0;
    while (k + 1 < shards.size() && row >= shards[k + 1].first_row) ++k;
    return k;
  }
};

struct plan {
  std::vector<variable_plan> variables;
  std::vector<std::size_t> bytes_per_rank;  // values each rank's server holds (optimizer state not counted)
};

/// Places shards one after another: each on the host holding the fewest bytes so far per
/// rank on it and there on its rank holding the fewest (ties: the lower rank), or every one
/// on rank 0 for the first server. `host_of_rank`: each rank's host (empty: one host). A
/// shard costs O(log ranks): the hosts are kept ordered by their load, and each host's ranks
/// by theirs, for the cost model places PS<k> variables over up to a million ranks for every
/// plan it scores (a pass over the ranks per shard made a prediction at 16384 ranks take
/// minutes).
class server_placement {
 public:
  server_placement(int ranks, server_assignment servers, std::span<const int> host_of_rank = {})
      : servers_(servers),
        hosts_(host_of_rank.empty() ? one_host(ranks) : number_hosts(host_of_rank)),
        bytes_per_rank_(static_cast<std::size_t>(ranks), 0),
        bytes_per_host_(hosts_.ranks_on_host.size(), 0),
        ranks_by_load_(hosts_.ranks_on_host.size()) {
    if (hosts_.host_of_rank.size() != bytes_per_rank_.size())
      throw usage_error(fmt::format("internal: shards placed over {} ranks were given the hosts of {}", ranks,
                                    host_of_rank.size()));
    for (std::size_t r = 0; r < bytes_per_rank_.size(); ++r) ranks_by_load_[host_of(r)].insert({0, r});
    for (std::size_t h = 0; h < bytes_per_host_.size(); ++h) hosts_by_load_.insert(key_of(h));
  }

  /// The rank the next shard, of `bytes`, goes to; its bytes are counted there.
  std::size_t place(std::size_t bytes) {
    std::size_t next = 0;
    if (servers_ == server_assignment::least_loaded) next = hosts_by_load_.begin()->best_rank;
    const std::size_t h = host_of(next);
    hosts_by_load_.erase(key_of(h));
    ranks_by_load_[h].erase({bytes_per_rank_[next], next});
    bytes_per_rank_[next] += bytes;
    bytes_per_host_[h] += bytes;
    ranks_by_load_[h].insert({bytes_per_rank_[next], next});
    hosts_by_load_.insert(key_of(h));
    return next;
  }

  /// Bytes placed on each rank so far.
  const std::vector<std::size_t>& bytes_per_rank() const { return bytes_per_rank_; }
  /// A rank's host, numbered from 0 in order of the hosts' first ranks; and the ranks on each.
  std::size_t host_of(std::size_t rank) const { return hosts_.host_of_rank[rank]; }
  const std::vector<std::size_t>& ranks_on_host() const { return hosts_.ranks_on_host; }

 private:
  /// A host's place in the order: its bytes per rank (compared crosswise, exactly), then its
  /// least loaded rank's bytes and number.
  struct host_key {
    std::size_t bytes, ranks, best_bytes, best_rank;
    friend bool operator<(const host_key& a, const host_key& b) {
      const std::size_t load_a = a.bytes * b.ranks, load_b = b.bytes * a.ranks;
      if (load_a != load_b) return load_a < load_b;
      return std::pair(a.best_bytes, a.best_rank) < std::pair(b.best_bytes, b.best_rank);
    }
  };
  host_key key_of(std::size_t h) const {
    const auto& [best_bytes, best_rank] = *ranks_by_load_[h].begin();
    return {bytes_per_host_[h], hosts_.ranks_on_host[h], best_bytes, best_rank};
  }

  static host_numbering one_host(int ranks) {
    const auto n = static_cast<std::size_t>(ranks);
    return {std::vector<std::size_t>(n, 0), {n}};
  }

  server_assignment servers_;
  host_numbering hosts_;
  std::vector<std::size_t> bytes_per_rank_, bytes_per_host_;
  std::vector<std::set<std::pair<std::size_t, std::size_t>>> ranks_by_load_;  // per host: (bytes, rank)
  std::set<host_key> hosts_by_load_;
};

/// The plan of every PS variable among `variables` (the model's, in order) over `ranks`,
/// whose hosts are `host_of_rank` (empty: one host; else one entry per rank).
inline plan make_plan(std::span<const variable_binding> variables, int ranks,
                      server_assignment servers = server_assignment::least_loaded,
                      std::span<const int> host_of_rank = {}) {
  server_placement placement(ranks, servers, host_of_rank);
  plan p;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const strategy_descriptor d = parse_strategy(variables[i].strategy);
    if (d.placement != placement_kind::ps) continue;
    variable_plan& v = p.variables.emplace_back();
    v.model_index = i;
    v.binding = variables[i];
    v.strategy = d;
    v.row_elements = v.binding.shape.empty() || v.binding.shape[0] == 0 ? v.binding.elements()
                                                                        : v.binding.elements() / v.binding.shape[0];
    const int parts = d.partitioned() ? d.ps_shards : 1;
    for (const part_layout& part : partition_layout(v.binding.shape, v.binding.elements(), d.partition_axis, parts)) {
      shard_plan& s = v.shards.emplace_back();
      s.blocks = part.blocks;
      s.elements = part.elements();
      if (v.row_elements > 0) {
        s.first_row = part.blocks.front().offset / v.row_elements;
        s.rows = s.elements / v.row_elements;
      }
      s.host = static_cast<int>(placement.place(s.elements * sizeof(float)));
    }
  }
  p.bytes_per_rank = placement.bytes_per_rank();
  return p;
}

}  // namespace strata::sync::ps
