#pragma once
// How Partition<Axis, Shards> splits a tensor: along one axis, into parts as even as
// possible (the first extent % parts parts are one larger). Part k of axis a is, for every
// index of the axes before a, one contiguous block of the row-major tensor. Partitioned
// all-reduce reduces each part on its own; the parameter server keeps each on a shard.
#include <cstddef>
#include <functional>
#include <numeric>
#include <vector>

#include "strata/config.hpp"

#include "strata/sync/allreduce/ring.hpp"

namespace strata::sync {

struct element_range {
  std::size_t offset, size;
};

/// One part: its blocks of the flattened tensor, and the part seen as a row-major matrix
/// whose rows are the tensor's first axis (as PowerSGD sees a 2-D gradient).
struct part_layout {
  std::vector<element_range> blocks;
  std::size_t rows = 0, cols = 0;
  std::size_t elements() const { return rows * cols; }
};

/// The parts of a tensor of `shape` (`elements` in all) split into `parts` along `axis`;
/// one part when axis < 0, parts <= 1 or the tensor is a scalar; never more parts than the
/// axis has entries.
STRATA_DECL std::vector<part_layout> partition_layout(const std::vector<std::size_t>& shape, std::size_t elements, int axis,
                                                      int parts);

}  // namespace strata::sync

#if defined(STRATA_HEADER_ONLY)
#include "strata/sync/impl/partition.ipp"
#endif
