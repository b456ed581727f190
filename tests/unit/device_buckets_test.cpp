// What the nccl executor decides without a device: buckets of variables whose element
// types and placements differ, how a PS bucket is sliced among the ranks, and the checks
// of a device variable's declaration.
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

/// A declaration records only a pointer and a size, so host memory can stand in for a GPU's.
template <class T>
device_span<T> stand_in(std::vector<T>& v) {
  return {v.data(), v.size()};
}

/// Bindings that carry only what planning reads: type, size and placement.
std::vector<device_variable_binding> declared(const std::vector<element_type>& types, const std::vector<std::size_t>& elements,
                                              const std::vector<bool>& sharded = {}) {
  std::vector<device_variable_binding> variables;
  for (std::size_t i = 0; i < types.size(); ++i)
    variables.push_back({"v" + std::to_string(i), {elements[i]}, nullptr, nullptr, elements[i], types[i], types[i],
                         !sharded.empty() && sharded[i]});
  return variables;
}

}  // namespace

TEST_CASE("device buckets hold one element type, planned with that type's size", "[device_buckets]") {
  using enum element_type;
  //                                    0     1     2     3     4     5
  const std::vector<element_type> types = {fp32, fp16, fp32, bf16, fp16, fp32};
  const std::vector<std::size_t> elements = {10, 40, 30, 8, 10, 20};
  // Each type's first bucket closes at 64 bytes: fp32 {5} (80 B), then {2, 0}; fp16 {4, 1}
  // (100 B); bf16 {3} (16 B).
  const auto buckets = plan_device_buckets(declared(types, elements), {.first_bucket_bytes = 64, .bucket_bytes = 1000});
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
  const auto buckets = plan_device_buckets(declared(types, elements), {.first_bucket_bytes = 4, .bucket_bytes = 16});
  std::vector<int> seen(types.size(), 0);
  for (const auto& b : buckets)
    for (std::size_t m : b.layout.members) ++seen[m];
  CHECK(seen == std::vector<int>(types.size(), 1));
  CHECK(plan_device_buckets({}, {}).empty());
}

TEST_CASE("PS variables get buckets of their own, never shared with replicated ones", "[device_buckets]") {
  using enum element_type;
  //                                         0     1     2     3     4
  const std::vector<element_type> types = {fp32, fp32, fp32, fp16, fp16};
  const std::vector<std::size_t> elements = {10, 10, 10, 10, 10};
  const std::vector<bool> sharded = {true, false, true, false, true};
  const auto buckets = plan_device_buckets(declared(types, elements, sharded), {.first_bucket_bytes = 1000, .bucket_bytes = 1000});
  REQUIRE(buckets.size() == 4);
  for (const auto& b : buckets)
    for (std::size_t m : b.layout.members) CHECK(sharded[m] == b.sharded);
  // Still in backward order: the bucket completed by the latest-declared member first.
  CHECK(members_of(buckets[0]) == std::vector<std::size_t>{4});
  CHECK(members_of(buckets[1]) == std::vector<std::size_t>{3});
  CHECK(members_of(buckets[2]) == std::vector<std::size_t>{1});
  CHECK_FALSE(buckets[2].sharded);
  CHECK(members_of(buckets[3]) == std::vector<std::size_t>{2, 0});  // complete once 0 is
  CHECK(buckets[3].sharded);
}

TEST_CASE("compressed fp32 variables get buckets of their wire type, planned with its size", "[device_buckets]") {
  using HalfWire = Strategy<Compress<FP16>>;
  std::vector<float> param(12), grad(12);
  const device_variable_binding compressed = device_variable<HalfWire>("w", stand_in(param), stand_in(grad), {12});
  CHECK(compressed.type == element_type::fp32);
  CHECK(compressed.wire == element_type::fp16);
  const device_variable_binding plain = device_variable<Strategy<>>("v", stand_in(param), stand_in(grad), {12});
  CHECK(plain.wire == element_type::fp32);

  std::vector<device_variable_binding> variables = declared({element_type::fp32, element_type::fp32, element_type::fp32},
                                                            {16, 16, 16});
  variables[0].wire = variables[2].wire = element_type::bf16;
  // 32 bytes close a bucket: two bf16 variables of 16 elements share one, the fp32 one fills its own.
  const auto buckets = plan_device_buckets(variables, {.first_bucket_bytes = 64, .bucket_bytes = 64});
  REQUIRE(buckets.size() == 2);
  CHECK(members_of(buckets[0]) == std::vector<std::size_t>{1});
  CHECK(buckets[0].wire == element_type::fp32);
  CHECK(members_of(buckets[1]) == std::vector<std::size_t>{2, 0});
  CHECK(buckets[1].wire == element_type::bf16);
  CHECK(buckets[1].type == element_type::fp32);
}

