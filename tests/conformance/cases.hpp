#pragma once
// Conformance cases written against the CommContext concept, run by the unit tests on the
// loopback backend (ranks as threads) and by the MPI tests under mpiexec. A case throws
// conformance_failure with what differed; it never uses test-framework macros, which are
// not thread-safe.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "strata/strata.hpp"

namespace strata::conformance {

struct conformance_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... Args>
void expect(bool ok, fmt::format_string<Args...> what, Args&&... args) {
  if (!ok) throw conformance_failure(fmt::format(what, std::forward<Args>(args)...));
}

/// Element counts that stress segmenting: empty, fewer than ranks, not divisible by them, and
/// many chunks. Under a sanitizer 65537 elements, some 20,000 tiny chunks per rank, take a
/// minute per case; 1001 already cuts each path into hundreds of chunks.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)  // GCC's names
#define STRATA_TEST_SANITIZED 1
#elif defined(__has_feature)  // Clang's
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STRATA_TEST_SANITIZED 1
#endif
#endif
#ifdef STRATA_TEST_SANITIZED
inline const std::vector<std::size_t> awkward_sizes = {0, 1, 2, 3, 5, 7, 64, 1000, 1001};
#else
inline const std::vector<std::size_t> awkward_sizes = {0, 1, 2, 3, 5, 7, 64, 1000, 1001, 65537};
#endif

/// Rank r contributes (i % 97) * (r + 1) + r: integers, so float sums are exact and the
/// expected result is known in closed form.
template <class T>
std::vector<T> contribution(std::size_t n, int rank) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>((i % 97) * (rank + 1) + rank);
  return v;
}
template <class T>
T expected_sum(std::size_t i, int ranks) {
  T sum = 0;
  for (int r = 0; r < ranks; ++r) sum += static_cast<T>((i % 97) * (r + 1) + r);
  return sum;
}

/// Every size, both element types, tiny chunks so the ring's chunking is exercised.
/// `ranks_per_node` simulates nodes for Hierarchical, whose node's ranks read each other's
/// memory with `read_within_node` (seeing it in place where the buffers are `node_memory`)
/// and pass messages (through shared memory or not) without.
template <class Algorithm, class T, CommContext Context>
void allreduce_sums_exactly(Context& ctx, int ranks_per_node = 0, bool shared_memory = true,
                            bool read_within_node = false, bool node_memory = false) {
  auto& comm = ctx.collectives();
  using C = std::remove_reference_t<decltype(comm)>;
  sync::allreduce<Algorithm, C, T> reduce(
      sync::allreduce_options{.ring_chunk_bytes = 3 * sizeof(T),
                              .shared_memory_max_bytes = shared_memory ? SIZE_MAX : 0,
                              .shared_memory_chunk_bytes = 5 * sizeof(T),
                              .ranks_per_node = ranks_per_node,
                              .cross_node_chunk_bytes = 2 * sizeof(T),
                              .cross_node_window = 3,
                              .hierarchical_piece_bytes = 40 * sizeof(T),
                              .read_within_node = read_within_node});
  for (std::size_t n : awkward_sizes) {
    std::vector<T> values = contribution<T>(n, comm.rank());
    node_vector<T> in_node;
    if (node_memory) in_node.assign(values.begin(), values.end());
    const std::span<T> data = node_memory ? std::span<T>(in_node) : std::span<T>(values);
    reduce(comm, sync::span_list<T>({data}), T{1});
    for (std::size_t i = 0; i < n; ++i)
      expect(data[i] == expected_sum<T>(i, comm.size()), "rank {}: n={} element {} is {}, expected {}", comm.rank(), n, i,
             data[i], expected_sum<T>(i, comm.size()));
  }
}

