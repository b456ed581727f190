#pragma once
// What a bucket reducer sees of a fusion bucket: the gradients as one buffer list and, for
// codecs that need structure (low-rank factorization) or names (error messages), the items
// it is made of.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "strata/sync/span_list.hpp"

namespace strata::sync {

/// One variable, or one part of a partitioned variable, inside a bucket, seen as a
/// row-major matrix (a vector is rows x 1).
struct bucket_item {
  std::string_view name;
  std::size_t offset = 0;  ///< element offset in the bucket
  std::size_t rows = 0, cols = 0;
  std::size_t elements() const { return rows * cols; }
};

struct bucket_view {
  const span_list<float>& grads;
  std::span<const bucket_item> items;
  std::int64_t update = 1;  ///< the update being computed, from 1

  /// The item holding bucket element `offset`.
  const bucket_item& item_at(std::size_t offset) const {
    for (const bucket_item& item : items)
      if (offset < item.offset + item.elements()) return item;
    return items.back();
  }
};

/// What happens when a gradient is NaN or infinite after decompression.
enum class nonfinite_policy {
  raise,      ///< throw numeric_error naming the variable
  skip_step,  ///< leave parameters untouched this step, on every rank
};

struct compression_options {
  int powersgd_warmup_steps = 100;  ///< plain all-reduce for the first updates (as PyTorch's hook)
  std::uint64_t seed = 0x5eed;      ///< PowerSGD's initial Q (the same on every rank)
  nonfinite_policy on_nonfinite = nonfinite_policy::raise;
  /// Also scan uncompressed buckets for NaN/Inf (one extra pass over the averaged gradient;
  /// compressed buckets are always checked, where it costs nothing).
  bool scan_uncompressed = false;
};

/// The result of reducing one bucket.
struct bucket_result {
  std::uint64_t bytes_sent = 0;
  std::optional<std::string> nonfinite;  ///< a variable whose averaged gradient is not finite
};

}  // namespace strata::sync
