// The strategy algebra, checked entirely at compile time. Running the program does nothing.
#include <type_traits>

#include "strata/exec/synchronizer_table.hpp"
#include "strata/strategy/strategy.hpp"

using namespace strata;

// Order does not matter; defaults are filled in; spelled-out defaults change nothing.
static_assert(std::is_same_v<Strategy<Replicate, AllReduce<Ring>, Compress<FP16>>,
                             Strategy<Compress<FP16>, AllReduce<Ring>, Replicate>>);
static_assert(std::is_same_v<Strategy<PS<4>, Partition<0>, Consistency<SSP<3>>, SparseRows>,
                             Strategy<SparseRows, Consistency<SSP<3>>, Partition<0>, PS<4>>>);
static_assert(std::is_same_v<Strategy<>, Strategy<Replicate, AllReduce<Native>, Compress<None>, Consistency<BSP>,
                                                  DenseGradient, Unpartitioned>>);
static_assert(std::is_same_v<Strategy<Compress<FP16>>, Strategy<Compress<FP16, NoFeedback>>>);
static_assert(!std::is_same_v<Strategy<Compress<FP16>>, Strategy<Compress<FP16, ErrorFeedback>>>);

// The default collective follows the placement.
static_assert(std::is_same_v<Strategy<>::collective, AllReduce<Native>>);
static_assert(std::is_same_v<Strategy<PS<1>>::collective, NoCollective>);

// Descriptors carry every number.
using Sparse = Strategy<PS<4>, Partition<0>, Consistency<SSP<3>>, SparseRows>;
static_assert(Sparse::descriptor.placement == placement_kind::ps && Sparse::descriptor.ps_shards == 4);
static_assert(Sparse::descriptor.partition_axis == 0 && Sparse::descriptor.staleness == 3 && Sparse::descriptor.sparse_rows);
using Lossy = Strategy<Compress<TopK<0.01>, ErrorFeedback>, AllReduce<Tree>>;
static_assert(Lossy::descriptor.codec == codec_kind::topk && Lossy::descriptor.topk_ratio == 0.01);
static_assert(Lossy::descriptor.error_feedback && Lossy::descriptor.collective == collective_kind::tree);
static_assert(Strategy<Compress<PowerSGD<4>>>::descriptor.powersgd_rank == 4);

// Every strategy formed through Strategy<...> is valid; hand-made canonical types that break
// a rule fail exactly that rule's concept.
static_assert(ValidStrategy<Sparse> && ValidStrategy<Lossy>);
using ReplicateSSP = canonical_strategy<Replicate, Unpartitioned, AllReduce<Native>, Compress<None>, Consistency<SSP<2>>,
                                        DenseGradient>;
static_assert(!StaleConsistencyNeedsParameterServer<ReplicateSSP> && AllReduceNeedsReplicate<ReplicateSSP>);
static_assert(!ValidStrategy<ReplicateSSP>);
using PSWithRing =
    canonical_strategy<PS<1>, Unpartitioned, AllReduce<Ring>, Compress<None>, Consistency<BSP>, DenseGradient>;
static_assert(!AllReduceNeedsReplicate<PSWithRing> && StaleConsistencyNeedsParameterServer<PSWithRing>);

// The executor table: which strategies the dense all-reduce synchronizer takes.
static_assert(sync::DenseAllReduceStrategy<Strategy<>> && sync::DenseAllReduceStrategy<Strategy<AllReduce<Ring>>>);
static_assert(sync::DenseAllReduceStrategy<Lossy> && sync::DenseAllReduceStrategy<Strategy<Partition<1>, AllReduce<Hierarchical>>>);
static_assert(!sync::DenseAllReduceStrategy<Sparse> && !sync::DenseAllReduceStrategy<Strategy<SparseRows>>);

// Vectors next to matrices drop what needs a second dimension.
static_assert(std::is_same_v<vector_strategy_t<Strategy<Compress<PowerSGD<4>>, Partition<1>>>, Strategy<>>);
static_assert(std::is_same_v<vector_strategy_t<Strategy<Compress<FP16>, Partition<0>>>, Strategy<Compress<FP16>, Partition<0>>>);

// Vectors of a sharded parameter server keep a partition, along the one axis they have.
static_assert(std::is_same_v<vector_strategy_t<Strategy<PS<2>, Partition<1>>>, Strategy<PS<2>, Partition<0>>>);
static_assert(std::is_same_v<vector_strategy_t<Strategy<PS<1>, Partition<1>>>, Strategy<PS<1>>>);
static_assert(std::is_same_v<vector_strategy_t<Strategy<Partition<1, 3>, AllReduce<Ring>>>, Strategy<AllReduce<Ring>>>);
static_assert(ValidStrategy<vector_strategy_t<Strategy<PS<4>, Partition<1>, Consistency<SSP<2>>>>>);

// Tensor-parallel splits: a column-parallel layer's bias splits with its rows, a row-parallel
// layer's is whole; the split is one category of its own, in any order.
static_assert(std::is_same_v<vector_strategy_t<Strategy<TensorParallel<0>, Compress<FP16>>>,
                             Strategy<TensorParallel<0>, Compress<FP16>>>);
static_assert(std::is_same_v<vector_strategy_t<Strategy<TensorParallel<1>, AllReduce<Ring>>>, Strategy<AllReduce<Ring>>>);
static_assert(std::is_same_v<Strategy<TensorParallel<1>, AllReduce<Tree>>, Strategy<AllReduce<Tree>, TensorParallel<1>>>);
static_assert(Strategy<TensorParallel<1>>::descriptor.tensor_axis == 1 && Strategy<>::descriptor.tensor_axis == -1);
static_assert(ValidStrategy<Strategy<SparseRows, TensorParallel<0>>>);  // a vocabulary-parallel embedding

// Under PS<N> a partition's shard count is N's: one strategy, one type, one string.
static_assert(std::is_same_v<Strategy<PS<4>, Partition<0, 4>>, Strategy<PS<4>, Partition<0>>>);
static_assert(Strategy<PS<4>, Partition<1, 4>>::descriptor.partition_shards == 0);
static_assert(!std::is_same_v<Strategy<Partition<0, 4>>, Strategy<Partition<0>>>);  // replicated: the count is its own

// A hand-made canonical type that breaks a rule is canonical but not valid: models, variables
// and executors take only valid ones (compile_fail/hand_made_invalid_strategy.cpp).
using UnsplitPS = canonical_strategy<PS<2>, Unpartitioned, NoCollective, Compress<None>, Consistency<BSP>, DenseGradient>;
static_assert(CanonicalStrategy<UnsplitPS> && !ValidStrategy<UnsplitPS> && !ShardedParameterServerNeedsPartition<UnsplitPS>);
// So is a second spelling of a valid strategy.
using SecondSpelling =
    canonical_strategy<PS<2>, Partition<0, 2>, NoCollective, Compress<None>, Consistency<BSP>, DenseGradient>;
static_assert(ObeysEveryRule<SecondSpelling> && !CanonicalSpelling<SecondSpelling> && !ValidStrategy<SecondSpelling>);

int main() {}
