#pragma once
// Data-parallel synchronization of replicated dense variables: fusion buckets averaged over
// all ranks as soon as their gradients are all ready, then the optimizer on every rank.
//
// A bucket is a list of its members' own gradient buffers: uncompressed rings reduce them
// in place, so no gradient is copied into a separate buffer and back (a gradient must
// therefore stay untouched from grad_ready until step() returns). Compression is a bucket
// reducer chosen by the strategy's codec (compress/reducers.hpp). Partitioned variables
// (Partition<Axis, Shards>) enter the buckets as separate parts, each reduced on its own.
// Gradient accumulation keeps one buffer per bucket where the first K-1 micro-batches add up.
#include <chrono>
#include <cstdint>
#include <future>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "strata/ckpt/state.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/model/variable.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/sync/allreduce/algorithm.hpp"
#include "strata/sync/allreduce/ring.hpp"
#include "strata/sync/bucket_plan.hpp"
#include "strata/sync/comm_thread.hpp"
#include "strata/sync/compress/bucket.hpp"
#include "strata/sync/compress/reducers.hpp"
#include "strata/sync/launch_order.hpp"
#include "strata/sync/partition.hpp"
#include "strata/sync/resources.hpp"
#include "strata/sync/span_list.hpp"
#include "strata/sync/stats.hpp"
#include "strata/trace/timeline.hpp"

