#pragma once
#include <cstddef>
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

/// What a rank holds for a model, in bytes: the parameters it binds, and beyond the user's
/// own buffers what strata keeps. Sharding the optimizer state over parameter servers
/// (ZeRO's idea) shows in optimizer_state; splitting a model over a mesh in all of them.
struct memory_use {
  std::size_t parameters = 0;       ///< the user's parameter buffers the executor binds
  std::size_t optimizer_state = 0;  ///< of replicated variables, and of the shards this rank's server hosts
  std::size_t server_values = 0;    ///< parameter values of the shards this rank's server hosts
  /// On a mesh: the part of parameters and optimizer_state that every rank of this rank's
  /// tensor group holds alike (variables not split by TensorParallel), so that a sum over
  /// ranks can count it once.
  std::size_t tensor_group_copies = 0;

  memory_use& operator+=(const memory_use& o) {
    parameters += o.parameters;
    optimizer_state += o.optimizer_state;
    server_values += o.server_values;
    tensor_group_copies += o.tensor_group_copies;
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
