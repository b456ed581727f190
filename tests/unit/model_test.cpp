#include <vector>

#include <catch2/catch.hpp>

#include "strata/model/model.hpp"

using namespace strata;
using Dense = Strategy<AllReduce<Ring>>;
using Plain = Strategy<>;

TEST_CASE("a model groups variables by strategy and keeps declaration order", "[model]") {
  std::vector<float> w(12), gw(12), b(3), gb(3), v(4), gv(4);
  auto m = make_model(variable<Dense>("w", w, gw, {3, 4}), variable<Plain>("b", b, gb, {3}),
                      variable<Dense>("v", v, gv, {4}));
  static_assert(decltype(m)::strategy_count == 2);
  CHECK(m.variables().size() == 3);
  CHECK(m.id("b").index == 1);
  CHECK(m.ids_of<Dense>() == std::vector<variable_id>{{0}, {2}});
  CHECK(m[m.id("w")].shape == std::vector<std::size_t>{3, 4});
  CHECK(m[m.id("w")].strategy == "Replicate,AllReduce<Ring>");
}

TEST_CASE("binding a buffer of the wrong size names the variable", "[model]") {
  std::vector<float> w(12), g(11);
  CHECK_THROWS_AS(variable<Dense>("fc1.weight", w, g, {3, 4}), binding_error);
  CHECK_THROWS_WITH(variable<Dense>("fc1.weight", w, g, {3, 4}),
                    Catch::Contains("variable \"fc1.weight\": the gradient buffer holds 11 floats but shape [3, 4] needs 12"));
  CHECK_THROWS_WITH(variable<Dense>("fc2.weight", w, w, {5, 2}), Catch::Contains("fc2.weight"));
}

TEST_CASE("two variables with one name are refused", "[model]") {
  std::vector<float> w(4), g(4);
  CHECK_THROWS_WITH(make_model(variable<Dense>("w", w, g, {4}), variable<Plain>("w", w, g, {2, 2})),
                    Catch::Contains("variable \"w\" is declared twice"));
  model<Dense> m;
  m.add(variable<Dense>("layer0", w, g, {4}));
  CHECK_THROWS_AS(m.add(variable<Dense>("layer0", w, g, {4})), binding_error);
  CHECK_THROWS_WITH(m.id("layer1"), Catch::Contains("no variable called \"layer1\""));
}

TEST_CASE("shapes take extents of any integer type, and refuse negative ones", "[model]") {
  std::vector<float> w(12), g(12);
  const int rows = 3, cols = 4;  // a std::size_t shape would narrow these
  const long negative = -3;
  CHECK(variable<Dense>("w", w, g, {rows, cols}).binding.shape == std::vector<std::size_t>{3, 4});
  CHECK(variable<Dense>("w", w, g, {12u}).binding.shape == std::vector<std::size_t>{12});
  CHECK_THROWS_WITH(variable<Dense>("w", w, g, {negative, -4L}),
                    Catch::Contains("variable \"w\": extent 0 of its shape is -3; extents must be 0 or more"));
}
