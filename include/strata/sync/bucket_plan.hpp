#pragma once
// Fusion buckets: gradients are packed into a few large buffers so that each collective is
// big enough to run at full bandwidth, yet the first can start before backward finishes.
// Variables are assigned in reverse declaration order, because backward produces the last
// layer's gradients first; the first bucket is small so communication starts early.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

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
inline std::vector<bucket_layout> plan_buckets(std::span<const std::size_t> elements, std::size_t element_bytes,
                                               const bucket_options& options) {
  std::vector<bucket_layout> buckets;
  bucket_layout open;
  auto capacity = [&] { return buckets.empty() ? options.first_bucket_bytes : options.bucket_bytes; };
  for (std::size_t k = elements.size(); k-- > 0;) {
    open.members.push_back(k);
    open.offsets.push_back(open.elements);
    open.elements += elements[k];
    if (open.elements * element_bytes >= capacity()) buckets.push_back(std::exchange(open, {}));
  }
  if (!open.members.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace strata::sync
