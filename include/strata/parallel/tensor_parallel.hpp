#pragma once
// The collectives a tensor-parallel layer needs on its activations, called from the user's
// own layer code (strata does not own layers). A weight split across the tensor group
// leaves each rank with part of a result; these put the parts together, in forward and, as
// their conjugate, in backward (Megatron-LM's f and g):
//
//   column-parallel linear (W's output rows split): y_r = W_r x
//     forward : copy_to_group::forward    (x is used whole by every rank: nothing to do)
//     backward: copy_to_group::backward   (dx = sum over ranks of W_r^T dy_r: an all-reduce)
//   row-parallel linear (W's input columns split): y = sum_r W_r x_r
//     forward : reduce_from_group::forward  (the sum: an all-reduce)
//     backward: reduce_from_group::backward (dy reaches every rank whole: nothing to do)
//
// A column-parallel layer followed by a row-parallel one (an MLP block, attention with its
// heads split) thus costs one all-reduce in forward and one in backward. gather_from_group
// and scatter_to_group move activations split along their last dimension (a column-parallel
// output the next layer needs whole, e.g. logits over a split vocabulary), and
// reduce_scatter_to_group splits a sum by rows (sequence parallelism).
//
// Activations are row-major [rows, columns] spans of floats; a rank's part of a split
// dimension is shard_of(...). Each call takes the tensor group as a context (mesh::tensor()):
// on a backend that can test a request (MPI, loopback) every rank says it arrived, and a
// rank that waits longer than the group's timeout names the ranks that did not arrive, with
// their mesh coordinates, and ends the job, as the executor's and the pipeline's deadlines do.
//
// On a backend whose buffers are device memory (nccl, sim) the all-reducing calls also take
// the stream whose kernels wrote the data: the communicator's stream waits for it before
// the all-reduce reads, and the call returns once the result has landed (the host has seen
// it), so kernels queued afterwards on any stream read it whole.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/comm/communicator.hpp"
#include "strata/debug.hpp"
#include "strata/detail/fixed_string.hpp"
#include "strata/error.hpp"
#include "strata/exec/bounded_collective.hpp"