namespace strata::sync {

/// The strategies this synchronizer implements: replicated, dense gradients, any all-reduce
/// algorithm and codec, partitioned or not.
template <class S>
concept DenseAllReduceStrategy =
    CanonicalStrategy<S> && S::descriptor.placement == placement_kind::replicate && !S::descriptor.sparse_rows;

/// A collective did not finish before the executor's deadline (the message says which).
/// `waited_for`: the ranks it was waiting on, where the wait knows them (a parameter server's
/// reply); empty for collectives, where any rank may be the one missing.
struct stalled : std::runtime_error {
  explicit stalled(const std::string& what, std::vector<int> ranks = {})
      : std::runtime_error(what), waited_for(std::move(ranks)) {}
  std::vector<int> waited_for;
};

/// One variable, or one part of a partitioned variable: the unit buckets are made of.
struct gradient_piece {
  std::size_t variable;
  std::string name;
  std::vector<std::span<float>> blocks;  // the piece's memory inside the variable's gradient
  std::size_t rows, cols;                // seen as a row-major matrix
  std::size_t elements() const { return rows * cols; }
};

/// Splits a gradient into `parts` pieces along `axis` (as evenly as possible).
inline std::vector<gradient_piece> partition_gradient(std::size_t variable, const variable_binding& v, int axis, int parts) {
  std::vector<gradient_piece> pieces;
  const std::vector<part_layout> layout = partition_layout(v.shape, v.elements(), axis, parts);
  for (std::size_t k = 0; k < layout.size(); ++k) {
    gradient_piece piece{variable,
                         layout.size() == 1 ? v.name
                                            : fmt::format("{}[part {} of {} along axis {}]", v.name, k, layout.size(), axis),
                         {}, layout[k].rows, layout[k].cols};
    for (const element_range& r : layout[k].blocks) piece.blocks.push_back(v.grad.subspan(r.offset, r.size));
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

/// Adds replicated variables' parameters and optimizer state (equal on every rank) to a
/// checkpoint's state.
template <Optimizer O>
void add_replicated_state(ckpt::state_set& set, std::span<const variable_binding> variables,
                          std::vector<typename O::state>& states) {
  for (std::size_t k = 0; k < variables.size(); ++k) {
    const variable_binding& v = variables[k];
    set.add({v.name, v.shape, ckpt::sharing::replicated, v.param});
    for (const optim::named_state& s : O::tensors(states[k]))
      set.add({fmt::format("{}/{}", v.name, s.name), v.shape, ckpt::sharing::replicated, s.values});
  }
}

/// Adds the optimizer state replicated variables keep on every rank to `use`.
template <Optimizer O>
void add_replicated_memory(memory_use& use, std::vector<typename O::state>& states) {
  for (typename O::state& s : states) use.optimizer_state += state_bytes<O>(s);
}

template <CanonicalStrategy S, Communicator C, Optimizer O>
class dense_allreduce_synchronizer {
  using algorithm = typename S::collective::algorithm;
  using reducer = bucket_reducer<typename S::compression, algorithm, C>;

 public:
  /// Broadcasts rank 0's parameters so every replica starts equal. The bindings are copied:
  /// the synchronizer does not depend on the model object afterwards.
  dense_allreduce_synchronizer(const synchronizer_resources<C, O>& resources, const std::vector<std::size_t>& ids)
      : comm_(&resources.collectives), thread_(&resources.thread) {
    for (std::size_t id : ids) variables_.push_back(resources.model_variables[id]);
    const dense_allreduce_options& options = resources.dense;
    const O& optimizer = resources.optimizer;
    C& comm = *comm_;
    constexpr strategy_descriptor d = S::descriptor;
    const int parts = d.partition_shards > 0 ? d.partition_shards : comm.size();
    for (std::size_t k = 0; k < variables_.size(); ++k) {
      states_.push_back(make_state_for(optimizer, variables_[k].elements(), optim::gradient_form::dense));
      comm.broadcast(variables_[k].param, 0);
      first_piece_.push_back(pieces_.size());
      for (gradient_piece& piece : partition_gradient(k, variables_[k], d.partition_axis, parts))
        pieces_.push_back(std::move(piece));
    }
    build_buckets(options);
    collected_.assign(variables_.size(), false);
  }

  /// Variable `k`'s gradient is final for this micro-batch: collect it into its buckets, and start every bucket
  /// that is complete and next in order (launch order must be the same on every rank).
  void gradient_ready(std::size_t k, micro_step m) {
    collect(k, m);
    if (m.last) launch_complete_buckets(m);
  }

  /// Collects whatever was not marked ready and starts the remaining buckets.
  void flush(micro_step m) {
    for (std::size_t k = 0; k < variables_.size(); ++k)
      if (!collected_[k]) collect(k, m);
    if (m.last) launch_complete_buckets(m);
  }

  /// Waits for the buckets: afterwards the gradients are averaged. Reports the first
  /// variable whose averaged gradient is not finite, if a codec found one. Throws stalled
  /// if a bucket has not finished by `deadline`.
  sync_stats wait(micro_step m, std::optional<std::string>& nonfinite, std::chrono::steady_clock::time_point deadline) {
    sync_stats stats;
    if (m.last) {
      for (std::size_t i = 0; i < buckets_.size(); ++i) {
        bucket& b = buckets_[i];
        const auto start = std::chrono::steady_clock::now();
        if (b.done.wait_until(deadline) == std::future_status::timeout)
          throw stalled(fmt::format("the all-reduce of bucket {} of {} (variables {}) under {}", i + 1, buckets_.size(),
                                    describe(b), strategy_name<S>()));
        b.done.get();
        stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        stats.comm_seconds += b.seconds;
        stats.bytes_sent += b.result.bytes_sent;
        if (!nonfinite) nonfinite = b.result.nonfinite;
      }
    }
    order_.reset();
    collected_.assign(variables_.size(), false);
    return stats;
  }

  /// Applies the optimizer to every variable with its averaged gradient.
  void update(const O& optimizer, std::int64_t update) {
    for (std::size_t k = 0; k < variables_.size(); ++k)
      optimizer.update(variables_[k].param, variables_[k].grad, states_[k], update);
  }

  std::span<const variable_binding> variables() const { return variables_; }
  void add_memory(memory_use& use) { add_replicated_memory<O>(use, states_); }

  /// The state a checkpoint keeps: parameters and optimizer state (replicated), each
  /// rank's error-feedback residuals (kept per bucket, saved in each variable's own layout
  /// so that another bucketing or partitioning can restore them), codec state.
  void collect_state(ckpt::state_set& set) {
    add_replicated_state<O>(set, variables_, states_);
    if constexpr (requires(reducer& r) { r.residual_state(std::size_t{}); }) {
      std::vector<std::span<float>> residuals;  // per variable
      for (const variable_binding& v : variables_) {
        residuals.push_back(set.scratch(v.elements()));
        set.add({v.name + "/feedback_residual", v.shape, ckpt::sharing::rank_local, residuals.back(), true});
      }
      auto copy = [this, residuals](bool to_buckets) {
        for (bucket& b : buckets_) {
          const std::span<float> residual = b.reduce->residual_state(b.grads.size());
          std::size_t at = 0;
          for (const block_home& h : b.homes) {
            const std::span<float> home = residuals[h.variable].subspan(h.offset, h.size);
            if (to_buckets) std::ranges::copy(home, residual.begin() + static_cast<std::ptrdiff_t>(at));
            else std::ranges::copy(residual.subspan(at, h.size), home.begin());
            at += h.size;
          }
        }
      };
      copy(false);
      set.after_restore([copy] { copy(true); });
    }
    if constexpr (requires(reducer& r) { r.collect_state(set); })
      for (bucket& b : buckets_) b.reduce->collect_state(set);
  }

 private:

  struct block_home {
    std::size_t variable, offset, size;  // a block of the bucket: the variable's elements [offset, offset + size)
  };
  struct bucket {
    span_list<float> grads;         // the pieces' memory, reduced in place
    std::vector<block_home> homes;  // per block of the bucket, in order (grads joins adjacent ones)
    std::vector<bucket_item> items;  // the pieces, for codecs and error messages
    std::optional<reducer> reduce;
    std::vector<float> accumulated;  // sum of earlier micro-batches (accumulation only)
    std::future<void> done;
    bucket_result result;
    double seconds = 0.0;
  };
  struct position {
    std::size_t bucket = 0, offset = 0;  // element offset within the bucket
  };

  /// "bucket 2 of 5 (4.0 MiB, variables ...) under Strategy<...>", for the timeline.
  std::string describe_bucket(std::size_t i) const {
    return fmt::format("bucket {} of {} ({:.2f} MiB; {}) under {}", i + 1, buckets_.size(),
                       static_cast<double>(buckets_[i].grads.size() * sizeof(float)) / (1 << 20), describe(buckets_[i]),
                       strategy_name<S>());
  }

  /// The first variables of a bucket, for messages.
  static std::string describe(const bucket& b) {
    std::string names;
    for (std::size_t i = 0; i < b.items.size() && i < 3; ++i) names += (i ? ", \"" : "\"") + std::string(b.items[i].name) + "\"";
    return b.items.size() > 3 ? fmt::format("{} and {} more", names, b.items.size() - 3) : names;
  }

  void build_buckets(const dense_allreduce_options& options) {
    std::vector<std::size_t> elements;
    for (const gradient_piece& piece : pieces_) elements.push_back(piece.elements());
    home_.resize(pieces_.size());
    std::vector<std::size_t> members;
    for (const bucket_layout& layout : plan_buckets(elements, sizeof(float), options.buckets)) {
      bucket& b = buckets_.emplace_back();
      std::vector<std::span<float>> blocks;
      for (std::size_t i = 0; i < layout.members.size(); ++i) {
        const gradient_piece& piece = pieces_[layout.members[i]];
        blocks.insert(blocks.end(), piece.blocks.begin(), piece.blocks.end());
        for (const std::span<float> block : piece.blocks)
          b.homes.push_back(
              {piece.variable, static_cast<std::size_t>(block.data() - variables_[piece.variable].grad.data()), block.size()});
        b.items.push_back({piece.name, layout.offsets[i], piece.rows, piece.cols});
        home_[layout.members[i]] = {buckets_.size() - 1, layout.offsets[i]};
      }
      b.grads = span_list<float>(blocks);
      members.push_back(layout.members.size());
      b.reduce.emplace(options.allreduce, options.compression, b.items);
    }
    order_ = launch_order(std::move(members));
  }

  /// Marks variable k's pieces collected into their buckets. Accumulation: micro-batches before the last add into
  /// the bucket's own buffer; the last adds that sum into the gradient, reduced in place.
  void collect(std::size_t k, micro_step m) {
    for (std::size_t i = first_piece_[k]; i < pieces_.size() && pieces_[i].variable == k; ++i) {
      const position at = home_[i];
      bucket& b = buckets_[at.bucket];
      if (m.micro_batches > 1) accumulate(b, at.offset, pieces_[i].elements(), m);
      order_.member_ready(at.bucket);
    }
    collected_[k] = true;
  }

  static void accumulate(bucket& b, std::size_t offset, std::size_t elements, micro_step m) {
    b.accumulated.resize(b.grads.size());
    b.grads.for_each(offset, elements, [&](std::size_t at, std::span<float> grad) {
      float* sum = b.accumulated.data() + offset + at;
      for (std::size_t i = 0; i < grad.size(); ++i) {
        if (m.last) grad[i] += sum[i];
        else sum[i] = m.first ? grad[i] : sum[i] + grad[i];
      }
    });
  }

  void launch_complete_buckets(micro_step m) {
    const float scale = 1.0f / static_cast<float>(comm_->size() * m.micro_batches);
    order_.start_ready([&](std::size_t i) {
      bucket& b = buckets_[i];
      trace::instant("launch", "collective", [&] { return describe_bucket(i); });
      b.done = thread_->submit([this, &b, i, scale, update = m.update] {
        const auto start = std::chrono::steady_clock::now();
        trace::span traced("all-reduce", "collective", 0, [&] { return describe_bucket(i); });
        b.result = (*b.reduce)(*comm_, bucket_view{b.grads, b.items, update}, scale);
        traced.add_bytes(b.result.bytes_sent);
        b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    });
  }

  C* comm_;
  comm_thread* thread_;
  std::vector<variable_binding> variables_;
  std::vector<typename O::state> states_;
  std::vector<gradient_piece> pieces_;  // grouped by variable, in declaration order
  std::vector<std::size_t> first_piece_;  // per variable
  std::vector<bucket> buckets_;
  std::vector<position> home_;  // where each piece lives in the buckets
  std::vector<bool> collected_;    // per variable, this micro-batch
  launch_order order_;
};

}  // namespace strata::sync
