#pragma once
// The order in which fusion buckets start their collectives. Every rank must start them in
// one order, or the collectives pair unrelated buffers; so a bucket starts once all its
// members are ready and every bucket before it has started. The host synchronizers and the
// nccl executor both launch through one. Plain C++, tested on the CPU.
#include <cstddef>
#include <utility>
#include <vector>

namespace strata::sync {

class launch_order {
 public:
  launch_order() = default;  // no buckets (yet)
  /// `members[b]`: how many members bucket b has, in launch order.
  explicit launch_order(std::vector<std::size_t> members) : members_(std::move(members)), ready_(members_.size(), 0) {}

  /// One more member of bucket `b` is ready.
  void member_ready(std::size_t b) { ++ready_.at(b); }

  /// Every member of every bucket is ready (a step that marked nothing).
  void all_ready() { ready_ = members_; }

  /// Calls `start(b)` for each bucket, in order, that is complete and next to start.
  template <class Start>
  void start_ready(Start&& start) {
    for (; started_ < members_.size() && ready_[started_] == members_[started_]; ++started_) start(started_);
  }

  /// A new micro-batch: nothing ready, nothing started.
  void reset() {
    ready_.assign(ready_.size(), 0);
    started_ = 0;
  }

  std::size_t buckets() const { return members_.size(); }
  std::size_t started() const { return started_; }

 private:
  std::vector<std::size_t> members_;
  std::vector<std::size_t> ready_;
  std::size_t started_ = 0;  // a prefix of the buckets
};

}  // namespace strata::sync
