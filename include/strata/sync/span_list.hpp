#pragma once
// Several spans addressed as one buffer. A fusion bucket is the list of its members'
// gradient buffers, so collectives read and write the user's memory directly instead of
// copying every gradient into one contiguous buffer and back. Spans that follow each other
// in memory (gradients allocated together, tensor_arena) are joined into one part: the ring
// sends a message per part a chunk covers, so a bucket of adjacent gradients travels in
// whole chunks.
#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

namespace strata::sync {

template <class T>
class span_list {
 public:
  span_list() = default;
  /// The parts in order; empty ones are left out, and one that begins where the one before
  /// ends extends it.
  explicit span_list(std::span<const std::span<T>> given) {
    for (const std::span<T> p : given) {
      if (p.empty()) continue;
      if (!parts_.empty() && parts_.back().data() + parts_.back().size() == p.data()) {
        parts_.back() = std::span<T>(parts_.back().data(), parts_.back().size() + p.size());
      } else {
        starts_.push_back(size_);
        parts_.push_back(p);
      }
      size_ += p.size();
    }
  }
  span_list(std::initializer_list<std::span<T>> given) : span_list(std::span<const std::span<T>>(given.begin(), given.size())) {}

  std::size_t size() const { return size_; }
  std::span<const std::span<T>> parts() const { return parts_; }

  /// Calls `f(offset, piece)` for each piece of a part that covers [begin, begin + n), in
  /// order; `offset` is the piece's position relative to `begin`.
  template <class F>
  void for_each(std::size_t begin, std::size_t n, F&& f) const {
    if (n == 0) return;
    std::size_t k = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
    for (std::size_t done = 0; done < n; ++k) {
      const std::size_t from = begin + done - starts_[k];
      const std::size_t take = std::min(parts_[k].size() - from, n - done);
      f(done, parts_[k].subspan(from, take));
      done += take;
    }
  }

  /// The elements [begin, begin + n) as a list of their own, over the same memory.
  span_list slice(std::size_t begin, std::size_t n) const {
    std::vector<std::span<T>> pieces;
    for_each(begin, n, [&](std::size_t, std::span<T> s) { pieces.push_back(s); });
    return span_list(pieces);
  }

 private:
  std::vector<std::span<T>> parts_;
  std::vector<std::size_t> starts_;
  std::size_t size_ = 0;
};

}  // namespace strata::sync
