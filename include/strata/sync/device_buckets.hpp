#pragma once
// Fusion buckets of device variables whose element types, wire types and placements
// differ: a bucket travels as one collective of one type, and is either all-reduced
// (Replicate) or reduce-scattered and all-gathered (PS<N>), so each (type, wire type,
// placement) gets its own buckets (plan_buckets, in reverse declaration order, with the
// wire type's size), and the buckets of all kinds are then ordered by when backward
// completes them.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "strata/model/device_variable.hpp"
#include "strata/sync/bucket_plan.hpp"

namespace strata::sync {

/// A bucket of one element type, wire type and placement; `layout.members` index the whole
/// variable list.
struct typed_bucket {
  element_type type;
  bucket_layout layout;
  bool sharded = false;                   // its members are PS<N> variables
  element_type wire = element_type::fp32;  // narrower than `type` when compressed
};

/// Buckets for `variables`, in launch order: every rank launches them in this order.
/// Backward produces gradients in reverse declaration order, so a bucket is complete once
/// its first-declared member is; buckets are ordered by that member, latest declared first.
inline std::vector<typed_bucket> plan_device_buckets(std::span<const device_variable_binding> variables,
                                                     const bucket_options& options) {
  constexpr element_type types[] = {element_type::fp32, element_type::fp16, element_type::bf16};
  std::vector<typed_bucket> buckets;
  for (bool sharded : {false, true})
    for (element_type type : types)
      for (element_type wire : types) {
        std::vector<std::size_t> members, sizes;
        for (std::size_t i = 0; i < variables.size(); ++i)
          if (variables[i].type == type && variables[i].wire == wire && variables[i].sharded == sharded) {
            members.push_back(i);
            sizes.push_back(variables[i].elements);
          }
        for (bucket_layout& b : plan_buckets(sizes, element_bytes(wire), options)) {
          for (std::size_t& m : b.members) m = members[m];
          buckets.push_back({type, std::move(b), sharded, wire});
        }
      }
  auto completed_by = [](const typed_bucket& b) { return b.layout.members.back(); };  // its first-declared member
  std::stable_sort(buckets.begin(), buckets.end(),
                   [&](const typed_bucket& a, const typed_bucket& b) { return completed_by(a) > completed_by(b); });
  return buckets;
}

/// How a sharded bucket is split among the ranks: ncclReduceScatter and ncclAllGather
/// move equal slices, so the bucket is padded to `ranks` slices of `slice` elements (a
/// multiple of slice_alignment, so every slice starts aligned for the vectorized kernels);
/// rank r owns elements [r * slice, (r + 1) * slice) and their optimizer state.
struct bucket_slices {
  std::size_t slice = 0;
  std::size_t padded = 0;  // ranks * slice: the wire buffer's length

  std::size_t offset(int rank) const { return static_cast<std::size_t>(rank) * slice; }
};

inline constexpr std::size_t slice_alignment = 64;  // elements: 128 bytes of a 16-bit type

inline bucket_slices slice_bucket(std::size_t elements, int ranks) {
  const auto r = static_cast<std::size_t>(ranks);
  const std::size_t even = (elements + r - 1) / r;
  const std::size_t slice = (even + slice_alignment - 1) / slice_alignment * slice_alignment;
  return {slice, slice * r};
}

/// A member's elements inside a bucket's updated range (the whole bucket, or one rank's
/// slice of it), where the master parameters and optimizer state are laid out: how a
/// checkpoint names them variable by variable.
struct member_part {
  std::size_t member;  // index into the bucket's members
  std::size_t begin;   // first element, within the member
  std::size_t count;
  std::size_t at;  // first element, within the range
};

/// The parts of members (at `offsets`, of `sizes` elements, in the bucket) that lie in the
/// range [range_begin, range_begin + range_count), in member order; members outside it,
/// and the range's padding past the last member, have none.
inline std::vector<member_part> parts_in_range(std::span<const std::size_t> offsets, std::span<const std::size_t> sizes,
                                               std::size_t range_begin, std::size_t range_count) {
  std::vector<member_part> parts;
  const std::size_t range_end = range_begin + range_count;
  for (std::size_t k = 0; k < offsets.size(); ++k) {
    const std::size_t lo = std::max(offsets[k], range_begin), hi = std::min(offsets[k] + sizes[k], range_end);
    if (lo < hi) parts.push_back({k, lo - offsets[k], hi - lo, lo - range_begin});
  }
  return parts;
}

}  // namespace strata::sync
