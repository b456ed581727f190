#pragma once
// Packing several buffers into one contiguous bucket and back: one transfer, or one cast,
// for many small gradients. The parts (where each buffer lies in the bucket) are computed
// here once and used by the host functions and by cuda::bucket_packer alike.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "strata/kernels/sizes.hpp"

namespace strata::kernels {

/// One buffer of a bucket: `size` elements at `data`, at `offset` in the bucket.
template <class T>
struct bucket_part {
  T* data;
  std::size_t size, offset;
};

/// The buffers laid end to end, in the order given.
template <class T>
std::vector<bucket_part<T>> bucket_parts(std::span<const std::span<T>> buffers) {
  std::vector<bucket_part<T>> parts;
  parts.reserve(buffers.size());
  std::size_t offset = 0;
  for (std::span<T> b : buffers) {
    parts.push_back({b.data(), b.size(), offset});
    offset += b.size();
  }
  return parts;
}

/// Elements of a bucket with this layout.
template <class T>
std::size_t bucket_size(std::span<const bucket_part<T>> parts) {
  return parts.empty() ? 0 : parts.back().offset + parts.back().size;
}

/// Copies every buffer to its place in `bucket`.
template <class T>
void pack(std::span<const bucket_part<T>> parts, std::span<T> bucket) {
  detail::require_size("kernels::pack", "bucket", bucket.size(), bucket_size(parts));
  for (const bucket_part<T>& p : parts) std::copy_n(p.data, p.size, bucket.data() + p.offset);
}

/// Copies every buffer's place in `bucket` back into the buffer.
template <class T>
void unpack(std::span<const bucket_part<T>> parts, std::span<const T> bucket) {
  detail::require_size("kernels::unpack", "bucket", bucket.size(), bucket_size(parts));
  for (const bucket_part<T>& p : parts) std::copy_n(bucket.data() + p.offset, p.size, p.data);
}

}  // namespace strata::kernels
