// The mesh's arithmetic and the pipeline schedules, without communication.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"
#include "strata/parallel/tensor_parallel.hpp"

using namespace strata;

TEST_CASE("a mesh's text names the axes; a left-out dp takes the ranks the others leave", "[mesh]") {
  CHECK(parse_mesh("dp=2,tp=2,pp=1", 4) == mesh_shape{2, 2, 1});
  CHECK(parse_mesh(" pp=2 , tp=2 ", 4) == mesh_shape{1, 2, 2});
  CHECK(parse_mesh("tp=2", 8) == mesh_shape{4, 2, 1});
  CHECK(parse_mesh("pp=4", 4) == mesh_shape{1, 1, 4});
  CHECK(parse_mesh("", 3) == mesh_shape{3, 1, 1});
  CHECK(to_string(parse_mesh("dp=2,pp=2", 4)) == "dp=2,tp=1,pp=2");
}

TEST_CASE("a mesh that cannot be is refused, naming what to change", "[mesh]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(parse_mesh("dp=3,tp=2", 4), Contains("dp=3,tp=2,pp=1 makes 6 ranks, but the job has 4"));
  CHECK_THROWS_WITH(parse_mesh("tp=3", 4), Contains("makes 3 ranks, but the job has 4"));
  CHECK_THROWS_WITH(parse_mesh("ep=2", 2), Contains("\"ep\" is not an axis; the axes are dp (data), tp (tensor)"));
  CHECK_THROWS_WITH(parse_mesh("dp=0", 1), Contains("dp=0 is not a positive number of ranks"));
  CHECK_THROWS_WITH(parse_mesh("tp=-2", 2), Contains("tp=-2 is not a positive number"));
  CHECK_THROWS_WITH(parse_mesh("tp=2x", 2), Contains("tp=2x is not a positive number"));
  CHECK_THROWS_WITH(parse_mesh("tp=2,tp=2", 4), Contains("tp is given twice"));
  CHECK_THROWS_WITH(parse_mesh("tp2", 2), Contains("\"tp2\" is not axis=count"));
  // Sizes that overflow int: refused by name, never wrapped into the job's size.
  CHECK_THROWS_WITH(parse_mesh("tp=99999999999", 4), Contains("tp=99999999999 is not a positive number of ranks (it is too large)"));
  CHECK_THROWS_WITH(parse_mesh("tp=65536", 4), Contains("tp=65536 is more ranks than the job has (4)"));
  CHECK_THROWS_WITH(parse_mesh("dp=2,tp=2,pp=2", 4), Contains("makes 8 ranks, but the job has 4"));
  // 65536 * 65536 wraps to 0 in int: a user-built shape is multiplied in 64 bits, saturating.
  CHECK(mesh_shape{65536, 65536, 1}.ranks() == std::int64_t{1} << 32);
  CHECK(mesh_shape{2147483647, 2147483647, 2147483647}.ranks() == INT64_MAX);
}

TEST_CASE("ranks lie tensor fastest, then data, then pipeline; coordinates and ranks invert each other", "[mesh]") {
  const mesh_shape s{2, 2, 3};
  CHECK(s.coordinates(0) == mesh_coordinates{0, 0, 0});
  CHECK(s.coordinates(1) == mesh_coordinates{0, 1, 0});  // the tensor group's neighbour
  CHECK(s.coordinates(2) == mesh_coordinates{1, 0, 0});
  CHECK(s.coordinates(4) == mesh_coordinates{0, 0, 1});
  for (int r = 0; r < s.ranks(); ++r) CHECK(s.rank(s.coordinates(r)) == r);
}

TEST_CASE("a split dimension is shared evenly or refused", "[tensor_parallel]") {
  CHECK(tensor_parallel::shard_of(32, 4, 3, "w").begin == 24);
  CHECK(tensor_parallel::shard_of(32, 4, 3, "w").count == 8);
  CHECK_THROWS_WITH(tensor_parallel::shard_of(30, 4, 0, "fc1's output"),
                    Catch::Contains("fc1's output has 30 elements along its split dimension, which 4 tensor-parallel ranks "
                                    "cannot share evenly"));
}

