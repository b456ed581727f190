// Strategy builders: their outputs for one fixed model against a table, and models declared
// with a builder instead of per-variable strategies.
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/model/build.hpp"

using namespace strata;

namespace {

// The fixed model: an embedding table, a dense layer and its bias, an output layer, a
// variable whose dimension 0 is prime, and a scalar.
using embedding = variable_traits<dims<1000000, 32>, SparseRows>;
using fc1_weight = variable_traits<dims<784, 256>>;
using fc1_bias = variable_traits<dims<256>>;
using out_weight = variable_traits<dims<256, 10>>;
using prime_rows = variable_traits<dims<97, 3>>;
using scalar = variable_traits<dims<>>;

using row = std::vector<std::string>;

template <class B>
row strategies_of_fixed_model() {
  return {strategy_name<builder_strategy_t<B, embedding>>(),  strategy_name<builder_strategy_t<B, fc1_weight>>(),
          strategy_name<builder_strategy_t<B, fc1_bias>>(),   strategy_name<builder_strategy_t<B, out_weight>>(),
          strategy_name<builder_strategy_t<B, prime_rows>>(), strategy_name<builder_strategy_t<B, scalar>>()};
}

}  // namespace

TEST_CASE("every builder gives the fixed model the strategies in the table", "[builders]") {
  // Columns: embedding 1000000x32 sparse, fc1.weight 784x256, fc1.bias 256, out.weight 256x10,
  // prime 97x3, scalar. The same table is in docs/policies.md.
  CHECK(strategies_of_fixed_model<builder::PS<>>() ==
        row{"PS<1>,SparseRows", "PS<1>", "PS<1>", "PS<1>", "PS<1>", "PS<1>"});
  CHECK(strategies_of_fixed_model<builder::PSLoadBalancing<>>() ==
        row{"PS<1>,SparseRows", "PS<1>", "PS<1>", "PS<1>", "PS<1>", "PS<1>"});
  CHECK(strategies_of_fixed_model<builder::PartitionedPS<>>() ==
        row{"PS<2>,Partition<0>,SparseRows", "PS<2>,Partition<0>", "PS<2>,Partition<0>", "PS<2>,Partition<0>",
            "PS<16>,Partition<0>", "PS<1>"});
  CHECK(strategies_of_fixed_model<builder::UnevenPartitionedPS<>>() ==
        row{"PS<3>,Partition<0>,SparseRows", "PS<3>,Partition<0>", "PS<3>,Partition<0>", "PS<3>,Partition<0>",
            "PS<2>,Partition<0>", "PS<1>"});
  CHECK(strategies_of_fixed_model<builder::AllReduce<>>() ==
        row{"Replicate,AllReduce<Ring>,SparseRows", "Replicate,AllReduce<Ring>", "Replicate,AllReduce<Ring>",
            "Replicate,AllReduce<Ring>", "Replicate,AllReduce<Ring>", "Replicate,AllReduce<Ring>"});
  CHECK(strategies_of_fixed_model<builder::PartitionedAllReduce<>>() ==
        row{"Replicate,Partition<0>,AllReduce<Ring>,SparseRows", "Replicate,Partition<0>,AllReduce<Ring>",
            "Replicate,Partition<0>,AllReduce<Ring>", "Replicate,Partition<0>,AllReduce<Ring>",
            "Replicate,Partition<0>,AllReduce<Ring>", "Replicate,AllReduce<Ring>"});
  CHECK(strategies_of_fixed_model<builder::RandomAxisPartitionAllReduce<42>>() ==
        row{"Replicate,Partition<0>,AllReduce<Ring>,SparseRows", "Replicate,Partition<1>,AllReduce<Ring>",
            "Replicate,Partition<0>,AllReduce<Ring>", "Replicate,Partition<1>,AllReduce<Ring>",
            "Replicate,Partition<1>,AllReduce<Ring>", "Replicate,AllReduce<Ring>"});
  CHECK(strategies_of_fixed_model<builder::Parallax<>>() ==
        row{"PS<1>,SparseRows", "Replicate,AllReduce<Ring>", "Replicate,AllReduce<Ring>", "Replicate,AllReduce<Ring>",
            "Replicate,AllReduce<Ring>", "Replicate,AllReduce<Ring>"});
}

