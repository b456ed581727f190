// The lanes' conversions (numeric/lanes.hpp) against the element conversions of half and
// bfloat16, bit for bit: every 16-bit pattern widened, specials and random floats rounded.
// Built twice: in unit_tests for the compilers' default target (4 lanes, halves converted
// lane by lane), and in native_tests for this machine's CPU (8 lanes, F16C where it has it).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/numeric/lanes.hpp"

using namespace strata;

namespace {

/// Floats that probe rounding: zeros, subnormals of both types, ties, the largest finite
/// values and past them, infinities; then random floats of every magnitude.
std::vector<float> probe_floats() {
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,         -0.0f,           0x1p-24f,          0x1p-25f,         0x1.8p-25f,  0x1p-14f,
                          1.0f,         1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 0x1p-9f, 65504.0f,
                          65519.99f,    65520.0f,        -65520.0f,         inf,              -inf,        0x1p-130f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()};
  std::mt19937 engine(11);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 20000; ++i) {
    const float f = std::bit_cast<float>(bits(engine));
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

template <class W>
void widens_every_pattern_as_the_element_conversion() {
  std::vector<W> all(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) all[b].bits = static_cast<std::uint16_t>(b);
  for (std::size_t k = 0; k < all.size(); k += lanes::width) {
    const lanes::floats v = lanes::widen<W>(lanes::load(all.data() + k));
    for (std::size_t j = 0; j < lanes::width; ++j) {
      const float expected = static_cast<float>(all[k + j]);
      if (std::isnan(expected)) REQUIRE(std::isnan(v[j]));
      else REQUIRE(std::bit_cast<std::uint32_t>(v[j]) == std::bit_cast<std::uint32_t>(expected));
    }
  }
}

template <class W>
void narrows_as_the_element_conversion() {
  std::vector<float> values = probe_floats();
  values.resize(values.size() / lanes::width * lanes::width);
  std::vector<W> out(values.size());
  for (std::size_t k = 0; k < values.size(); k += lanes::width)
    lanes::store(lanes::narrow<W>(lanes::load(values.data() + k)), out.data() + k);
  for (std::size_t k = 0; k < values.size(); ++k) {
    INFO("value " << values[k]);
    REQUIRE(out[k].bits == W(values[k]).bits);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  lanes::floats v = lanes::load(values.data());
  v[1] = nan;
  W w[lanes::width];
  lanes::store(lanes::narrow<W>(v), w);
  CHECK(std::isnan(static_cast<float>(w[1])));
}

}  // namespace

TEMPLATE_TEST_CASE("lanes widen every 16-bit pattern as the element conversion does", "[lanes]", half, bfloat16) {
  widens_every_pattern_as_the_element_conversion<TestType>();
}

TEMPLATE_TEST_CASE("lanes round floats to a 16-bit type as the element conversion does", "[lanes]", half, bfloat16) {
  narrows_as_the_element_conversion<TestType>();
}

TEST_CASE("lanes::for_each_step visits every element once, the tail without touching beyond", "[lanes]") {
  for (std::size_t n = 0; n <= 3 * lanes::width + 1; ++n) {
    std::vector<float> in(n + lanes::width, 1.0f), out(n + lanes::width, -1.0f);
    for (std::size_t k = 0; k < n; ++k) in[k] = static_cast<float>(k);
    const bool flagged = lanes::for_each_step(n, [&](std::size_t k, auto m) {
      lanes::store(lanes::load(in.data() + k, m) * 2.0f, out.data() + k, m);
      return lanes::nonfinite(lanes::load(in.data() + k, m));
    });
    CHECK_FALSE(flagged);
    for (std::size_t k = 0; k < n; ++k) REQUIRE(out[k] == 2.0f * static_cast<float>(k));
    for (std::size_t k = n; k < out.size(); ++k) REQUIRE(out[k] == -1.0f);  // untouched
  }
}

TEST_CASE("lanes flag NaN and infinities, in a full step and in a tail", "[lanes]") {
  const std::size_t n = 2 * lanes::width + 1;
  for (const float special : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN()})
    for (const std::size_t at : {std::size_t{0}, lanes::width + 1, n - 1}) {
      std::vector<float> v(n, 3.0f);
      v[at] = special;
      CHECK(lanes::for_each_step(n, [&](std::size_t k, auto m) {
        return lanes::nonfinite(lanes::load(v.data() + k, m));
      }));
    }
  std::vector<float> finite = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 0x1p-149f};
  CHECK_FALSE(lanes::for_each_step(finite.size(), [&](std::size_t k, auto m) {
    return lanes::nonfinite(lanes::load(finite.data() + k, m));
  }));
}

TEMPLATE_TEST_CASE("lanes::add sums 16-bit values rounded once, as their + does, in place too", "[lanes]", half,
                   bfloat16) {
  const std::vector<float> floats = probe_floats();
  const std::size_t n = 2 * 4096 + 3;  // full steps and a tail
  std::vector<TestType> a(n), b(n), sum(n);
  for (std::size_t k = 0; k < n; ++k) {
    a[k] = TestType(floats[k % floats.size()] * 1e-3f);
    b[k] = TestType(floats[(7 * k + 3) % floats.size()] * 1e-3f);
  }
  lanes::add(a.data(), b.data(), sum.data(), n);
  for (std::size_t k = 0; k < n; ++k) {
    const TestType expected = a[k] + b[k];
    if (std::isnan(static_cast<float>(expected))) REQUIRE(std::isnan(static_cast<float>(sum[k])));
    else REQUIRE(sum[k].bits == expected.bits);
  }
  lanes::add(a.data(), b.data(), a.data(), n);  // into one of its operands, as the all-reduces do
  for (std::size_t k = 0; k < n; ++k)
    if (!std::isnan(static_cast<float>(sum[k]))) REQUIRE(a[k].bits == sum[k].bits);
}
