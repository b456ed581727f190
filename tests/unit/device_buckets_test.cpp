// What the nccl executor decides without a device: buckets of variables whose element
// types differ, and the checks of a device variable's declaration.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/model/device_variable.hpp"
#include "strata/policy/policies.hpp"
#include "strata/sync/device_buckets.hpp"

using namespace strata;
using sync::plan_device_buckets;

namespace {

std::vector<std::size_t> members_of(const sync::typed_bucket& b) { return b.layout.members; }

}  // namespace

TEST_CASE("device buckets hold one element type, planned with that type's size", "[device_buckets]") {
  using enum element_type;
  //                                    0     1     2     3     4     5
  const std::vector<element_type> types = {fp32, fp16, fp32, bf16, fp16, fp32};
  const std::vector<std::size_t> elements = {10, 40, 30, 8, 10, 20};
  // Each type's first bucket closes at 64 bytes: fp32 {5} (80 B), then {2, 0}; fp16 {4, 1}
  // (100 B); bf16 {3} (16 B).
  const auto buckets = plan_device_buckets(types, elements, {.first_bucket_bytes = 64, .bucket_bytes = 1000});
  REQUIRE(buckets.size() == 4);
  for (const auto& b : buckets)
    for (std::size_t m : b.layout.members) CHECK(types[m] == b.type);
  // Launch order: by the first-declared member, latest first (backward completes it first).
  CHECK(members_of(buckets[0]) == std::vector<std::size_t>{5});
  CHECK(members_of(buckets[1]) == std::vector<std::size_t>{3});
  CHECK(members_of(buckets[2]) == std::vector<std::size_t>{4, 1});
  CHECK(members_of(buckets[3]) == std::vector<std::size_t>{2, 0});
  CHECK(buckets[2].layout.offsets == std::vector<std::size_t>{0, 10});
  CHECK(buckets[2].layout.elements == 50);
  CHECK(buckets[3].type == fp32);
}

TEST_CASE("every device variable lands in exactly one bucket", "[device_buckets]") {
  using enum element_type;
  const std::vector<element_type> types = {bf16, bf16, fp32, fp16, fp32, bf16, fp16};
  const std::vector<std::size_t> elements = {3, 1000, 7, 7, 1, 2, 500};
  const auto buckets = plan_device_buckets(types, elements, {.first_bucket_bytes = 4, .bucket_bytes = 16});
  std::vector<int> seen(types.size(), 0);
  for (const auto& b : buckets)
    for (std::size_t m : b.layout.members) ++seen[m];
  CHECK(seen == std::vector<int>(types.size(), 1));
  CHECK(plan_device_buckets({}, {}, {}).empty());
}

TEST_CASE("a device variable's buffers must hold its shape", "[device_buckets]") {
  using Dense = Strategy<Replicate, AllReduce<Native>>;
  std::vector<half> param(12), grad(12), short_grad(11);
  const device_variable_binding v = device_variable<Dense>("fc1.weight", std::span<half>(param), std::span<half>(grad), {3, 4});
  CHECK(v.type == element_type::fp16);
  CHECK(v.elements == 12);
  CHECK(v.bytes() == 24);
  CHECK(v.shape == std::vector<std::size_t>{3, 4});
  CHECK(v.param == param.data());
  try {
    device_variable<Dense>("fc1.weight", std::span<half>(param), std::span<half>(short_grad), {3, 4});
    FAIL("no binding_error");
  } catch (const binding_error& e) {
    const std::string message = e.what();
    CHECK(message.find("\"fc1.weight\"") != std::string::npos);
    CHECK(message.find("gradient buffer holds 11 fp16 elements but shape [3, 4] needs 12") != std::string::npos);
  }
}

// The strategies the nccl executor runs (checked at compile time).
static_assert(NcclDataParallelStrategy<Strategy<Replicate, AllReduce<Native>>>);
static_assert(NcclDataParallelStrategy<Strategy<>>);
static_assert(!NcclDataParallelStrategy<Strategy<AllReduce<Ring>>>);
static_assert(!NcclDataParallelStrategy<Strategy<Compress<FP16>>>);
static_assert(!NcclDataParallelStrategy<Strategy<PS<1>>>);
static_assert(!NcclDataParallelStrategy<Strategy<SparseRows>>);
static_assert(!NcclDataParallelStrategy<Strategy<Partition<0>>>);
static_assert(element_type_of<bfloat16>() == element_type::bf16);
static_assert(element_bytes(element_type::fp32) == 4);