namespace {
/// B::describe on the run-time extents of V gives what B::strategy_for<V> gives.
template <class B, class... Vs>
void expect_run_time_agrees() {
  auto agrees = []<class V>(std::type_identity<V>) {
    CHECK(to_string(B::describe(V::extents, V::sparse)) == strategy_name<builder_strategy_t<B, V>>());
  };
  (agrees(std::type_identity<Vs>{}), ...);
}
template <class B>
void expect_run_time_agrees_on_fixed_model() {
  expect_run_time_agrees<B, embedding, fc1_weight, fc1_bias, out_weight, prime_rows, scalar,
                         variable_traits<dims<2048, 512, 3, 3>>, variable_traits<dims<384, 256>>>();
}
}  // namespace

TEST_CASE("a builder gives extents known at run time the strategies it gives static ones", "[builders]") {
  expect_run_time_agrees_on_fixed_model<builder::PS<>>();
  expect_run_time_agrees_on_fixed_model<builder::PSLoadBalancing<Consistency<SSP<2>>>>();
  expect_run_time_agrees_on_fixed_model<builder::PartitionedPS<>>();
  expect_run_time_agrees_on_fixed_model<builder::PartitionedPS<Consistency<ASP>, 4>>();
  expect_run_time_agrees_on_fixed_model<builder::UnevenPartitionedPS<>>();
  expect_run_time_agrees_on_fixed_model<builder::AllReduce<Tree>>();
  expect_run_time_agrees_on_fixed_model<builder::PartitionedAllReduce<>>();
  expect_run_time_agrees_on_fixed_model<builder::RandomAxisPartitionAllReduce<42>>();
  expect_run_time_agrees_on_fixed_model<builder::RandomAxisPartitionAllReduce<7, Hierarchical>>();
  expect_run_time_agrees_on_fixed_model<builder::Parallax<>>();
}

TEST_CASE("builder parameters reach the strategies", "[builders]") {
  CHECK(strategies_of_fixed_model<builder::Parallax<Hierarchical, Consistency<SSP<3>>>>() ==
        row{"PS<1>,SSP<3>,SparseRows", "Replicate,AllReduce<Hierarchical>", "Replicate,AllReduce<Hierarchical>",
            "Replicate,AllReduce<Hierarchical>", "Replicate,AllReduce<Hierarchical>",
            "Replicate,AllReduce<Hierarchical>"});
  CHECK(strategies_of_fixed_model<builder::PartitionedPS<Consistency<ASP>, 128>>() ==
        row{"PS<2>,Partition<0>,ASP,SparseRows", "PS<2>,Partition<0>,ASP", "PS<2>,Partition<0>,ASP",
            "PS<2>,Partition<0>,ASP", "PS<97>,Partition<0>,ASP", "PS<1>,ASP"});
}

TEST_CASE("a model declared with a builder holds ordinary variables with the builder's strategies", "[builders]") {
  std::vector<float> e(1000 * 8), ge(e.size()), w(12), gw(12), b(3), gb(3), s(1), gs(1);
  using B = build<builder::Parallax<>>;
  auto m = make_model(B::variable<dims<1000, 8>, SparseRows>("embedding", e, ge), B::variable<dims<3, 4>>("fc.weight", w, gw),
                      B::variable<dims<3>>("fc.bias", b, gb), B::variable<dims<>>("scale", s, gs));
  static_assert(std::is_same_v<decltype(m), builder_model_t<builder::Parallax<>, variable_traits<dims<1000, 8>, SparseRows>,
                                                            variable_traits<dims<3, 4>>>>);
  static_assert(std::is_same_v<decltype(m), model_of<Strategy<PS<1>, SparseRows>, Strategy<AllReduce<Ring>>>>);
  CHECK(m[m.id("embedding")].strategy == "PS<1>,SparseRows");
  CHECK(m[m.id("fc.bias")].strategy == "Replicate,AllReduce<Ring>");
  CHECK(m[m.id("fc.weight")].shape == std::vector<std::size_t>{3, 4});
  CHECK(m[m.id("scale")].shape.empty());
  CHECK(m.ids_of<Strategy<AllReduce<Ring>>>().size() == 3);
}

TEST_CASE("a builder's variable checks its buffers against the static shape", "[builders]") {
  std::vector<float> w(12), gw(12);
  using B = build<builder::PartitionedPS<>>;
  CHECK_THROWS_WITH((B::variable<dims<3, 5>>("fc2.weight", w, gw)),
                    Catch::Contains("variable \"fc2.weight\": the parameter buffer holds 12 floats but shape [3, 5] needs 15"));
  builder_model_t<builder::PartitionedPS<>, variable_traits<dims<3, 4>>> m;
  m.add(B::variable<dims<3, 4>>("fc.weight", w, gw));
  CHECK(m[m.id("fc.weight")].strategy == "PS<3>,Partition<0>");
}
