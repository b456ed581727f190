// The compile-time rules (the ObeysEveryRule concept) and the run-time ones (rules::all, which
// the strategy-string parser applies) must accept exactly the same strategies. Every
// descriptor of the strategy-string enumeration is turned into a type and judged both ways.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "strata/strategy/select.hpp"

using namespace strata;

namespace {

template <strategy_descriptor D>
struct described {
  static constexpr strategy_descriptor descriptor = D;
};

constexpr strategy_descriptor placements[] = {
    {.placement = placement_kind::replicate}, {.placement = placement_kind::ps, .ps_shards = 1},
    {.placement = placement_kind::ps, .ps_shards = 4}};
constexpr std::pair<int, int> partitions[] = {{-1, 0}, {0, 0}, {1, 0}, {0, 4}, {1, 3}};  // axis, shards
constexpr collective_kind collectives[] = {collective_kind::none, collective_kind::native, collective_kind::ring,
                                           collective_kind::tree, collective_kind::hierarchical};
struct codec_choice {
  codec_kind codec;
  double topk_ratio;
  int powersgd_rank;
  bool error_feedback;
};
constexpr codec_choice codecs[] = {{codec_kind::none, 0, 0, false},     {codec_kind::fp16, 0, 0, false},
                                   {codec_kind::bf16, 0, 0, true},      {codec_kind::topk, 0.01, 0, false},
                                   {codec_kind::topk, 0.25, 0, true},   {codec_kind::powersgd, 0, 4, false},
                                   {codec_kind::powersgd, 0, 1, true}};
constexpr std::pair<consistency_kind, int> consistencies[] = {
    {consistency_kind::bsp, 0}, {consistency_kind::asp, 0}, {consistency_kind::ssp, 3}, {consistency_kind::ssp, 1}};

// (sparse rows, tensor axis): the tensor-parallel rules concern only these two and the placement.
constexpr std::pair<bool, int> gradients[] = {{false, -1}, {true, -1}, {false, 1}, {true, 0}, {true, 1}};

constexpr std::size_t count = std::size(placements) * std::size(partitions) * std::size(collectives) *
                              std::size(codecs) * std::size(consistencies) * std::size(gradients);

constexpr std::array<strategy_descriptor, count> enumerated = [] {
  std::array<strategy_descriptor, count> out{};
  std::size_t i = 0;
  for (strategy_descriptor d : placements)
    for (auto [axis, shards] : partitions)
      for (collective_kind collective : collectives)
        for (codec_choice c : codecs)
          for (auto [consistency, staleness] : consistencies)
            for (auto [sparse, tensor_axis] : gradients) {
              d.partition_axis = axis;
              d.partition_shards = shards;
              d.collective = collective;
              d.codec = c.codec;
              d.topk_ratio = c.topk_ratio;
              d.powersgd_rank = c.powersgd_rank;
              d.error_feedback = c.error_feedback;
              d.consistency = consistency;
              d.staleness = staleness;
              d.sparse_rows = sparse;
              d.tensor_axis = tensor_axis;
              out[i++] = d;
            }
  return out;
}();

/// Whether the concept accepts each enumerated descriptor.
template <std::size_t... I>
constexpr std::array<bool, count> compile_time_verdicts(std::index_sequence<I...>) {
  return {ObeysEveryRule<described<enumerated[I]>>...};
}
constexpr std::array<bool, count> accepted_at_compile_time = compile_time_verdicts(std::make_index_sequence<count>());

}  // namespace

TEST_CASE("the compile-time and run-time rule lists accept the same strategies", "[strategy]") {
  int valid = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const strategy_descriptor& d = enumerated[i];
    const std::string text = to_string(d);
    INFO(text);
    REQUIRE(accepted_at_compile_time[i] == (rules::first_broken(d) == nullptr));
    if (accepted_at_compile_time[i]) {
      ++valid;
      CHECK(parse_strategy(text) == canonical_form(d));  // the parser applies the same rules
    } else {
      // A string may not spell an invalid descriptor (a replicated variable without a
      // collective prints as the default); what it spells is another strategy, or refused.
      std::optional<strategy_descriptor> parsed;
      try {
        parsed = parse_strategy(text);
      } catch (const strategy_parse_error& e) {
        CHECK_THAT(e.what(), Catch::Contains("breaks rule"));
      }
      if (parsed) CHECK(*parsed != d);
    }
  }
  CHECK(valid > 200);
  CHECK(valid < static_cast<int>(count) - 200);
}

TEST_CASE("a partition's shard count under PS<N> has one spelling", "[strategy]") {
  CHECK(to_string(parse_strategy("PS<4>,Partition<0,4>")) == "PS<4>,Partition<0>");
  CHECK(parse_strategy("PS<4>,Partition<0,4>") == parse_strategy("PS<4>,Partition<0>"));
  CHECK(strategy_name<Strategy<PS<4>, Partition<0, 4>>>() == "PS<4>,Partition<0>");
  // Under Replicate the count is the partition's own.
  CHECK(to_string(parse_strategy("Partition<0,4>")) == "Replicate,Partition<0,4>");
}