namespace strata::tensor_parallel {

/// Elements [begin, begin + count) of a dimension split evenly over a group.
struct shard {
  std::size_t begin = 0, count = 0;
};

/// Rank `rank`'s part of a dimension of `extent` split over `size` ranks. Throws usage_error,
/// naming `what`, unless the split is even: uneven shards would make the group's collectives
/// move blocks of different sizes.
inline shard shard_of(std::size_t extent, int size, int rank, std::string_view what) {
  const auto n = static_cast<std::size_t>(size);
  if (size < 1 || extent % n != 0)
    throw usage_error(fmt::format("{} has {} elements along its split dimension, which {} tensor-parallel ranks cannot "
                                  "share evenly; choose tp to divide {}",
                                  what, extent, size, extent));
  return {static_cast<std::size_t>(rank) * (extent / n), extent / n};
}

/// A tensor group whose buffers are device memory, and the type of its streams.
template <class Group>
concept DeviceGroup = CommContext<Group> && !HostBuffers<collectives_of<Group>>;
template <DeviceGroup Group>
using stream_of = decltype(std::declval<collectives_of<Group>&>().stream());

namespace detail {
inline void require_rows(std::size_t elements, std::size_t rows, std::string_view call) {
  if (rows == 0 || elements % rows != 0)
    throw usage_error(fmt::format("tensor_parallel::{}: {} elements do not form {} rows", call, elements, rows));
}

/// The all-reduce; on a device group, after the work queued on `producer` (the stream
/// whose kernels wrote `data`).
template <CommContext Group, class... Producer>
void allreduce_sum(Group& group, std::span<float> data, std::string_view call, Producer... producer) {
  collective_within_deadline(group, fmt::format("the tensor group's all-reduce of {} floats ({})", data.size(), call),
                             [&](auto& comm) {
                               (comm.depend_on(producer), ...);
                               return comm.iallreduce_sum(data);
                             });
}

template <CommContext Group>
void allgather(Group& group, std::span<const float> mine, std::span<float> all, std::string_view call) {
  collective_within_deadline(group,
                             fmt::format("the tensor group's all-gather of {} floats per rank ({})", mine.size(), call),
                             [&](auto& comm) { return comm.iallgather(mine, all); });
}

/// STRATA_DEBUG=detail: every rank of the group must hold the same `values` (`what`: a
/// whole input, a whole output gradient). Throws usage_error on every rank, naming the
/// ranks whose values differ from the group's rank 0's.
template <CommContext Group>
void require_alike(Group& group, std::span<const float> values, std::string_view call, std::string_view what) {
  // The fingerprint is taken on the host, so values in device memory are not checked.
  if constexpr (HostBuffers<collectives_of<Group>>) {
    if (!debug_detail()) return;
    // The fingerprint travels as two 16-bit halves, which floats hold exactly, through the
    // group's bounded all-gather.
    const std::uint32_t mine = fingerprint_of(values);
    const std::array<float, 2> halves = {static_cast<float>(mine >> 16), static_cast<float>(mine & 0xFFFFu)};
    std::vector<float> all(2 * static_cast<std::size_t>(group.control().size()));
    allgather(group, halves, all, call);
    std::vector<std::string> differ;
    for (std::size_t r = 1; 2 * r < all.size(); ++r)
      if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
        differ.push_back(describe_job_rank(group, job_rank(group, static_cast<int>(r))));
    if (!differ.empty())
      throw usage_error(fmt::format("tensor_parallel::{} (STRATA_DEBUG=detail): {} of the tensor group hold{} another {} than "
                                    "{}; every rank of a tensor group must read the same batch and compute alike what is not "
                                    "split",
                                    call, fmt::join(differ, ", "), differ.size() == 1 ? "s" : "", what,
                                    describe_job_rank(group, job_rank(group, 0))));
  }
}
/// What a device group's stream must be, for require_stream's message.
inline constexpr std::string_view wrote_the_data = "the stream whose kernels wrote the data";

}  // namespace detail

/// Megatron's f: the input of a column-parallel layer.
struct copy_to_group {
  /// Every rank reads the whole input: nothing moves (with STRATA_DEBUG=detail, the group
  /// checks that its ranks' inputs are equal).
  template <CommContext Group>
  static void forward(Group& group, std::span<const float> input) {
    detail::require_alike(group, input, "copy_to_group::forward", "input");
  }
  /// Each rank's input gradient holds its shard's share; every rank needs their sum.
  template <CommContext Group>
    requires(!DeviceGroup<Group>)
  static void backward(Group& group, std::span<float> input_grad) {
    detail::allreduce_sum(group, input_grad, "copy_to_group::backward");
  }
  /// On a device group: `compute` is the stream whose kernels wrote input_grad.
  template <DeviceGroup Group>
  static void backward(Group& group, std::span<float> input_grad, stream_of<Group> compute) {
    detail::allreduce_sum(group, input_grad, "copy_to_group::backward",
                          require_stream(compute, "tensor_parallel::copy_to_group::backward", detail::wrote_the_data));
  }
};

/// Megatron's g: the output of a row-parallel layer.
struct reduce_from_group {
  /// Each rank holds a partial sum of the output; every rank needs the whole.
  template <CommContext Group>
    requires(!DeviceGroup<Group>)
  static void forward(Group& group, std::span<float> partial_output) {
    detail::allreduce_sum(group, partial_output, "reduce_from_group::forward");
  }
  /// On a device group: `compute` is the stream whose kernels wrote partial_output.
  template <DeviceGroup Group>
  static void forward(Group& group, std::span<float> partial_output, stream_of<Group> compute) {
    detail::allreduce_sum(group, partial_output, "reduce_from_group::forward",
                          require_stream(compute, "tensor_parallel::reduce_from_group::forward", detail::wrote_the_data));
  }
  /// The output's gradient is whole on every rank already: nothing moves (with
  /// STRATA_DEBUG=detail, the group checks that it is equal on its ranks).
  template <CommContext Group>
  static void backward(Group& group, std::span<const float> output_grad) {
    detail::require_alike(group, output_grad, "reduce_from_group::backward", "output gradient");
  }
};

/// The collectives below reorder or copy on the host: their group's buffers must be host
/// memory (a device version is not written yet).
template <class Group>
concept HostGroup =
    CommContext<Group> &&
    (HostBuffers<collectives_of<Group>> || strata::detail::unsatisfied<"gather_from_group, scatter_to_group and reduce_scatter_to_group "
                                                   "reorder activations on the host; on a backend with device buffers "
                                                   "(nccl) use copy_to_group and reduce_from_group, which only "
                                                   "all-reduce">());

/// Activations split along their last dimension ([rows, cols / size] on each rank) made whole
/// ([rows, cols]); backward keeps this rank's columns of the whole gradient.
struct gather_from_group {
  template <HostGroup Group>
  static void forward(Group& group, std::span<const float> part, std::span<float> whole, std::size_t rows) {
    detail::require_rows(part.size(), rows, "gather_from_group::forward");
    if (whole.size() != part.size() * static_cast<std::size_t>(group.collectives().size()))
      throw usage_error(fmt::format("tensor_parallel::gather_from_group::forward: {} elements per rank over {} ranks do "
                                    "not fill {}",
                                    part.size(), group.collectives().size(), whole.size()));
    const std::size_t cols = part.size() / rows, all_cols = whole.size() / rows;
    std::vector<float> blocks(whole.size());  // rank r's [rows, cols] block at r * part.size()
    detail::allgather(group, part, std::span<float>(blocks), "gather_from_group");
    for (int r = 0; r < group.collectives().size(); ++r)
      for (std::size_t i = 0; i < rows; ++i)
        std::copy_n(blocks.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * part.size() + i * cols), cols,
                    whole.begin() + static_cast<std::ptrdiff_t>(i * all_cols + static_cast<std::size_t>(r) * cols));
  }
  template <HostGroup Group>
  static void backward(Group& group, std::span<const float> whole_grad, std::span<float> part_grad, std::size_t rows) {
    detail::require_rows(whole_grad.size(), rows, "gather_from_group::backward");
    const std::size_t all_cols = whole_grad.size() / rows;
    const shard mine = shard_of(all_cols, group.collectives().size(), group.collectives().rank(), "the gradient of a gathered activation");
    if (part_grad.size() != rows * mine.count)
      throw usage_error(fmt::format("tensor_parallel::gather_from_group::backward: the part holds {} elements, not {} rows "
                                    "of {}",
                                    part_grad.size(), rows, mine.count));
    for (std::size_t i = 0; i < rows; ++i)
      std::copy_n(whole_grad.begin() + static_cast<std::ptrdiff_t>(i * all_cols + mine.begin), mine.count,
                  part_grad.begin() + static_cast<std::ptrdiff_t>(i * mine.count));
  }
};

