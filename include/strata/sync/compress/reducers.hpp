#pragma once
// Bucket reducers: how one fusion bucket is averaged over all ranks under a compression
// policy. One specialization per codec; each runs on the communication thread and writes
// the averaged (decompressed) gradient back into the bucket's buffers.
//
// All of them scale before they reduce (the sum of gradients divided by ranks x micro-
// batches cannot overflow a 16-bit type where the plain sum would) and check the decoded
// result for NaN/Inf: a non-finite value anywhere reaches every rank through the reduction,
// so every rank sees it and takes the same decision.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "strata/ckpt/state.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/kernels/top_k.hpp"
#include "strata/numeric/float16.hpp"
#include "strata/policy/compression.hpp"
#include "strata/sync/allreduce/algorithm.hpp"
#include "strata/sync/compress/bucket.hpp"
#include "strata/sync/compress/low_rank.hpp"

namespace strata::sync {

namespace detail {

/// The first item of the bucket whose gradient is not finite, if any.
inline std::optional<std::string> find_nonfinite(const bucket_view& bucket) {
  std::optional<std::size_t> at;
  bucket.grads.for_each(0, bucket.grads.size(), [&](std::size_t offset, std::span<float> s) {
    if (at) return;
    for (std::size_t k = 0; k < s.size(); ++k)
      if (!std::isfinite(s[k])) {
        at = offset + k;
        return;
      }
  });
  if (!at) return std::nullopt;
  return std::string(bucket.item_at(*at).name);
}

/// Error feedback's residual for a checkpoint: sized to the bucket (zero if no step ran yet).
inline std::span<float> sized_residual(std::vector<float>& residual, std::size_t n) {
  residual.resize(n, 0.0f);
  return residual;
}

}  // namespace detail

template <class Compression, class Algorithm, Communicator C>
class bucket_reducer;

/// Uncompressed: the all-reduce averages the user's buffers in place.
template <class Algorithm, Communicator C>
class bucket_reducer<Compress<None>, Algorithm, C> {
 public:
  bucket_reducer(const allreduce_options& a, const compression_options& c, std::span<const bucket_item>)
      : reduce_(a), scan_(c.scan_uncompressed) {}
  bucket_result operator()(C& comm, const bucket_view& bucket, float scale) {
    bucket_result result{reduce_(comm, bucket.grads, scale), std::nullopt};
    if (scan_) result.nonfinite = detail::find_nonfinite(bucket);
    return result;
  }

 private:
  allreduce<Algorithm, C, float> reduce_;
  bool scan_;
};

/// FP16 / BF16: gradients are scaled, cast to the 16-bit wire type, reduced in that type
/// and cast back. With error feedback the rounding error is kept and added next step.
///
/// Over Ring and Hierarchical the casts happen inside the rings, chunk by chunk while the
/// chunk is in cache: a rank rounds what it sends, and the rank completing a sum rounds it
/// once for everyone. Tree and Native cast the whole bucket before and after reducing it,
/// with the ring's codec.
template <class Wire, bool Feedback, class Algorithm, Communicator C>
class cast_reducer {
 public:
  cast_reducer(const allreduce_options& a, const compression_options&, std::span<const bucket_item>) : reduce_(a) {}

  bucket_result operator()(C& comm, const bucket_view& bucket, float scale) {
    const std::size_t n = bucket.grads.size();
    if constexpr (Feedback) residual_.resize(n, 0.0f);
    const ring_codec<float, Wire> codec{scale, Feedback ? std::span<float>(residual_) : std::span<float>()};
    bucket_result result;
    if constexpr (casts_inside)
      result.bytes_sent = reduce_(comm, bucket.grads, codec);
    else
      result.bytes_sent = cast_reduce_cast(comm, bucket, codec);
    if (codec.nonfinite) result.nonfinite = detail::find_nonfinite(bucket);  // only to name the variable
    if (result.nonfinite && Feedback) std::ranges::fill(residual_, 0.0f);  // do not carry poison forward
    return result;
  }

  /// What error feedback carries into the next step (empty without it).
  std::span<const float> residual() const { return residual_; }
  std::span<float> residual_state(std::size_t n) requires Feedback { return detail::sized_residual(residual_, n); }

 private:
  static constexpr bool casts_inside = std::is_same_v<Algorithm, Ring> || std::is_same_v<Algorithm, Hierarchical>;

  std::uint64_t cast_reduce_cast(C& comm, const bucket_view& bucket, const ring_codec<float, Wire>& codec) {
    const std::size_t n = bucket.grads.size();
    wire_.resize(n);
    const std::span<Wire> wire(wire_);
    bucket.grads.for_each(0, n, [&](std::size_t offset, std::span<float> s) {
      codec.enter(s, wire.subspan(offset, s.size()), offset);
    });
    const std::uint64_t bytes = reduce_(comm, span_list<Wire>({wire}), Wire(1.0f));
    bucket.grads.for_each(0, n, [&](std::size_t offset, std::span<float> s) {
      codec.store(s, wire.subspan(offset, s.size()));
    });
    return bytes;
  }

