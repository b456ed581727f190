// The host functions of the kernel layer (strata/kernels) against independent references:
// rounding checked by looking at the neighbouring representable values, sums written as
// naive loops, top-k as a full sort by magnitude. The GPU tests (tests/gpu) compare the
// kernels with these same host functions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/kernels/cast.hpp"
#include "strata/kernels/pack.hpp"
#include "strata/kernels/sparse_rows.hpp"
#include "strata/kernels/top_k.hpp"

using namespace strata;

namespace {

std::vector<float> normal_values(std::size_t n, unsigned seed, float spread = 1.0f) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> v(n);
  for (float& x : v) x = normal(engine);
  return v;
}

/// No representable neighbour of w is closer to `exact` than w, and a tie went to an even
/// mantissa: round to nearest even, checked without any rounding code.
template <class W>
bool is_nearest_even(W w, double exact) {
  const double chosen = static_cast<float>(w);
  if (std::isinf(chosen)) return false;  // the values below stay far from overflow
  for (int step : {-1, 1}) {
    W neighbour;
    neighbour.bits = static_cast<std::uint16_t>(w.bits + step);
    const double other = static_cast<float>(neighbour);
    if (std::isnan(other) || std::isinf(other)) continue;
    const double mine = std::abs(chosen - exact), theirs = std::abs(other - exact);
    if (theirs < mine || (theirs == mine && (w.bits & 1u))) return false;
  }
  return true;
}

}  // namespace

TEMPLATE_TEST_CASE("scaled_narrow rounds value x scale to the nearest 16-bit value", "[kernels][cast]", half, bfloat16) {
  const std::vector<float> values = normal_values(10000, 1, 300.0f);
  const float scale = 0.125f;
  std::vector<TestType> out(values.size());
  kernels::scaled_narrow<TestType>(values, out, scale);
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("value " << values[i]);
    REQUIRE(is_nearest_even(out[i], double(values[i]) * scale));
  }
}

TEST_CASE("scaled_narrow keeps infinities and NaN and overflows to infinity", "[kernels][cast]") {
  const std::vector<float> values = {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 1e6f};
  std::vector<half> out(3);
  kernels::scaled_narrow<half>(values, out, 1.0f);
  CHECK(std::isinf(static_cast<float>(out[0])));
  CHECK(std::isnan(static_cast<float>(out[1])));
  CHECK(static_cast<float>(out[2]) == std::numeric_limits<float>::infinity());
}

TEST_CASE("scaled_widen multiplies the exact 16-bit value", "[kernels][cast]") {
  std::vector<half> in(65536);
  for (std::size_t b = 0; b < in.size(); ++b) in[b].bits = static_cast<std::uint16_t>(b);
  std::vector<float> out(in.size());
  kernels::scaled_widen<half>(in, out, 4.0f);
  for (std::size_t b = 0; b < in.size(); ++b) {
    const int exponent = static_cast<int>((b >> 10) & 0x1f), mantissa = static_cast<int>(b & 0x3ff);
    if (exponent == 0x1f) continue;  // Inf and NaN: covered above
    const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    REQUIRE(out[b] == ((b & 0x8000) ? -4.0 : 4.0) * magnitude);
  }
}

TEST_CASE("accumulate adds the exact value of each element to an fp32 sum", "[kernels][cast]") {
  std::vector<float> sum = {1.5f, -2.0f, 1e-3f};
  const std::vector<half> in = {half(0.25f), half(3.0f), half(65504.0f)};
  kernels::accumulate<half>(in, sum);
  CHECK(sum == std::vector<float>{1.75f, 1.0f, 1e-3f + 65504.0f});
  const std::vector<float> more = {0.5f, 0.5f, 0.5f};
  kernels::accumulate<float>(more, sum);
  CHECK(sum[0] == 2.25f);
  std::vector<float> short_sum(2);
  CHECK_THROWS_WITH(kernels::accumulate<half>(in, short_sum), Catch::Contains("kernels::accumulate"));
}

TEST_CASE("sizes that disagree are rejected with both sizes named", "[kernels]") {
  const std::vector<float> in(4);
  std::vector<half> out(3);
  CHECK_THROWS_WITH(kernels::scaled_narrow<half>(in, out, 1.0f), Catch::Contains("holds 3 elements where 4 are needed"));
}