namespace {
using pipeline::pass;

/// Micro-batches forwarded and not yet backwarded, at most, along a stage's order; also
/// checks each micro-batch is forwarded once before it is backwarded once.
int most_in_flight(const std::vector<pipeline::work>& order, int micro_batches) {
  std::vector<int> forwarded(static_cast<std::size_t>(micro_batches)), backwarded(forwarded);
  int now = 0, most = 0;
  for (const pipeline::work& w : order) {
    const auto i = static_cast<std::size_t>(w.micro_batch);
    if (w.kind == pass::forward) {
      REQUIRE(forwarded[i]++ == 0);
      most = std::max(most, ++now);
    } else {
      REQUIRE(forwarded[i] == 1);
      REQUIRE(backwarded[i]++ == 0);
      --now;
    }
  }
  CHECK(std::ranges::all_of(backwarded, [](int n) { return n == 1; }));
  return most;
}
}  // namespace

TEST_CASE("GPipe holds every micro-batch; 1F1B at most the stages from here to the last", "[pipeline]") {
  for (int stages : {1, 2, 4})
    for (int micro : {1, 3, 4, 8})
      for (int s = 0; s < stages; ++s) {
        CAPTURE(stages, micro, s);
        CHECK(most_in_flight(pipeline::order(pipeline::gpipe{}, stages, s, micro), micro) == micro);
        CHECK(most_in_flight(pipeline::order(pipeline::one_f_one_b{}, stages, s, micro), micro) ==
              std::min(stages - s, micro));
      }
  // Stage 0 of 4 with 8 micro-batches: three forwards ahead, then one forward and one backward in turn.
  const std::vector<pipeline::work> order = pipeline::order(pipeline::one_f_one_b{}, 4, 0, 8);
  REQUIRE(order.size() == 16);
  CHECK(order[2] == pipeline::work{pass::forward, 2});
  CHECK(order[3] == pipeline::work{pass::forward, 3});
  CHECK(order[4] == pipeline::work{pass::backward, 0});
  CHECK(order[5] == pipeline::work{pass::forward, 4});
  CHECK(order.back() == pipeline::work{pass::backward, 7});
}

TEST_CASE("the ideal bubble is (p-1)/(m+p-1), and schedules refuse impossible shapes", "[pipeline]") {
  CHECK(pipeline::ideal_bubble(1, 8) == 0.0);
  CHECK(pipeline::ideal_bubble(4, 8) == Approx(3.0 / 11.0));
  CHECK_THROWS_WITH(pipeline::order(pipeline::gpipe{}, 2, 2, 4), Catch::Contains("stage 2 of 2 stages does not exist"));
  CHECK_THROWS_WITH(pipeline::order(pipeline::one_f_one_b{}, 2, 0, 0), Catch::Contains("0 micro-batches"));
}

TEST_CASE("STRATA_DEBUG says detail or off; a misspelling is refused, not ignored", "[debug]") {
  CHECK_FALSE(debug_detail_from(""));
  CHECK_FALSE(debug_detail_from("off"));
  CHECK(debug_detail_from("detail"));
  CHECK_THROWS_WITH(debug_detail_from("DETAIL"), Catch::Contains("say \"detail\" for the per-step checks"));
}

TEST_CASE("the detail checks' fingerprint tells values apart by one bit", "[debug]") {
  const std::vector<float> a = {1.0f, -2.5f, 3.0f};
  std::vector<float> b = a;
  CHECK(fingerprint_of(a) == fingerprint_of(b));
  b[2] = std::nextafter(b[2], 4.0f);
  CHECK(fingerprint_of(a) != fingerprint_of(b));
}