  std::vector<Wire> wire_;
  std::vector<float> residual_;
  allreduce<Algorithm, C, Wire> reduce_;
};

template <class Feedback, class Algorithm, Communicator C>
class bucket_reducer<Compress<FP16, Feedback>, Algorithm, C> : public cast_reducer<half, Feedback::enabled, Algorithm, C> {
  using cast_reducer<half, Feedback::enabled, Algorithm, C>::cast_reducer;
};
template <class Feedback, class Algorithm, Communicator C>
class bucket_reducer<Compress<BF16, Feedback>, Algorithm, C>
    : public cast_reducer<bfloat16, Feedback::enabled, Algorithm, C> {
  using cast_reducer<bfloat16, Feedback::enabled, Algorithm, C>::cast_reducer;
};

/// Top-k: each rank sends its k = ceil(Ratio * n) largest-magnitude entries of the bucket
/// (ties to the lower index; kernels::top_k) as (index, value) pairs by all-gather; every
/// rank sums all pairs in rank order. With error feedback the entries not sent are kept and
/// added next step.
template <double Ratio, class Feedback, class Algorithm, Communicator C>
class bucket_reducer<Compress<TopK<Ratio>, Feedback>, Algorithm, C> {
 public:
  struct entry {
    std::uint32_t index;
    float value;
  };

  bucket_reducer(const allreduce_options&, const compression_options&, std::span<const bucket_item>) {}

  /// Entries kept from a bucket of n elements.
  static std::size_t kept(std::size_t n) {
    return std::min(n, std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(Ratio * static_cast<double>(n)))));
  }

  bucket_result operator()(C& comm, const bucket_view& bucket, float scale) {
    const std::size_t n = bucket.grads.size();
    if (n == 0) return {};
    if (n > UINT32_MAX) throw comm_error("Compress<TopK>: a bucket of more than 2^32 elements; use smaller buckets");
    dense_.resize(n);
    if constexpr (Feedback::enabled) residual_.resize(n, 0.0f);
    bucket.grads.for_each(0, n, [&](std::size_t offset, std::span<float> s) {
      for (std::size_t k = 0; k < s.size(); ++k)
        dense_[offset + k] = s[k] * scale + (Feedback::enabled ? residual_[offset + k] : 0.0f);
    });
    const std::size_t k = kept(n);
    chosen_.resize(k);
    kernels::top_k(dense_, chosen_, keys_);
    mine_.resize(k);
    for (std::size_t i = 0; i < k; ++i) mine_[i] = {chosen_[i], dense_[chosen_[i]]};
    if constexpr (Feedback::enabled) {
      residual_ = dense_;
      for (const entry& e : mine_) residual_[e.index] = 0.0f;  // sent: nothing left over
    }
    all_.resize(k * static_cast<std::size_t>(comm.size()));
    comm.allgather(std::span<const entry>(mine_), std::span<entry>(all_));
    std::ranges::fill(dense_, 0.0f);
    for (const entry& e : all_) dense_[e.index] += e.value;  // rank order: identical on every rank
    bucket.grads.for_each(0, n, [&](std::size_t offset, std::span<float> s) {
      std::copy_n(dense_.begin() + static_cast<std::ptrdiff_t>(offset), s.size(), s.begin());
    });
    bucket_result result{static_cast<std::uint64_t>(comm.size() - 1) * k * sizeof(entry), detail::find_nonfinite(bucket)};
    if (result.nonfinite && Feedback::enabled) std::ranges::fill(residual_, 0.0f);
    return result;
  }

  /// What error feedback carries into the next step (empty without it).
  std::span<const float> residual() const { return residual_; }
  std::span<float> residual_state(std::size_t n) requires Feedback::enabled { return detail::sized_residual(residual_, n); }

 private:
  std::vector<float> dense_, residual_;
  std::vector<std::uint32_t> chosen_;
  std::vector<std::uint64_t> keys_;
  std::vector<entry> mine_, all_;
};

/// PowerSGD (Vogels et al.): each gradient matrix M is replaced by P Q^T of rank r, found
/// by one power iteration warm-started from the previous step's Q. The P of all matrices of
/// the bucket travel in one all-reduce, then all the Q in another. The first
/// `powersgd_warmup_steps` updates use a plain all-reduce.
template <int Rank, class Feedback, class Algorithm, Communicator C>
class bucket_reducer<Compress<PowerSGD<Rank>, Feedback>, Algorithm, C> {
 public:
  bucket_reducer(const allreduce_options& a, const compression_options& c, std::span<const bucket_item> items)
      : options_(c), reduce_(a) {
    std::mt19937_64 engine(c.seed);
    std::normal_distribution<float> normal;
    std::size_t p_size = 0, q_size = 0, m_size = 0;
    for (const bucket_item& item : items) {
      const std::size_t r = rank_of(item);
      factors_.push_back({p_size, q_size, std::string(item.name), item.cols, r});
      p_size += item.rows * r;
      q_size += item.cols * r;
      m_size += item.elements();
    }
    p_.resize(p_size);
    q_.resize(q_size);
    for (float& x : q_) x = normal(engine);  // the same seed on every rank: the same start
    m_.resize(m_size);
  }

