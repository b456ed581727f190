#pragma once
// Data-parallel synchronization of replicated dense variables: fusion buckets reduced by an
// all-reduce that starts as soon as a bucket's gradients are all ready, then averaging and
// the optimizer on every rank.
#include <chrono>
#include <cstdint>
#include <future>
#include <span>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/model/variable.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/sync/allreduce/algorithm.hpp"
#include "strata/sync/bucket_plan.hpp"
#include "strata/sync/comm_thread.hpp"
#include "strata/sync/stats.hpp"

namespace strata::sync {

/// The strategies this synchronizer implements.
template <class S>
concept DenseAllReduceStrategy =
    CanonicalStrategy<S> && S::descriptor.placement == placement_kind::replicate && !S::descriptor.partitioned() &&
    !S::descriptor.sparse_rows && S::descriptor.codec == codec_kind::none &&
    (S::descriptor.collective == collective_kind::native || S::descriptor.collective == collective_kind::ring);

struct dense_allreduce_options {
  bucket_options buckets;
  allreduce_options allreduce;
};

template <class Algorithm, Communicator C, Optimizer O>
class dense_allreduce_synchronizer {
 public:
  /// Broadcasts rank 0's parameters so every replica starts equal.
  dense_allreduce_synchronizer(C& comm, std::vector<variable_binding*> variables, const dense_allreduce_options& options,
                               const O& optimizer, comm_thread& thread)
      : comm_(&comm), thread_(&thread), variables_(std::move(variables)), reduce_(options.allreduce) {
    std::vector<std::size_t> elements;
    for (variable_binding* v : variables_) {
      elements.push_back(v->elements());
      states_.push_back(optimizer.make_state(v->elements()));
      comm.broadcast(v->param, 0);
    }
    for (bucket_layout& layout : plan_buckets(elements, sizeof(float), options.buckets)) {
      bucket& b = buckets_.emplace_back();
      b.layout = std::move(layout);
      b.data.resize(b.layout.elements);
    }
    home_.resize(variables_.size());
    packed_.assign(variables_.size(), false);
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (std::size_t i = 0; i < buckets_[b].layout.members.size(); ++i) home_[buckets_[b].layout.members[i]] = {b, i};
  }

  /// Variable `k`'s gradient is final for this micro-step: pack it, and start every bucket
  /// that is complete and next in order (launch order must be the same on every rank).
  void gradient_ready(std::size_t k, micro_step m) {
    pack(k, m);
    if (m.last) launch_complete_buckets();
  }

  /// Packs whatever was not marked ready and starts the remaining buckets.
  void flush(micro_step m) {
    for (std::size_t k = 0; k < variables_.size(); ++k)
      if (!packed_[k]) pack(k, m);
    if (m.last) launch_complete_buckets();
  }

  /// Waits for the buckets, writes averaged gradients back and applies the optimizer.
  sync_stats finish(micro_step m, const O& optimizer, std::int64_t update) {
    sync_stats stats;
    if (m.last) {
      const float scale = 1.0f / static_cast<float>(comm_->size() * m.micro_batches);
      for (bucket& b : buckets_) {
        const auto start = std::chrono::steady_clock::now();
        b.done.get();
        stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        stats.comm_seconds += b.seconds;
        stats.bytes_sent += b.bytes_sent;
        unpack_and_update(b, scale, optimizer, update);
      }
      next_launch_ = 0;
    }
    for (bucket& b : buckets_) b.packed = 0;
    packed_.assign(variables_.size(), false);
    return stats;
  }

  std::span<variable_binding* const> variables() const { return variables_; }
  std::size_t bucket_count() const { return buckets_.size(); }

 private:
  struct bucket {
    bucket_layout layout;
    std::vector<float> data;
    std::size_t packed = 0;  // members packed this micro-step
    std::future<void> done;
    std::uint64_t bytes_sent = 0;
    double seconds = 0.0;
  };
  struct position {
    std::size_t bucket = 0, slot = 0;
  };

  void pack(std::size_t k, micro_step m) {
    const position at = home_[k];
    bucket& b = buckets_[at.bucket];
    std::span<const float> grad = variables_[k]->grad;
    float* dst = b.data.data() + b.layout.offsets[at.slot];
    if (m.first)
      std::copy(grad.begin(), grad.end(), dst);
    else
      for (std::size_t i = 0; i < grad.size(); ++i) dst[i] += grad[i];
    packed_[k] = true;
    ++b.packed;
  }

  void launch_complete_buckets() {
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].packed == buckets_[next_launch_].layout.members.size()) {
      bucket& b = buckets_[next_launch_++];
      b.done = thread_->submit([this, &b] {
        const auto start = std::chrono::steady_clock::now();
        b.bytes_sent = reduce_(*comm_, std::span<float>(b.data));
        b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    }
  }

  void unpack_and_update(bucket& b, float scale, const O& optimizer, std::int64_t update) {
    for (std::size_t i = 0; i < b.layout.members.size(); ++i) {
      const std::size_t k = b.layout.members[i];
      variable_binding& v = *variables_[k];
      const float* sum = b.data.data() + b.layout.offsets[i];
      for (std::size_t e = 0; e < v.grad.size(); ++e) v.grad[e] = sum[e] * scale;
      optimizer.update(v.param, v.grad, states_[k], update);
    }
  }

  C* comm_;
  comm_thread* thread_;
  std::vector<variable_binding*> variables_;
  std::vector<typename O::state> states_;
  std::vector<bucket> buckets_;
  std::vector<position> home_;  // where each variable lives in the buckets
  std::vector<bool> packed_;  // per variable, this micro-step
  std::size_t next_launch_ = 0;
  allreduce<Algorithm, C, float> reduce_;
};

}  // namespace strata::sync
