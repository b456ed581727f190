#pragma once
// Definitions of exec/executor_core.hpp's non-template functions (see config.hpp).
#include "strata/exec/executor_core.hpp"

namespace strata::detail {

STRATA_DECL executor_options check_options(executor_options o) {
  auto require = [](bool holds, std::string_view option, auto value, std::string_view range) {
    if (!holds) throw usage_error(fmt::format("executor_options::{} is {}; it must be {}", option, value, range));
  };
  require(o.accumulation_steps >= 1, "accumulation_steps", o.accumulation_steps, "at least 1");
  require(o.allreduce.ring_chunk_bytes >= 4, "allreduce.ring_chunk_bytes", o.allreduce.ring_chunk_bytes, "at least 4");
  require(o.allreduce.ring_window >= 1, "allreduce.ring_window", o.allreduce.ring_window, "at least 1");
  require(o.allreduce.shared_memory_chunk_bytes >= 4, "allreduce.shared_memory_chunk_bytes",
          o.allreduce.shared_memory_chunk_bytes, "at least 4");
  require(o.allreduce.cross_node_chunk_bytes >= 4, "allreduce.cross_node_chunk_bytes", o.allreduce.cross_node_chunk_bytes,
          "at least 4");
  require(o.allreduce.cross_node_window >= 1, "allreduce.cross_node_window", o.allreduce.cross_node_window, "at least 1");
  require(o.allreduce.ranks_per_node >= 0, "allreduce.ranks_per_node", o.allreduce.ranks_per_node, "0 (the machines) or more");
  require(o.compression.powersgd_warmup_steps >= 0, "compression.powersgd_warmup_steps", o.compression.powersgd_warmup_steps,
          "0 or more");
  checked_timeout(o.timeout.count(), "executor_options::timeout");
  if (o.detail_checks) o.compression.scan_uncompressed = true;
  return o;
}

STRATA_DECL void require_buffers_in_place(std::span<const variable_binding> variables) {
  for (const variable_binding& v : variables)
    if (const std::string_view moved = v.moved_buffer(); !moved.empty())
      throw binding_error(fmt::format("variable \"{}\": the std::vector its {} buffer was bound from has reallocated or "
                                      "changed size since (detail checks); the executor would read freed memory. Bind "
                                      "it after its last resize, and keep its size",
                                      v.name, moved));
}

}  // namespace strata::detail