  bucket_result operator()(C& comm, const bucket_view& bucket, float scale) {
    if (bucket.update <= options_.powersgd_warmup_steps) return {reduce_(comm, bucket.grads, scale), std::nullopt};
    if constexpr (Feedback::enabled) residual_.resize(m_.size(), 0.0f);
    bucket.grads.for_each(0, m_.size(), [&](std::size_t offset, std::span<float> s) {
      for (std::size_t k = 0; k < s.size(); ++k)
        m_[offset + k] = s[k] * scale + (Feedback::enabled ? residual_[offset + k] : 0.0f);
    });
    for_each_item(bucket, [&](const bucket_item& item, std::size_t r, std::span<float> m, std::span<float> p, std::span<float> q) {
      low_rank::multiply(m, q, p, item.rows, item.cols, r);
    });
    std::uint64_t bytes = reduce_(comm, span_list<float>({std::span<float>(p_)}), 1.0f);
    for_each_item(bucket, [&](const bucket_item& item, std::size_t r, std::span<float> m, std::span<float> p, std::span<float> q) {
      low_rank::orthogonalize(p, item.rows, r);
      low_rank::multiply_transposed(m, p, q, item.rows, item.cols, r);
    });
    bytes += reduce_(comm, span_list<float>({std::span<float>(q_)}), 1.0f);
    // The approximation is of the average; this rank's share of it, against which its own
    // (pre-scaled) matrix is compared, is 1/ranks of it.
    const float share = 1.0f / static_cast<float>(comm.size());
    for_each_item(bucket, [&](const bucket_item& item, std::size_t r, std::span<float> m, std::span<float> p, std::span<float> q) {
      if constexpr (Feedback::enabled) {
        approximation_.resize(item.elements());
        low_rank::reconstruct(p, q, approximation_, item.rows, item.cols, r);
        for (std::size_t k = 0; k < m.size(); ++k) residual_[item.offset + k] = m[k] - share * approximation_[k];
        std::ranges::copy(approximation_, m.begin());
      } else {
        low_rank::reconstruct(p, q, m, item.rows, item.cols, r);
      }
    });
    bucket.grads.for_each(0, m_.size(), [&](std::size_t offset, std::span<float> s) {
      std::copy_n(m_.begin() + static_cast<std::ptrdiff_t>(offset), s.size(), s.begin());
    });
    bucket_result result{bytes, detail::find_nonfinite(bucket)};
    if (result.nonfinite) reset();
    return result;
  }

  /// What error feedback carries into the next step (empty without it).
  std::span<const float> residual() const { return residual_; }
  std::span<float> residual_state(std::size_t n) requires Feedback::enabled { return detail::sized_residual(residual_, n); }

  /// The warm start Q of each matrix (the same on every rank). Optional in a checkpoint:
  /// its layout follows the partitioning, and a fresh Q only costs a few steps of accuracy.
  void collect_state(ckpt::state_set& set) {
    for (const factor_offsets& f : factors_)
      set.add({f.name + "/powersgd_q", {f.cols, f.rank}, ckpt::sharing::replicated,
               std::span<float>(q_).subspan(f.q, f.cols * f.rank), true});
  }

 private:
  struct factor_offsets {
    std::size_t p, q;
    std::string name;  // the item's, for checkpoints
    std::size_t cols, rank;
  };

  static std::size_t rank_of(const bucket_item& item) {
    return std::min<std::size_t>({static_cast<std::size_t>(Rank), item.rows, item.cols});
  }

  template <class F>
  void for_each_item(const bucket_view& bucket, F&& f) {
    for (std::size_t i = 0; i < bucket.items.size(); ++i) {
      const bucket_item& item = bucket.items[i];
      const std::size_t r = rank_of(item);
      f(item, r, std::span<float>(m_).subspan(item.offset, item.elements()),
        std::span<float>(p_).subspan(factors_[i].p, item.rows * r), std::span<float>(q_).subspan(factors_[i].q, item.cols * r));
    }
  }

  /// After a non-finite step the warm start and residual are poisoned: start over.
  void reset() {
    std::mt19937_64 engine(options_.seed);
    std::normal_distribution<float> normal;
    for (float& x : q_) x = normal(engine);
    std::ranges::fill(residual_, 0.0f);
  }

  compression_options options_;
  allreduce<Algorithm, C, float> reduce_;
  std::vector<factor_offsets> factors_;
  std::vector<float> p_, q_, m_, residual_, approximation_;
};

}  // namespace strata::sync