TEST_CASE("pack lays buffers end to end and unpack restores them", "[kernels][pack]") {
  std::vector<std::vector<float>> buffers = {normal_values(5, 2), {}, normal_values(1024, 3), normal_values(17, 4)};
  std::vector<std::span<float>> spans(buffers.begin(), buffers.end());
  const auto layout = kernels::bucket_parts<float>(spans);
  std::vector<float> expected;
  for (const auto& b : buffers) expected.insert(expected.end(), b.begin(), b.end());
  REQUIRE(kernels::bucket_size<float>(layout) == expected.size());

  std::vector<float> bucket(expected.size());
  kernels::pack<float>(layout, bucket);
  CHECK(bucket == expected);

  const auto original = buffers;
  for (auto& b : buffers) std::ranges::fill(b, 0.0f);
  kernels::unpack<float>(layout, bucket);
  CHECK(buffers == original);
}

TEST_CASE("gather_rows copies the rows at the indices, and an index past the table throws", "[kernels][sparse]") {
  const std::size_t cols = 3;
  const std::vector<float> table = normal_values(10 * cols, 5);
  const std::vector<std::uint32_t> indices = {7, 0, 7, 9};
  std::vector<float> out(indices.size() * cols);
  kernels::gather_rows(table, cols, indices, out);
  for (std::size_t r = 0; r < indices.size(); ++r)
    for (std::size_t c = 0; c < cols; ++c) CHECK(out[r * cols + c] == table[indices[r] * cols + c]);

  const std::vector<std::uint32_t> bad = {2, 10};
  CHECK_THROWS_AS(kernels::gather_rows(table, cols, bad, std::span<float>(out).first(2 * cols)), std::out_of_range);
}

TEST_CASE("scatter_add_rows adds duplicates in input order, one by one into the old value", "[kernels][sparse]") {
  SECTION("random rows with many duplicates equal the naive loop bit for bit") {
    const std::size_t rows = 50, cols = 7, count = 600;
    std::vector<float> table = normal_values(rows * cols, 6), updates = normal_values(count * cols, 7, 100.0f);
    std::vector<std::uint32_t> indices(count);
    std::mt19937 engine(8);
    for (auto& i : indices) i = static_cast<std::uint32_t>(engine() % rows);
    std::vector<float> expected = table;
    for (std::size_t r = 0; r < count; ++r)
      for (std::size_t c = 0; c < cols; ++c) expected[indices[r] * cols + c] += updates[r * cols + c];
    kernels::scatter_add_rows(table, cols, indices, updates);
    CHECK(table == expected);
  }
  SECTION("the order is visible in rounding: ((1 + 1e8) + 1) - 1e8 is 0, not 1") {
    std::vector<float> table = {1.0f};
    const std::vector<float> updates = {1e8f, 1.0f, -1e8f};
    const std::vector<std::uint32_t> indices = {0, 0, 0};
    kernels::scatter_add_rows(table, 1, indices, updates);
    CHECK(table[0] == 0.0f);
  }
}

TEST_CASE("top_k picks the largest magnitudes, ties to the lower index, largest first", "[kernels][topk]") {
  std::mt19937 engine(9);
  std::vector<float> values(5000);
  for (float& x : values) x = 0.5f * static_cast<float>(static_cast<int>(engine() % 41) - 20);  // many ties, both signs
  values[77] = -0.0f;
  std::vector<std::uint32_t> reference(values.size());
  std::iota(reference.begin(), reference.end(), 0u);
  std::ranges::stable_sort(reference, [&](std::uint32_t a, std::uint32_t b) { return std::abs(values[a]) > std::abs(values[b]); });
  std::vector<std::uint64_t> keys;
  for (std::size_t k : {1, 10, 999, 5000}) {
    std::vector<std::uint32_t> chosen(k);
    kernels::top_k(values, chosen, keys);
    CHECK(std::equal(chosen.begin(), chosen.end(), reference.begin()));
  }
}

TEST_CASE("top_k ranks NaN first so that a poisoned gradient is always sent", "[kernels][topk]") {
  std::vector<float> values = {1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -2.0f};
  std::vector<std::uint32_t> chosen(2);
  std::vector<std::uint64_t> keys;
  kernels::top_k(values, chosen, keys);
  CHECK(chosen == std::vector<std::uint32_t>{2, 1});
  std::vector<std::uint32_t> too_many(5);
  CHECK_THROWS_AS(kernels::top_k(values, too_many, keys), std::invalid_argument);
}
