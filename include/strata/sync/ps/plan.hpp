#pragma once
// Where the parameter-server variables of a model live: each PS<N> variable is split into
// its shards (Partition<Axis>, as even as the axis allows), and each shard is placed, in
// declaration order, on the host with the fewest bytes so far and there on its rank with the
// fewest (ties: the lower rank), or on rank 0 when a builder asks for the first server
// (AutoDist's PS builder). A host's bytes are what its link carries to and from the other
// hosts' workers, and its ranks share its cores: PS<2> on 2 hosts x 2 ranks puts a shard on
// each host, not both on the first. Every rank computes the same plan from the same model
// and hosts.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

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

/// The rank the next shard goes to: of the hosts holding the fewest bytes so far, the rank
/// holding the fewest (ties: the lower rank); or rank 0 for the first server.
/// `host_of_rank`: each rank's host (empty: one host).
inline std::size_t next_server(std::span<const std::size_t> bytes_per_rank, server_assignment servers,
                               std::span<const int> host_of_rank = {}) {
  if (servers == server_assignment::first_server) return 0;
  const auto host = [&](std::size_t r) { return host_of_rank.empty() ? 0 : host_of_rank[r]; };
  std::map<int, std::size_t> bytes_per_host;
  for (std::size_t r = 0; r < bytes_per_rank.size(); ++r) bytes_per_host[host(r)] += bytes_per_rank[r];
  const auto load = [&](std::size_t r) { return std::pair(bytes_per_host[host(r)], bytes_per_rank[r]); };
  std::size_t next = 0;
  for (std::size_t r = 1; r < bytes_per_rank.size(); ++r)
    if (load(r) < load(next)) next = r;
  return next;
}

/// The plan of every PS variable among `variables` (the model's, in order) over `ranks`,
/// whose hosts are `host_of_rank` (empty: one host; else one entry per rank).
inline plan make_plan(std::span<const variable_binding> variables, int ranks,
                      server_assignment servers = server_assignment::least_loaded,
                      std::span<const int> host_of_rank = {}) {
  if (!host_of_rank.empty() && host_of_rank.size() != static_cast<std::size_t>(ranks))
    throw usage_error(fmt::format("internal: make_plan for {} ranks was given the hosts of {}", ranks, host_of_rank.size()));
  plan p;
  p.bytes_per_rank.assign(static_cast<std::size_t>(ranks), 0);
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
      const std::size_t host = next_server(p.bytes_per_rank, servers, host_of_rank);
      s.host = static_cast<int>(host);
      p.bytes_per_rank[host] += s.elements * sizeof(float);
    }
  }
  return p;
}

}  // namespace strata::sync::ps
