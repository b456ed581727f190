#pragma once
// What the host executor asks of every synchronizer, whatever its strategy: one concept, so a
// new synchronizer (a later strategy, another backend's) is checked against it where it is
// registered in exec/synchronizer_table.hpp instead of deep inside the executor.
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "strata/ckpt/state.hpp"
#include "strata/sync/stats.hpp"

namespace strata::sync {

/// A synchronizer for optimizer `O`. Per micro-batch: gradient_ready(k) as variable k's
/// gradient is final (optional), flush() at step() for the rest, wait() until the
/// reductions are done (stats; the first non-finite variable; `stalled` at the deadline);
/// per update: update() applies the optimizer. Checkpoints and memory accounting:
/// collect_state() and add_memory(). Its constructor takes the executor's
/// synchronizer_resources and the indices of its variables.
template <class S, class O>
concept Synchronizer = requires(S& s, const O& optimizer, std::size_t k, micro_step m, std::optional<std::string>& nonfinite,
                                std::chrono::steady_clock::time_point deadline, std::int64_t update, ckpt::state_set& set,
                                memory_use& use) {
  s.gradient_ready(k, m);
  s.flush(m);
  { s.wait(m, nonfinite, deadline) } -> std::same_as<sync_stats>;
  s.update(optimizer, update);
  s.collect_state(set);
  s.add_memory(use);
};

}  // namespace strata::sync