/// The dual of gather_from_group: a whole activation split by its last dimension (each rank
/// keeps its columns); backward gathers the gradient whole.
struct scatter_to_group {
  template <HostGroup Group>
  static void forward(Group& group, std::span<const float> whole, std::span<float> part, std::size_t rows) {
    gather_from_group::backward(group, whole, part, rows);
  }
  template <HostGroup Group>
  static void backward(Group& group, std::span<const float> part_grad, std::span<float> whole_grad, std::size_t rows) {
    gather_from_group::forward(group, part_grad, whole_grad, rows);
  }
};

/// Partial sums of a whole [rows, cols] activation, reduced so that each rank keeps its
/// rows of the sum (sequence parallelism); backward gathers the rows' gradients whole. The
/// Collectives concept has no reduce-scatter, so forward all-reduces and keeps a part:
/// correct, with twice the minimum traffic.
struct reduce_scatter_to_group {
  template <HostGroup Group>
  static void forward(Group& group, std::span<float> partial_whole, std::span<float> part) {
    const shard mine = shard_of(partial_whole.size(), group.collectives().size(), group.collectives().rank(), "a reduce-scattered activation");
    if (part.size() != mine.count)
      throw usage_error(fmt::format("tensor_parallel::reduce_scatter_to_group::forward: the part holds {} elements, not {}",
                                    part.size(), mine.count));
    detail::allreduce_sum(group, partial_whole, "reduce_scatter_to_group::forward");
    std::copy_n(partial_whole.begin() + static_cast<std::ptrdiff_t>(mine.begin), mine.count, part.begin());
  }
  template <HostGroup Group>
  static void backward(Group& group, std::span<const float> part_grad, std::span<float> whole_grad) {
    if (whole_grad.size() != part_grad.size() * static_cast<std::size_t>(group.collectives().size()))
      throw usage_error(fmt::format("tensor_parallel::reduce_scatter_to_group::backward: {} elements per rank over {} ranks "
                                    "do not fill {}",
                                    part_grad.size(), group.collectives().size(), whole_grad.size()));
    detail::allgather(group, part_grad, whole_grad, "reduce_scatter_to_group::backward");
  }
};

}  // namespace strata::tensor_parallel