/// A bucket of several buffers (some empty, some tiny) averaged in place: each element ends
/// as its sum times the scale.
template <class Algorithm, CommContext Context>
void allreduce_averages_buffer_lists(Context& ctx, int ranks_per_node = 0,
                                     const std::vector<std::size_t>& sizes = {3, 0, 17, 1, 0, 64, 2},
                                     bool shared_memory = true) {
  auto& comm = ctx.collectives();
  using C = std::remove_reference_t<decltype(comm)>;
  sync::allreduce<Algorithm, C, float> reduce(
      sync::allreduce_options{.ring_chunk_bytes = 5 * sizeof(float),
                              .ring_window = 2,
                              .shared_memory_max_bytes = shared_memory ? SIZE_MAX : 0,
                              .shared_memory_chunk_bytes = 3 * sizeof(float),
                              .ranks_per_node = ranks_per_node,
                              .cross_node_chunk_bytes = 3 * sizeof(float),
                              .cross_node_window = 1,
                              .hierarchical_piece_bytes = 16 * sizeof(float)});
  std::vector<std::vector<float>> buffers;
  std::vector<std::span<float>> parts;
  std::size_t start = 0;
  for (std::size_t n : sizes) {
    buffers.push_back(contribution<float>(start + n, comm.rank()));
    buffers.back().erase(buffers.back().begin(), buffers.back().begin() + static_cast<long>(start));
    start += n;
  }
  for (auto& b : buffers) parts.emplace_back(b);
  const float scale = 0.25f;
  reduce(comm, sync::span_list<float>(parts), scale);
  std::size_t i = 0;
  for (const auto& b : buffers)
    for (float x : b) {
      expect(x == expected_sum<float>(i, comm.size()) * scale, "rank {}: element {} is {}, expected {}", comm.rank(), i, x,
             expected_sum<float>(i, comm.size()) * scale);
      ++i;
    }
}

/// FNV-1a over the bytes of a float buffer: compares replicas bitwise across ranks.
inline std::uint64_t fingerprint(std::span<const float> values) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::byte b : std::as_bytes(values)) h = (h ^ static_cast<std::uint64_t>(b)) * 1099511628211ull;
  return h;
}

/// Checks that a value is the same on every rank (broadcast rank 0's and compare).
template <CommContext Context>
void expect_same_on_all_ranks(Context& ctx, std::uint64_t value, std::string_view what) {
  std::uint64_t root = value;
  ctx.control().broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&root, 1)), 0);
  expect(root == value, "rank {}: {} differs from rank 0's", ctx.control().rank(), what);
}

