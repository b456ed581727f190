#pragma once
#include <cstdint>

namespace strata {

/// What one step (or a whole run) cost in communication.
struct sync_stats {
  std::uint64_t bytes_sent = 0;  ///< bytes this rank put on the wire
  double comm_seconds = 0.0;     ///< time collectives ran (on the communication thread)
  double wait_seconds = 0.0;     ///< time the training thread blocked waiting for them

  sync_stats& operator+=(const sync_stats& o) {
    bytes_sent += o.bytes_sent;
    comm_seconds += o.comm_seconds;
    wait_seconds += o.wait_seconds;
    return *this;
  }
};

/// Where a step stands in gradient accumulation over K micro-batches.
struct micro_step {
  bool first = true;  ///< the first micro-batch: gradients replace what was accumulated
  bool last = true;   ///< the last micro-batch: communicate and update
  int micro_batches = 1;  ///< micro-batches accumulated into this update
  std::int64_t update = 1;  ///< the update this micro-batch contributes to, from 1
};

}  // namespace strata
