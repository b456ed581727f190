#pragma once
// A variable over device memory: the user's parameter and gradient buffers on a GPU, in
// fp32, fp16 or bf16, for the nccl backend's executor (exec/nccl_executor.cuh). Plain C++
// (no CUDA header, no fmt): the declaration checks what needs no device, so it is tested on
// the CPU; whether the pointers are device memory is checked by the executor, which knows
// the GPU and the rank.
#include <cstddef>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/detail/always_false.hpp"
#include "strata/error.hpp"
#include "strata/model/memory.hpp"
#include "strata/numeric/float16.hpp"
#include "strata/strategy/strategy.hpp"

namespace strata {

/// The element type of a device variable's parameter and gradient.
enum class element_type { fp32, fp16, bf16 };

template <DeviceElement T>
constexpr element_type element_type_of() {
  if constexpr (std::is_same_v<T, float>) return element_type::fp32;
  else if constexpr (std::is_same_v<T, half>) return element_type::fp16;
  else return element_type::bf16;
}

constexpr std::size_t element_bytes(element_type t) { return t == element_type::fp32 ? 4 : 2; }

constexpr std::string_view element_type_name(element_type t) {
  return t == element_type::fp32 ? "fp32" : t == element_type::fp16 ? "fp16" : "bf16";
}

/// What the nccl executor runs, one rule each (the form of rules.hpp): dense variables,
/// replicated and averaged with the backend's own all-reduce (ncclAllReduce), unpartitioned,
/// optionally with their fp32 gradients narrowed to fp16 or bf16 on the wire (Compress<FP16 |
/// BF16>, no error feedback); and synchronous parameter-server variables (PS<N>, BSP, any
/// partition, uncompressed), whose update is reduce-scattered to the ranks that own slices of
/// it and all-gathered back.
namespace nccl_rules {
constexpr bool dense_gradient(const strategy_descriptor& d) { return !d.sparse_rows; }
constexpr bool narrowing_codec(const strategy_descriptor& d) {
  return d.codec == codec_kind::none || d.codec == codec_kind::fp16 || d.codec == codec_kind::bf16;
}
constexpr bool no_error_feedback(const strategy_descriptor& d) { return !d.error_feedback; }
constexpr bool uncompressed_parameter_server(const strategy_descriptor& d) {
  return d.placement == placement_kind::replicate || d.codec == codec_kind::none;
}
constexpr bool synchronous(const strategy_descriptor& d) { return d.consistency == consistency_kind::bsp; }
constexpr bool unpartitioned_replicas(const strategy_descriptor& d) {
  return d.placement == placement_kind::ps || !d.partitioned();
}
constexpr bool native_allreduce(const strategy_descriptor& d) {
  return d.placement == placement_kind::ps || d.collective == collective_kind::native;
}
constexpr bool whole_tensors(const strategy_descriptor& d) { return !d.tensor_parallel(); }

using DenseGradientsOnly = rules::rule<"NcclDenseGradientsOnly",
                                "the nccl executor runs dense gradients only; SparseRows tables need the host executor "
                                "over host memory (see docs/compatibility.md)",
                                dense_gradient>;
using NarrowingCodecsOnly = rules::rule<"NcclNarrowingCodecsOnly",
                                 "the nccl executor compresses with Compress<FP16> or Compress<BF16> only; TopK and "
                                 "PowerSGD run on the host: train those variables with staged_executor (see "
                                 "docs/compatibility.md)",
                                 narrowing_codec>;
using NoErrorFeedback = rules::rule<"NcclNoErrorFeedback",
                             "the nccl executor has no error feedback yet; use Compress<FP16> or Compress<BF16> without "
                             "ErrorFeedback, or train the variable with staged_executor (see docs/compatibility.md)",
                             no_error_feedback>;
using UncompressedParameterServer = rules::rule<"NcclUncompressedParameterServer",
                                         "the nccl executor does not compress PS<N> variables (see docs/compatibility.md)",
                                         uncompressed_parameter_server>;
using SynchronousOnly = rules::rule<"NcclSynchronousOnly",
                             "the nccl executor runs synchronous (BSP) PS<N> only; Consistency<ASP> and Consistency<SSP<S>> "
                             "run on the host parameter server: train those variables with staged_executor (see "
                             "docs/compatibility.md)",
                             synchronous>;
using UnpartitionedReplicas = rules::rule<"NcclUnpartitionedReplicas",
                                   "the nccl executor does not partition replicated variables yet; train them with "
                                   "staged_executor (see docs/compatibility.md)",
                                   unpartitioned_replicas>;
using NativeAllReduceOnly = rules::rule<"NcclNativeAllReduceOnly",
                                 "the nccl executor runs AllReduce<Native> (ncclAllReduce) only; Ring, Tree and "
                                 "Hierarchical run on the host with staged_executor (see docs/compatibility.md)",
                                 native_allreduce>;

using WholeTensorsOnly = rules::rule<"NcclWholeTensorsOnly",
                              "the nccl executor runs on the whole world, not on a mesh's data group yet; "
                              "TensorParallel<Axis> variables train with the host executor over a mesh (see "
                              "docs/model_parallelism.md)",
                              whole_tensors>;

using every_rule = std::tuple<DenseGradientsOnly, NarrowingCodecsOnly, NoErrorFeedback, UncompressedParameterServer,
                              SynchronousOnly, UnpartitionedReplicas, NativeAllReduceOnly, WholeTensorsOnly>;
}  // namespace nccl_rules

/// A strategy the nccl executor runs: valid, and within every rule of nccl_rules.
template <class S>
concept NcclStrategy = ValidStrategy<S> && Obeys<S, nccl_rules::DenseGradientsOnly> &&
                       Obeys<S, nccl_rules::NarrowingCodecsOnly> && Obeys<S, nccl_rules::NoErrorFeedback> &&
                       Obeys<S, nccl_rules::UncompressedParameterServer> && Obeys<S, nccl_rules::SynchronousOnly> &&
                       Obeys<S, nccl_rules::UnpartitionedReplicas> && Obeys<S, nccl_rules::NativeAllReduceOnly> &&
                       Obeys<S, nccl_rules::WholeTensorsOnly>;

/// What the nccl executor sees of a variable.
struct device_variable_binding {
  std::string name;
  std::vector<std::size_t> shape;
  void* param = nullptr;
  void* grad = nullptr;
  std::size_t elements = 0;
  element_type type = element_type::fp32;
  element_type wire = element_type::fp32;  // the gradient's type in the collective (Compress<...> narrows fp32)
  bool sharded = false;  // PS<N>: updated slice by slice by the ranks that own the slices

