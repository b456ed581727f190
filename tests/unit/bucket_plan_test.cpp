#include <vector>

#include <catch2/catch.hpp>

#include "strata/sync/bucket_plan.hpp"

using strata::sync::plan_buckets;

TEST_CASE("buckets take variables in reverse order, the first one small", "[buckets]") {
  const std::vector<std::size_t> elements = {100, 50, 30, 20, 10};  // floats: 400, 200, 120, 80, 40 bytes
  const auto buckets = plan_buckets(elements, 4, {.first_bucket_bytes = 100, .bucket_bytes = 300});
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].members == std::vector<std::size_t>{4, 3});  // 40 + 80 >= 100
  CHECK(buckets[1].members == std::vector<std::size_t>{2, 1});  // 120 + 200 >= 300
  CHECK(buckets[2].members == std::vector<std::size_t>{0});
  CHECK(buckets[0].offsets == std::vector<std::size_t>{0, 10});
  CHECK(buckets[1].elements == 80);
}

TEST_CASE("a large variable closes its bucket; every variable lands exactly once", "[buckets]") {
  const std::vector<std::size_t> elements = {1, 1000, 1, 1, 5000, 2};
  const auto buckets = plan_buckets(elements, 4, {.first_bucket_bytes = 8, .bucket_bytes = 1000});
  std::vector<int> seen(elements.size(), 0);
  std::size_t total = 0;
  for (const auto& b : buckets) {
    for (std::size_t k : b.members) ++seen[k];
    total += b.elements;
  }
  CHECK(seen == std::vector<int>(elements.size(), 1));
  CHECK(total == 6005);
  CHECK(buckets[1].members == std::vector<std::size_t>{4});  // 5000 floats alone
}

TEST_CASE("no variables, no buckets", "[buckets]") { CHECK(plan_buckets({}, 4, {}).empty()); }
