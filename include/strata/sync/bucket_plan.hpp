#pragma once
// Fusion buckets: gradients are packed into a few large buffers so that each collective is
// big enough to run at full bandwidth, yet the first can start before backward finishes.
// Variables are assigned in reverse declaration order, because backward produces the last
// layer's gradients first; the first bucket is small so communication starts early.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "strata/config.hpp"

namespace strata::sync {

struct bucket_options {
  std::size_t first_bucket_bytes = std::size_t{1} << 20;
  std::size_t bucket_bytes = std::size_t{25} << 20;
};

struct bucket_layout {
  std::vector<std::size_t> members;  ///< indices into the variable list, in bucket order
  std::vector<std::size_t> offsets;  ///< element offset of each member in the bucket
  std::size_t elements = 0;
};

/// Assigns variables of the given element counts to buckets. A bucket closes as soon as it
/// holds at least its capacity, so buckets never split a variable and a variable larger
/// than the capacity closes the bucket it lands in.
STRATA_DECL std::vector<bucket_layout> plan_buckets(std::span<const std::size_t> elements, std::size_t element_bytes,
                                                    const bucket_options& options);

}  // namespace strata::sync

#if defined(STRATA_HEADER_ONLY)
#include "strata/sync/impl/bucket_plan.ipp"
#endif
