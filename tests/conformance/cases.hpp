#pragma once
// Conformance cases written against the CommContext concept, run by the unit tests on the
// loopback backend (ranks as threads) and by the MPI tests under mpiexec. A case throws
// conformance_failure with what differed; it never uses test-framework macros, which are
// not thread-safe.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
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

/// Element counts that stress segmenting: empty, fewer than ranks, not divisible by them.
inline const std::vector<std::size_t> awkward_sizes = {0, 1, 2, 3, 5, 7, 64, 1000, 1001, 65537};

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
template <class Algorithm, class T, CommContext Context>
void allreduce_sums_exactly(Context& ctx) {
  auto& comm = ctx.collectives();
  using C = std::remove_reference_t<decltype(comm)>;
  sync::allreduce<Algorithm, C, T> reduce(sync::allreduce_options{.ring_chunk_bytes = 3 * sizeof(T)});
  for (std::size_t n : awkward_sizes) {
    std::vector<T> data = contribution<T>(n, comm.rank());
    reduce(comm, sync::span_list<T>({std::span<T>(data)}), T{1});
    for (std::size_t i = 0; i < n; ++i)
      expect(data[i] == expected_sum<T>(i, comm.size()), "rank {}: n={} element {} is {}, expected {}", comm.rank(), n, i,
             data[i], expected_sum<T>(i, comm.size()));
  }
}

/// A bucket of several buffers (some empty, some tiny) averaged in place: each element ends
/// as its sum times the scale.
template <class Algorithm, CommContext Context>
void allreduce_averages_buffer_lists(Context& ctx) {
  auto& comm = ctx.collectives();
  using C = std::remove_reference_t<decltype(comm)>;
  sync::allreduce<Algorithm, C, float> reduce(sync::allreduce_options{.ring_chunk_bytes = 5 * sizeof(float), .ring_window = 2});
  const std::vector<std::size_t> sizes = {3, 0, 17, 1, 0, 64, 2};
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

/// Random (non-integer) gradients, different per rank, several steps: after every step the
/// parameters are bitwise identical on all ranks.
template <class Collective, CommContext Context>
void replicas_stay_bitwise_identical(Context& ctx) {
  using S = Strategy<AllReduce<Collective>>;
  std::mt19937 rng(1234u + static_cast<unsigned>(ctx.control().rank()));
  std::normal_distribution<float> normal;
  std::vector<float> w(50'000), gw(w.size()), b(333), gb(b.size());
  for (float& x : w) x = normal(rng);  // differs per rank until the executor broadcasts
  auto m = make_model(variable<S>("w", w, gw, {250, 200}), variable<S>("b", b, gb, {333}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f, .momentum = 0.9f},
                            {.buckets = {.first_bucket_bytes = 4096, .bucket_bytes = 64 * 1024}});
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

}  // namespace strata::conformance
