#pragma once
// Fusion buckets of device variables whose element types differ: a bucket travels as one
// collective of one type, so each element type gets its own buckets (plan_buckets, in
// reverse declaration order, with that type's size), and the buckets of all types are then
// ordered by when backward completes them.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "strata/model/device_variable.hpp"
#include "strata/sync/bucket_plan.hpp"

namespace strata::sync {

/// A bucket of one element type; `layout.members` index the whole variable list.
struct typed_bucket {
  element_type type;
  bucket_layout layout;
};

/// Buckets for variables of the given types and element counts, in launch order: every
/// rank launches them in this order. Backward produces gradients in reverse declaration
/// order, so a bucket is complete once its first-declared member is; buckets are ordered
/// by that member, latest declared first.
inline std::vector<typed_bucket> plan_device_buckets(std::span<const element_type> types,
                                                     std::span<const std::size_t> elements,
                                                     const bucket_options& options) {
  std::vector<typed_bucket> buckets;
  for (element_type type : {element_type::fp32, element_type::fp16, element_type::bf16}) {
    std::vector<std::size_t> members, sizes;
    for (std::size_t i = 0; i < types.size(); ++i)
      if (types[i] == type) {
        members.push_back(i);
        sizes.push_back(elements[i]);
      }
    for (bucket_layout& b : plan_buckets(sizes, element_bytes(type), options)) {
      for (std::size_t& m : b.members) m = members[m];
      buckets.push_back({type, std::move(b)});
    }
  }
  auto completed_by = [](const typed_bucket& b) { return b.layout.members.back(); };  // its first-declared member
  std::stable_sort(buckets.begin(), buckets.end(),
                   [&](const typed_bucket& a, const typed_bucket& b) { return completed_by(a) > completed_by(b); });
  return buckets;
}

}  // namespace strata::sync