TEST_CASE("a PS bucket is padded to equal, aligned slices, one per rank", "[device_buckets]") {
  using sync::slice_alignment;
  for (int ranks : {1, 2, 3, 4, 8})
    for (std::size_t elements : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{1000}, std::size_t{1} << 20}) {
      const sync::bucket_slices s = sync::slice_bucket(elements, ranks);
      INFO(elements << " elements over " << ranks << " ranks");
      CHECK(s.slice % slice_alignment == 0);
      CHECK(s.padded == s.slice * static_cast<std::size_t>(ranks));
      CHECK(s.padded >= elements);
      CHECK(s.padded - elements < slice_alignment * static_cast<std::size_t>(ranks));  // the least padding that aligns
      CHECK(s.offset(ranks - 1) + s.slice == s.padded);
    }
  // Each rank owns, and keeps optimizer state for, 1/P of a large bucket.
  CHECK(sync::slice_bucket(std::size_t{1} << 20, 4).slice == (std::size_t{1} << 18));
  CHECK(sync::slice_bucket(1000, 3).slice == 384);  // 334 rounded up to 6 x 64
}

TEST_CASE("a device variable's buffers must hold its shape", "[device_buckets]") {
  using Dense = Strategy<Replicate, AllReduce<Native>>;
  std::vector<half> param(12), grad(12), short_grad(11);
  const device_variable_binding v = device_variable<Dense>("fc1.weight", stand_in(param), stand_in(grad), {3, 4});
  CHECK(v.type == element_type::fp16);
  CHECK(v.elements == 12);
  CHECK(v.bytes() == 24);
  CHECK(v.shape == std::vector<std::size_t>{3, 4});
  CHECK(v.param == param.data());
  try {
    device_variable<Dense>("fc1.weight", stand_in(param), stand_in(short_grad), {3, 4});
    FAIL("no binding_error");
  } catch (const binding_error& e) {
    const std::string message = e.what();
    CHECK(message.find("\"fc1.weight\"") != std::string::npos);
    CHECK(message.find("gradient buffer holds 11 fp16 elements but shape [3, 4] needs 12") != std::string::npos);
  }
}

// The strategies the nccl executor runs (checked at compile time).
static_assert(NcclStrategy<Strategy<Replicate, AllReduce<Native>>>);
static_assert(NcclStrategy<Strategy<>>);
static_assert(NcclStrategy<Strategy<PS<1>>>);
static_assert(NcclStrategy<Strategy<PS<4>, Partition<1>>>);
static_assert(NcclStrategy<Strategy<PS<2>, Partition<0>, Consistency<BSP>>>);
static_assert(!NcclStrategy<Strategy<AllReduce<Ring>>>);
static_assert(!NcclStrategy<Strategy<PS<1>, Compress<FP16>>>);
static_assert(!NcclStrategy<Strategy<PS<2>, Partition<0>, Consistency<SSP<3>>>>);
static_assert(!NcclStrategy<Strategy<PS<1>, Consistency<ASP>>>);
static_assert(!NcclStrategy<Strategy<SparseRows>>);
static_assert(!NcclStrategy<Strategy<PS<2>, Partition<0>, SparseRows>>);
static_assert(!NcclStrategy<Strategy<Partition<0>>>);
static_assert(element_type_of<bfloat16>() == element_type::bf16);
static_assert(element_bytes(element_type::fp32) == 4);
static_assert(NcclStrategy<Strategy<Compress<FP16>>>);
static_assert(NcclStrategy<Strategy<AllReduce<Native>, Compress<BF16>>>);
static_assert(!NcclStrategy<Strategy<Compress<TopK<0.01>>>>);
static_assert(!NcclStrategy<Strategy<Compress<FP16, ErrorFeedback>>>);