  std::size_t bytes() const { return elements * element_bytes(type); }
};

namespace detail {

inline std::string shape_text(std::span<const std::size_t> shape) {
  std::string text;
  for (std::size_t d : shape) text += (text.empty() ? "" : ", ") + std::to_string(d);
  return "[" + text + "]";
}

}  // namespace detail

/// Declares a variable over device memory with strategy `S`, e.g.
/// `device_variable<Dense>("fc1.weight", w.memory(), gw.memory(), {256, 784})` with `w` and
/// `gw` device_spans of float, half or bfloat16 (cuda::device_buffer::memory()). Throws
/// binding_error, naming the variable, when a buffer does not hold exactly the shape's
/// number of elements.
template <NcclStrategy S, DeviceElement T, std::size_t Rank>
device_variable_binding device_variable(std::string name, device_span<T> param, device_span<T> grad,
                                        const std::size_t (&shape)[Rank]) {
  static_assert(S::descriptor.codec == codec_kind::none || std::is_same_v<T, float>,
                "Compress<FP16> and Compress<BF16> narrow fp32 gradients for the wire; fp16 and bf16 variables "
                "already travel in their own type: declare them without Compress");
  constexpr element_type wire = S::descriptor.codec == codec_kind::fp16   ? element_type::fp16
                                : S::descriptor.codec == codec_kind::bf16 ? element_type::bf16
                                                                          : element_type_of<T>();
  const std::size_t elements = std::accumulate(shape, shape + Rank, std::size_t{1}, std::multiplies<>());
  for (const auto& [buffer, what] : {std::pair{param.size(), "parameter"}, std::pair{grad.size(), "gradient"}})
    if (buffer != elements)
      throw binding_error("variable \"" + name + "\": the " + what + " buffer holds " + std::to_string(buffer) + " " +
                          std::string(element_type_name(element_type_of<T>())) + " elements but shape " +
                          detail::shape_text(shape) + " needs " + std::to_string(elements) +
                          "; bind a buffer of exactly that size");
  return {std::move(name), std::vector<std::size_t>(shape, shape + Rank), param.data(), grad.data(), elements,
          element_type_of<T>(), wire, S::descriptor.placement == placement_kind::ps};
}

/// Host memory (a std::span) given to device_variable: refused, naming the rule.
template <class S, class T, std::size_t Rank>
device_variable_binding device_variable(std::string, std::span<T>, std::span<T>, const std::size_t (&)[Rank]) {
  static_assert(detail::always_false<S, T>,
                "MemorySpace: device_variable binds GPU memory, given as device_span<T>(pointer, size) (or "
                "cuda::device_buffer::memory()); a std::span is host memory, which variable<S> binds for the host "
                "executor");
  return {};
}

}  // namespace strata