/// Random (non-integer) values in a bucket of three buffers: `Algorithm` leaves every rank
/// bitwise identical and agrees with the ring up to rounding. The values are positive, so no
/// sum cancels and a relative bound holds.
template <class Algorithm, CommContext Context>
void allreduce_agrees_with_ring(Context& ctx, sync::allreduce_options options) {
  auto& comm = ctx.collectives();
  using C = std::remove_reference_t<decltype(comm)>;
  std::mt19937 rng(99u + static_cast<unsigned>(comm.rank()));
  std::uniform_real_distribution<float> positive(0.5f, 1.5f);
  std::vector<float> values(10'009);
  for (float& x : values) x = positive(rng);
  values[1000] = values[1004] = 0.0f;  // gaps between the parts, so that they stay three
  std::vector<float> flat = values;
  auto bucket = [](std::vector<float>& v) {
    const std::span<float> all(v);
    return sync::span_list<float>({all.first(1000), all.subspan(1001, 3), all.subspan(1005)});
  };
  sync::allreduce<Algorithm, C, float> reduce(options);
  sync::allreduce<Ring, C, float> ring(options);
  reduce(comm, bucket(values), 0.5f);
  ring(comm, bucket(flat), 0.5f);
  expect_same_on_all_ranks(ctx, fingerprint(values), "the all-reduced values");
  for (std::size_t i = 0; i < values.size(); ++i)
    expect(std::abs(values[i] - flat[i]) <= 1e-6f * flat[i], "rank {}: element {} is {}, the ring's is {}", comm.rank(),
           i, values[i], flat[i]);
}

/// Rings of different chunks and windows, through shared memory and as messages, back to
/// back on one communicator: each sums exactly, whatever the ring before it left behind
/// (a neighbour still handling the last chunks, slots cut to another size).
template <CommContext Context>
void rings_of_any_shape_follow_each_other(Context& ctx) {
  auto& comm = ctx.collectives();
  using C = std::remove_reference_t<decltype(comm)>;
  sync::ring_workspace<C, float> work;
  const sync::ring_pipeline shapes[] = {{7, 2}, {13, 5}, {3, 1}, {1000, 3}, {7, 2, 0}, {5, 4}, {64, 2}, {8, 2, 100, 3}};
  for (int round = 0; round < 2; ++round)
    for (const sync::ring_pipeline& shape : shapes)
      for (std::size_t n : {1u, 50u, 1001u}) {
        std::vector<float> data = contribution<float>(n, comm.rank());
        sync::ring_allreduce(comm, sync::span_list<float>({std::span<float>(data)}), 1.0f, work, shape);
        for (std::size_t i = 0; i < n; ++i)
          expect(data[i] == expected_sum<float>(i, comm.size()), "rank {}: chunk {} x {}, n={}: element {} is {}",
                 comm.rank(), shape.chunk_elements, shape.window, n, i, data[i]);
      }
}

/// Each rank's block lands at rank * count, for any trivially copyable type.
template <class T, CommContext Context>
void allgather_collects_every_rank(Context& ctx) {
  auto& comm = ctx.collectives();
  auto value = [](int rank, std::size_t i) { return static_cast<T>(10 * rank + static_cast<int>(i)); };
  for (std::size_t count : {0u, 3u}) {
    std::vector<T> mine(count), all(count * static_cast<std::size_t>(comm.size()));
    for (std::size_t i = 0; i < count; ++i) mine[i] = value(comm.rank(), i);
    comm.allgather(std::span<const T>(mine), std::span<T>(all));
    for (int r = 0; r < comm.size(); ++r)
      for (std::size_t i = 0; i < count; ++i)
        expect(all[static_cast<std::size_t>(r) * count + i] == value(r, i),
               "rank {}: element {} of rank {}'s block differs", comm.rank(), i, r);
  }
}

/// split groups the ranks of one color, ordered by key; every operation works on the
/// group with group-relative ranks, and the group splits again.
template <CommContext Context>
void split_forms_groups(Context& ctx) {
  auto& parent = ctx.collectives();
  const int p = parent.size(), r = parent.rank(), color = r % 2;
  auto group = parent.split(color, p - r);  // keys reverse the order
  std::vector<int> members;                 // parent ranks, in the group's order
  for (int q = p - 1; q >= 0; --q)
    if (q % 2 == color) members.push_back(q);
  const int n = group.size(), g = group.rank();
  expect(n == static_cast<int>(members.size()) && members[static_cast<std::size_t>(g)] == r,
         "rank {}: group rank {} of {}, expected {} ranks", r, g, n, members.size());

  std::vector<int> gathered(members.size());
  group.allgather(std::span<const int>(&r, 1), std::span<int>(gathered));
  expect(gathered == members, "rank {}: the group gathered other parent ranks", r);

  const float mine = static_cast<float>(r);
  float from_left = -1.0f;
  auto in = group.irecv(std::span<float>(&from_left, 1), (g + n - 1) % n, 5);
  auto out = group.isend(std::span<const float>(&mine, 1), (g + 1) % n, 5);
  group.wait(in);
  group.wait(out);
  expect(from_left == static_cast<float>(members[static_cast<std::size_t>((g + n - 1) % n)]),
         "rank {}: received {} from its left neighbour in the group", r, from_left);

  double total = r;
  group.allreduce_sum(std::span<double>(&total, 1));
  float root = g == 0 ? 42.0f : 0.0f;
  group.broadcast(std::span<float>(&root, 1), 0);
  group.barrier();
  expect(total == std::accumulate(members.begin(), members.end(), 0.0) && root == 42.0f,
         "rank {}: group sum {}, broadcast {}", r, total, root);

  auto single = group.split(g, 0);
  expect(single.size() == 1 && single.rank() == 0, "rank {}: a group of one has {} ranks", r, single.size());
}

/// A split communicator's messages never match its parent's or a sibling's, even between
/// the same ranks under the same tag.
template <CommContext Context>
void split_isolates_traffic(Context& ctx) {
  auto& parent = ctx.collectives();
  auto first = parent.split(0, parent.rank());   // the parent's ranks, in its order
  auto second = parent.split(0, parent.rank());  // and a sibling with the same ranks
  const int p = parent.size(), r = parent.rank(), right = (r + 1) % p, left = (r + p - 1) % p;
  const float sent[] = {1.0f, 2.0f, 3.0f};  // on the parent, first, second
  auto to_parent = parent.isend(std::span<const float>(&sent[0], 1), right, 7);
  auto to_first = first.isend(std::span<const float>(&sent[1], 1), right, 7);
  auto to_second = second.isend(std::span<const float>(&sent[2], 1), right, 7);
  float got[] = {0.0f, 0.0f, 0.0f};  // received in reverse order
  auto from_second = second.irecv(std::span<float>(&got[2], 1), left, 7);
  second.wait(from_second);
  auto from_first = first.irecv(std::span<float>(&got[1], 1), left, 7);
  first.wait(from_first);
  auto from_parent = parent.irecv(std::span<float>(&got[0], 1), left, 7);
  parent.wait(from_parent);
  parent.wait(to_parent);
  first.wait(to_first);
  second.wait(to_second);
  expect(got[0] == 1.0f && got[1] == 2.0f && got[2] == 3.0f, "rank {}: received {}, {}, {} on parent, first, second", r,
         got[0], got[1], got[2]);
}

/// Random (non-integer) gradients, different per rank, several steps: after every step the
/// parameters are bitwise identical on all ranks, whatever the algorithm, codec or
/// partitioning.
template <class Collective, CommContext Context, class... MorePolicies>
void replicas_stay_bitwise_identical(Context& ctx) {
  using S = Strategy<AllReduce<Collective>, MorePolicies...>;
  std::mt19937 rng(1234u + static_cast<unsigned>(ctx.control().rank()));
  std::normal_distribution<float> normal;
  std::vector<float> w(50'000), gw(w.size()), b(333), gb(b.size());
  for (float& x : w) x = normal(rng);  // differs per rank until the executor broadcasts
  auto m = make_model(variable<S>("w", w, gw, {250, 200}), variable<vector_strategy_t<S>>("b", b, gb, {333}));
  executor_options options{.buckets = {.first_bucket_bytes = 4096, .bucket_bytes = 64 * 1024}};
  options.compression.powersgd_warmup_steps = 1;
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f, .momentum = 0.9f}, options);
  for (int step = 0; step < 4; ++step) {
    for (float& g : gw) g = normal(rng);
    for (float& g : gb) g = normal(rng);
    exec.step();
    expect_same_on_all_ranks(ctx, fingerprint(w) ^ fingerprint(b), fmt::format("parameters after step {}", step));
  }
}

