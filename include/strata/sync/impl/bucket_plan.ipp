#pragma once
// Planning fusion buckets: compiled in every translation unit when strata is header-only, once under
// STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <utility>

#include "strata/sync/bucket_plan.hpp"

namespace strata::sync {

STRATA_DECL std::vector<bucket_layout> plan_buckets(std::span<const std::size_t> elements, std::size_t element_bytes,
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
