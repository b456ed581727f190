#pragma once
// Data-parallel synchronization of replicated dense variables: fusion buckets averaged by an
// all-reduce that starts as soon as a bucket's gradients are all ready, then the optimizer
// on every rank.
//
// A bucket is a list of its members' own gradient buffers: the ring reduces them in place,
// so no gradient is copied into a staging buffer and back (a gradient must therefore stay
// untouched from grad_ready until step() returns). Only gradient accumulation keeps a
// buffer of its own, where the first K-1 micro-batches are summed.
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
#include "strata/sync/span_list.hpp"
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
  /// Broadcasts rank 0's parameters so every replica starts equal. The bindings are copied:
  /// the synchronizer does not depend on the model object afterwards.
  dense_allreduce_synchronizer(C& comm, std::vector<variable_binding> variables, const dense_allreduce_options& options,
                               const O& optimizer, comm_thread& thread)
      : comm_(&comm), thread_(&thread), variables_(std::move(variables)), reduce_(options.allreduce) {
    std::vector<std::size_t> elements;
    for (variable_binding& v : variables_) {
      elements.push_back(v.elements());
      states_.push_back(optimizer.make_state(v.elements()));
      comm.broadcast(v.param, 0);
    }
    home_.resize(variables_.size());
    for (bucket_layout& layout : plan_buckets(elements, sizeof(float), options.buckets)) {
      bucket& b = buckets_.emplace_back();
      std::vector<std::span<float>> grads;
      for (std::size_t i = 0; i < layout.members.size(); ++i) {
        grads.push_back(variables_[layout.members[i]].grad);
        home_[layout.members[i]] = {buckets_.size() - 1, layout.offsets[i]};
      }
      b.grads = span_list<float>(std::move(grads));
      b.members = layout.members.size();
    }
    staged_.assign(variables_.size(), false);
  }

  /// Variable `k`'s gradient is final for this micro-batch: stage it, and start every bucket
  /// that is complete and next in order (launch order must be the same on every rank).
  void gradient_ready(std::size_t k, micro_step m) {
    stage(k, m);
    if (m.last) launch_complete_buckets(m);
  }

  /// Stages whatever was not marked ready and starts the remaining buckets.
  void flush(micro_step m) {
    for (std::size_t k = 0; k < variables_.size(); ++k)
      if (!staged_[k]) stage(k, m);
    if (m.last) launch_complete_buckets(m);
  }

  /// Waits for the buckets (the gradients are now averaged) and applies the optimizer.
  sync_stats finish(micro_step m, const O& optimizer, std::int64_t update) {
    sync_stats stats;
    if (m.last) {
      for (bucket& b : buckets_) {
        const auto start = std::chrono::steady_clock::now();
        b.done.get();
        stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        stats.comm_seconds += b.seconds;
        stats.bytes_sent += b.bytes_sent;
      }
      for (std::size_t k = 0; k < variables_.size(); ++k)
        optimizer.update(variables_[k].param, variables_[k].grad, states_[k], update);
      next_launch_ = 0;
    }
    for (bucket& b : buckets_) b.staged = 0;
    staged_.assign(variables_.size(), false);
    return stats;
  }

  std::span<const variable_binding> variables() const { return variables_; }
  std::size_t bucket_count() const { return buckets_.size(); }

 private:
  struct bucket {
    span_list<float> grads;            // the members' gradient buffers, reduced in place
    std::vector<float> accumulated;    // sum of earlier micro-batches (accumulation only)
    std::size_t members = 0, staged = 0;
    std::future<void> done;
    std::uint64_t bytes_sent = 0;
    double seconds = 0.0;
  };
  struct position {
    std::size_t bucket = 0, offset = 0;  // element offset within the bucket
  };

  /// Accumulation: micro-batches before the last add into the bucket's own buffer; the last
  /// adds that sum into the gradient, which is then reduced in place.
  void stage(std::size_t k, micro_step m) {
    const position at = home_[k];
    bucket& b = buckets_[at.bucket];
    if (m.micro_batches > 1) {
      b.accumulated.resize(b.grads.size());
      std::span<float> grad = variables_[k].grad;
      float* sum = b.accumulated.data() + at.offset;
      for (std::size_t i = 0; i < grad.size(); ++i) {
        if (m.last) grad[i] += sum[i];
        else sum[i] = m.first ? grad[i] : sum[i] + grad[i];
      }
    }
    staged_[k] = true;
    ++b.staged;
  }

  void launch_complete_buckets(micro_step m) {
    const float scale = 1.0f / static_cast<float>(comm_->size() * m.micro_batches);
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].staged == buckets_[next_launch_].members) {
      bucket& b = buckets_[next_launch_++];
      b.done = thread_->submit([this, &b, scale] {
        const auto start = std::chrono::steady_clock::now();
        b.bytes_sent = reduce_(*comm_, b.grads, scale);
        b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    }
  }

  C* comm_;
  comm_thread* thread_;
  std::vector<variable_binding> variables_;
  std::vector<typename O::state> states_;
  std::vector<bucket> buckets_;
  std::vector<position> home_;  // where each variable lives in the buckets
  std::vector<bool> staged_;    // per variable, this micro-batch
  std::size_t next_launch_ = 0;
  allreduce<Algorithm, C, float> reduce_;
};

}  // namespace strata::sync