/// The averaged update equals a single-process update with the mean gradient.
template <class Collective, CommContext Context>
void executor_averages_gradients(Context& ctx) {
  using S = Strategy<AllReduce<Collective>>;
  const int p = ctx.control().size(), r = ctx.control().rank();
  std::vector<float> w(1001, 1.0f), gw(w.size());
  auto m = make_model(variable<S>("w", w, gw, {1001}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.5f}, {.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 256}});
  for (std::size_t i = 0; i < gw.size(); ++i) gw[i] = static_cast<float>(r + 1) * static_cast<float>(i % 5);
  exec.grad_ready("w");
  const step_stats stats = exec.step();
  const float mean_rank_factor = static_cast<float>(p + 1) / 2.0f;  // mean of 1..p
  for (std::size_t i = 0; i < w.size(); ++i) {
    const float expected = 1.0f - 0.5f * mean_rank_factor * static_cast<float>(i % 5);
    expect(std::abs(w[i] - expected) <= 1e-6f, "rank {}: w[{}] = {}, expected {}", r, i, w[i], expected);
  }
  expect(stats.updated, "step() did not report an update");
  expect(p == 1 || stats.bytes_sent > 0, "rank {}: no bytes reported sent", r);
}

/// FP16 / BF16 averages stay within the wire type's rounding of the exact average (computed
/// in double over the control communicator).
template <class Codec, class Collective, CommContext Context>
void cast_compression_is_close(Context& ctx, double relative_tolerance) {
  using S = Strategy<AllReduce<Collective>, Compress<Codec>>;
  const int p = ctx.control().size();
  std::mt19937 rng(77u + static_cast<unsigned>(ctx.control().rank()));
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);  // one sign: no cancellation
  std::vector<float> w(3000, 0.0f), g(w.size());
  for (float& x : g) x = uniform(rng);
  std::vector<double> exact(g.begin(), g.end());
  ctx.control().allreduce_sum(std::span<double>(exact));
  auto m = make_model(variable<S>("w", w, g, {3000}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f}, {.buckets = {.first_bucket_bytes = 1024, .bucket_bytes = 4096}});
  exec.step();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double want = exact[i] / p;
    expect(std::abs(g[i] - want) <= relative_tolerance * want, "rank {}: element {} averaged to {}, exact {}",
           ctx.control().rank(), i, g[i], want);
  }
}

