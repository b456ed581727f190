#pragma once
// Many tensors in one allocation, for a model's gradients (or parameters): one buffer on huge
// pages, each tensor a span of it, packed with no gaps. Laid out backward, the last tensor
// first, a model's gradients lie in the order they become ready and fill the fusion buckets
// (plan_buckets takes the last declared variable first), so that each bucket is one range
// of memory. Two things follow. Within a machine the kernel's copy between ranks pins the
// sender's pages one at a time, and tensors under a huge page sit on 4 KiB pages (23.5 of
// ResNet-50's 97.5 MiB), where an arena of 2 MiB or more lies on huge pages only. And a
// bucket is one part, so Native reduces it in place instead of through a staging copy, and
// the ring sends a chunk as one message instead of one per tensor it covers. PyTorch's DDP
// does the like with gradient_as_bucket_view, Megatron with its contiguous gradient buffer.
// dense_sync measures it (docs/benchmarks.md, "Gradients in one allocation").
#include <cstddef>
#include <numeric>
#include <span>
#include <vector>

#include "strata/model/huge_pages.hpp"

namespace strata {

/// How tensors are packed: backward, the last tensor at the start and tensor 0 at the end
/// (gradients, as buckets fill); forward, in order.
enum class arena_layout { backward, forward };

/// Where each tensor of `elements[i]` elements begins when they are packed with no gaps in
/// `order`: tensor_arena's layout, for memory that comes from elsewhere (a stage's pinned
/// buffer).
inline std::vector<std::size_t> packed_offsets(std::span<const std::size_t> elements, arena_layout order) {
  std::size_t at = 0;
  if (order == arena_layout::backward)
    for (const std::size_t n : elements) at += n;
  std::vector<std::size_t> offsets;
  offsets.reserve(elements.size());
  for (const std::size_t n : elements) {
    if (order == arena_layout::backward) at -= n;
    offsets.push_back(at);
    if (order == arena_layout::forward) at += n;
  }
  return offsets;
}

template <class T>
class tensor_arena {
 public:
  using layout = arena_layout;

  /// Tensors of `elements[i]` elements each, every element `value`.
  explicit tensor_arena(std::span<const std::size_t> elements, layout order = layout::backward, T value = T{})
      : memory_(std::accumulate(elements.begin(), elements.end(), std::size_t{0}), value),
        offsets_(packed_offsets(elements, order)),
        sizes_(elements.begin(), elements.end()) {}
  tensor_arena(const tensor_arena&) = delete;  // the spans handed out would point into the original
  tensor_arena& operator=(const tensor_arena&) = delete;
  tensor_arena(tensor_arena&&) noexcept = default;  // the memory stays where it is
  tensor_arena& operator=(tensor_arena&&) noexcept = default;

  /// Tensors held.
  std::size_t size() const { return offsets_.size(); }
  std::span<T> operator[](std::size_t i) { return std::span<T>(memory_).subspan(offsets_.at(i), sizes_.at(i)); }
  std::span<const T> operator[](std::size_t i) const {
    return std::span<const T>(memory_).subspan(offsets_.at(i), sizes_.at(i));
  }
  /// Every tensor's elements, as laid out.
  std::span<T> memory() { return memory_; }

 private:
  host_vector<T> memory_;
  std::vector<std::size_t> offsets_, sizes_;
};

}  // namespace strata
