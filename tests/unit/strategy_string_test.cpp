// The canonical string: printing, parsing in any order, round trips over an enumeration of
// policy combinations, and errors that say what was expected where.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/strategy/select.hpp"

using namespace strata;

namespace {

// One token list per category; "" means "not given" (the default applies).
const std::vector<std::vector<std::string>> tokens = {
    {"", "Replicate", "PS<1>", "PS<4>"},
    {"", "Partition<0>", "Partition<1>", "Partition<0,4>", "Partition<1,3>"},
    {"", "AllReduce<Native>", "AllReduce<Ring>", "AllReduce<Tree>", "AllReduce<Hierarchical>"},
    {"", "FP16", "BF16+ErrorFeedback", "Compress<TopK<0.01>>", "TopK<0.25>+ErrorFeedback", "PowerSGD<4>",
     "Compress<PowerSGD<1>,ErrorFeedback>", "Compress<None>"},
    {"", "BSP", "ASP", "SSP<3>", "Consistency<SSP<1>>"},
    {"", "SparseRows", "DenseGradient"},
};

std::vector<std::vector<std::string>> all_combinations() {
  std::vector<std::vector<std::string>> out{{}};
  for (const auto& category : tokens) {
    std::vector<std::vector<std::string>> next;
    for (const auto& prefix : out)
      for (const auto& t : category) {
        auto c = prefix;
        if (!t.empty()) c.push_back(t);
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  return out;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ",") + p;
  return s;
}

bool satisfies_rules(const strategy_descriptor& d) {
  return std::all_of(rules::all.begin(), rules::all.end(), [&](const rules::checked_rule& r) { return r.holds(d); });
}

}  // namespace

TEST_CASE("compiled strategies print their canonical string", "[strategy]") {
  CHECK(strategy_name<Strategy<>>() == "Replicate");
  CHECK(strategy_name<Strategy<Compress<FP16>, AllReduce<Ring>>>() == "Replicate,AllReduce<Ring>,FP16");
  CHECK(strategy_name<Strategy<SparseRows, Consistency<SSP<3>>, Partition<0>, PS<4>>>() ==
        "PS<4>,Partition<0>,SSP<3>,SparseRows");
  CHECK(strategy_name<Strategy<Compress<TopK<0.01>, ErrorFeedback>>>() == "Replicate,TopK<0.01>+ErrorFeedback");
  CHECK(strategy_name<Strategy<Partition<1, 3>, AllReduce<Hierarchical>>>() ==
        "Replicate,Partition<1,3>,AllReduce<Hierarchical>");
  CHECK(strategy_name<Strategy<Compress<FP16>, TensorParallel<1>>>() == "Replicate,TensorParallel<1>,FP16");
  CHECK(parse_strategy("FP16, TensorParallel<1>") == Strategy<Compress<FP16>, TensorParallel<1>>::descriptor);
  CHECK(parse_strategy("WholeTensor") == Strategy<>::descriptor);
  CHECK_THROWS_WITH(parse_strategy("TensorParallel<0>,TensorParallel<1>"), Catch::Contains("a second tensor policy"));
}

TEST_CASE("every enumerated valid combination round-trips, in any order", "[strategy]") {
  int valid = 0, invalid = 0;
  for (auto combination : all_combinations()) {
    const std::string text = join(combination);
    if (text.empty()) continue;
    strategy_descriptor d;
    try {
      d = parse_strategy(text);
    } catch (const strategy_parse_error& e) {
      // Rejected strings are exactly the ones that break a rule; the message names it.
      CHECK(std::string(e.what()).find("breaks rule") != std::string::npos);
      ++invalid;
      continue;
    }
    ++valid;
    INFO(text);
    REQUIRE(satisfies_rules(d));
    const std::string canonical = to_string(d);
    CHECK(parse_strategy(canonical) == d);
    CHECK(to_string(parse_strategy(canonical)) == canonical);
    std::reverse(combination.begin(), combination.end());
    CHECK(parse_strategy(join(combination)) == d);
  }
  CHECK(valid > 300);
  CHECK(invalid > 300);
}

TEST_CASE("parsing a type's canonical string gives back its descriptor", "[strategy]") {
  auto round_trips = []<class S>(std::type_identity<S>) { return parse_strategy(strategy_name<S>()) == S::descriptor; };
  CHECK(round_trips(std::type_identity<Strategy<>>{}));
  CHECK(round_trips(std::type_identity<Strategy<PS<4>, Partition<0>, Consistency<SSP<3>>, SparseRows>>{}));
  CHECK(round_trips(std::type_identity<Strategy<Compress<PowerSGD<4>, ErrorFeedback>, AllReduce<Tree>>>{}));
  CHECK(round_trips(std::type_identity<Strategy<PS<2>, Partition<1, 2>, Consistency<ASP>>>{}));
  CHECK(round_trips(std::type_identity<Strategy<Compress<TopK<0.001>>>>{}));
}

TEST_CASE("malformed strings say what was expected and where", "[strategy]") {
  struct bad {
    std::string text;
    std::size_t column;
    std::string says;
  };
  const std::vector<bad> cases = {
      {"", 1, "expected a policy, found the end of the string"},
      {"Replicate,Foo", 11, "found 'Foo'"},
      {"Replicate;PS<2>", 10, "expected ',', found ';'"},
      {"AllReduce<Ring", 15, "expected '>', found the end of the string"},
      {"AllReduce<Star>", 11, "expected an all-reduce algorithm"},
      {"PS<four>", 4, "expected a number"},
      {"PS<2>,Replicate", 7, "a second placement policy; the first is at column 1"},
      {"TopK<1.5>", 6, "Ratio must lie in (0, 1]"},
      {"FP16+Magic", 6, "expected ErrorFeedback or NoFeedback"},
      {"Replicate,SSP<2>", 1, "breaks rule StaleConsistencyNeedsParameterServer"},
      {"PS<4>", 1, "breaks rule ShardedParameterServerNeedsPartition"},
      {"Compress<None,ErrorFeedback>", 15, "loses nothing to feed back"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    try {
      parse_strategy(c.text);
      FAIL("parsed, but should not have");
    } catch (const strategy_parse_error& e) {
      CHECK(e.column() + 1 == c.column);
      CHECK_THAT(e.what(), Catch::Contains(c.says));
    }
  }
}

TEST_CASE("errors quote whole UTF-8 characters and a bounded excerpt of long input", "[strategy]") {
  // A two-byte character where a policy name was expected: quoted whole, not its first byte.
  try {
    parse_strategy("\xC3\xA9t\xC3\xA9");
    FAIL("accepted");
  } catch (const strategy_parse_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("found '\xC3\xA9'"));
  }
  // 100 kB of input is not echoed back; the excerpt ends on a character boundary.
  std::string huge;
  for (int i = 0; i < 50'000; ++i) huge += "\xC3\xA9";
  try {
    parse_strategy(huge);
    FAIL("accepted");
  } catch (const strategy_parse_error& e) {
    const std::string message = e.what();
    CHECK(message.size() < 400);
    CHECK_THAT(message, Catch::Contains("... (100000 bytes)"));
    CHECK(message.find("\xC3...") == std::string::npos);
  }
  CHECK(detail::excerpt("abc", 2) == "ab... (3 bytes)");
  CHECK(detail::excerpt("\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9... (4 bytes)");
  CHECK(detail::excerpt("short") == "short");
}

TEST_CASE("visit_strategy picks the compiled candidate a string names", "[strategy]") {
  using Ring = Strategy<AllReduce<strata::Ring>>;
  using Native = Strategy<>;
  std::string picked;
  visit_strategy<Native, Ring>("AllReduce<Ring>", [&]<class S>(std::type_identity<S>) { picked = strategy_name<S>(); });
  CHECK(picked == "Replicate,AllReduce<Ring>");
  auto visit_tree = [] { visit_strategy<Native, Ring>("AllReduce<Tree>", [](auto) {}); };
  CHECK_THROWS_WITH(visit_tree(),
                    Catch::Contains("not among the strategies this program was compiled with: Replicate, "
                                    "Replicate,AllReduce<Ring>"));
}