/// FP16 / BF16 with error feedback over `Algorithm`, in buckets of two buffers: in every
/// step the average plus what all ranks keep is what they put in (their scaled gradients
/// plus what they kept the step before), to float rounding. So every rounding a rank made,
/// of its own values or of a partial sum it forwarded, was kept. The average is a value of
/// the wire type, within the roundings of the ranks' sums of what was put in. Replicas stay
/// identical, and a gradient that is infinite on one rank is named on every rank.
template <class Codec, class Algorithm, CommContext Context>
void cast_feedback_keeps_what_rounding_lost(Context& ctx, const sync::allreduce_options& options) {
  using Wire = std::conditional_t<std::is_same_v<Codec, FP16>, half, bfloat16>;
  const double unit_roundoff = std::is_same_v<Wire, half> ? 0x1p-11 : 0x1p-8;
  auto& comm = ctx.collectives();
  using C = std::remove_reference_t<decltype(comm)>;
  const int p = comm.size(), r = comm.rank();
  const float scale = 1.0f / static_cast<float>(p);
  std::mt19937 rng(31u + static_cast<unsigned>(r));
  std::normal_distribution<float> normal;
  for (const std::size_t n : {std::size_t{2}, std::size_t{7}, std::size_t{1003}, std::size_t{4099}}) {
    std::vector<float> a(n / 3 + 1), b(n - a.size());
    const std::vector<sync::bucket_item> items = {{"a", 0, a.size(), 1}, {"b", a.size(), b.size(), 1}};
    const sync::span_list<float> grads({std::span<float>(a), std::span<float>(b)});
    auto value = [&](std::size_t i) { return i < a.size() ? a[i] : b[i - a.size()]; };
    sync::bucket_reducer<Compress<Codec, ErrorFeedback>, Algorithm, C> reduce(options, {}, items);
    for (std::int64_t update = 1; update <= 3; ++update) {
      for (float& x : a) x = normal(rng);
      for (float& x : b) x = normal(rng);
      // What the ranks put in, and its size (the sum of magnitudes), over all ranks.
      std::vector<double> put_in(2 * n, 0.0);
      for (std::size_t i = 0; i < n; ++i) {
        const double kept = reduce.residual().empty() ? 0.0 : reduce.residual()[i];
        put_in[i] = static_cast<double>(value(i)) * scale + kept;
        put_in[n + i] = std::abs(put_in[i]);
      }
      ctx.control().allreduce_sum(std::span<double>(put_in));
      const sync::bucket_result result = reduce(comm, sync::bucket_view{grads, items, update}, scale);
      expect(!result.nonfinite, "rank {}: n={} a finite bucket was reported non-finite", r, n);
      std::vector<double> kept(reduce.residual().begin(), reduce.residual().end());
      expect(kept.size() == n, "rank {}: n={} a residual of {} elements", r, n, kept.size());
      ctx.control().allreduce_sum(std::span<double>(kept));
      for (std::size_t i = 0; i < n; ++i) {
        const float average = value(i);
        const double lost = average + kept[i] - put_in[i];
        expect(std::abs(lost) <= 2e-6 * put_in[n + i] + 1e-12,
               "rank {}: n={} update {} element {}: average {} plus the residuals {} misses what was put in, {}, by {}",
               r, n, update, i, average, kept[i], put_in[i], lost);
        expect(static_cast<float>(Wire(average)) == average, "rank {}: n={} element {}: average {} is not a {} value",
               r, n, i, average, std::is_same_v<Wire, half> ? "half" : "bfloat16");
        const double off = std::abs(average - put_in[i]), most = (p + 2) * unit_roundoff * put_in[n + i] + 1e-7;
        expect(off <= most, "rank {}: n={} update {} element {}: average {} is {} from what was put in, {}", r, n,
               update, i, average, off, put_in[i]);
      }
      expect(n < 7 || std::ranges::any_of(kept, [](double k) { return k != 0.0; }),
             "rank {}: n={} update {}: no rounding was kept", r, n, update);
      expect_same_on_all_ranks(ctx, fingerprint(a) ^ (fingerprint(b) * 3), fmt::format("n={} average {}", n, update));
    }
    if (r == p - 1) b.back() = std::numeric_limits<float>::infinity();
    const sync::bucket_result result = reduce(comm, sync::bucket_view{grads, items, 4}, scale);
    expect(result.nonfinite == std::optional<std::string>("b"), "rank {}: n={} an infinite gradient of b was named {}",
           r, n, result.nonfinite.value_or("nowhere"));
  }
}

}  // namespace strata::conformance
