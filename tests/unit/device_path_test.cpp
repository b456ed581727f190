// The nccl executor's step, run on the CPU with a fake device launcher: the executor drives
// its CUDA launcher through the same device_step (over plan_device_buckets' buckets) and
// builds its signature with the same device_signature as here, so what the GPU path decides
// (which bucket starts when, after which events, in which micro-batch, what ranks compare)
// is tested without a GPU. Only the kernels and NCCL calls themselves need one.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/exec/device_signature.hpp"
#include "strata/exec/device_step.hpp"
#include "strata/optim/adam.hpp"
#include "strata/optim/sgd.hpp"
#include "strata/sync/device_buckets.hpp"

using namespace strata;

namespace {

/// A launcher that records what the nccl executor's would enqueue: each bucket started, in
/// which micro-batch, and the updates.
struct fake_launcher {
  struct launch {
    std::size_t bucket;
    micro_step phase;
    bool after_marks;  // waits for the grad_ready events (else the caller's stream is ordered)
  };
  std::vector<std::size_t> marked;
  std::vector<launch> launches;
  std::vector<std::int64_t> updates;
  int from_caller = 0;

  void gradient_marked(std::size_t v) { marked.push_back(v); }
  void gradients_from_caller() { ++from_caller; }
  void start_bucket(std::size_t b, micro_step m, bool after_marks) { launches.push_back({b, m, after_marks}); }
  void update(std::int64_t u) { updates.push_back(u); }
};
static_assert(DeviceLauncher<fake_launcher>);

/// The nccl executor's step over `variables`' buckets, planned as the executor plans them.
device_step device_step_for(const std::vector<device_variable_binding>& variables, sync::bucket_options buckets,
                            int accumulation) {
  device_step step(names_of(variables), accumulation, " on rank 0");
  step.plan(sync::plan_device_buckets(variables, buckets), variables.size());
  return step;
}

std::vector<device_variable_binding> fp32_variables(const std::vector<std::size_t>& elements) {
  std::vector<device_variable_binding> variables;
  for (std::size_t i = 0; i < elements.size(); ++i)
    variables.push_back({"v" + std::to_string(i), {elements[i]}, nullptr, nullptr, elements[i], element_type::fp32,
                         element_type::fp32, false});
  return variables;
}

std::vector<std::size_t> buckets_of(const fake_launcher& l) {
  std::vector<std::size_t> out;
  for (const auto& launch : l.launches) out.push_back(launch.bucket);
  return out;
}

}  // namespace

TEST_CASE("device path: a bucket starts once its gradients are ready and the buckets before it have started",
          "[device_path]") {
  // 4 variables of 16 floats, buckets of 64 bytes: {v3}, {v2}, {v1}, {v0} in launch order.
  device_step step = device_step_for(fp32_variables({16, 16, 16, 16}), {.first_bucket_bytes = 64, .bucket_bytes = 64}, 1);
  fake_launcher l;
  step.grad_ready(3, l);
  CHECK(buckets_of(l) == std::vector<std::size_t>{0});
  step.grad_ready(1, l);  // bucket 2 is complete, but bucket 1 has not started: it waits
  CHECK(buckets_of(l) == std::vector<std::size_t>{0});
  step.grad_ready(2, l);  // now both, in order
  CHECK(buckets_of(l) == std::vector<std::size_t>{0, 1, 2});
  step.grad_ready(0, l);
  CHECK(step.step(l));
  CHECK(buckets_of(l) == std::vector<std::size_t>{0, 1, 2, 3});
  CHECK(l.marked == std::vector<std::size_t>{3, 1, 2, 0});  // each mark records its event before anything starts
  CHECK(std::ranges::all_of(l.launches, [](const auto& launch) { return launch.after_marks; }));
  CHECK(l.updates == std::vector<std::int64_t>{1});
  CHECK(l.from_caller == 0);

  // A step that marks nothing takes every gradient from the caller's stream and starts every
  // bucket, in order, without waiting for events; the next step starts afresh.
  l.launches.clear();
  CHECK(step.step(l));
  CHECK(l.from_caller == 1);
  CHECK(buckets_of(l) == std::vector<std::size_t>{0, 1, 2, 3});
  CHECK(std::ranges::none_of(l.launches, [](const auto& launch) { return launch.after_marks; }));
  CHECK(l.updates == std::vector<std::int64_t>{1, 2});
  CHECK(step.updates() == 2);
}

TEST_CASE("device path: marking errors are the host executor's, naming the rank", "[device_path]") {
  device_step step = device_step_for(fp32_variables({4, 4}), {}, 1);
  fake_launcher l;
  step.grad_ready(1, l);
  CHECK_THROWS_WITH(step.grad_ready(1, l), Catch::Contains("grad_ready(\"v1\") on rank 0 called twice in one step"));
  CHECK_THROWS_WITH(step.grad_ready(7, l), Catch::Contains("grad_ready(7) on rank 0: the model has 2 variables"));
  CHECK_THROWS_WITH(step.step(l), Catch::Contains("step() on rank 0: the gradient of \"v0\" was never marked ready"));
  CHECK(l.updates.empty());
  CHECK_THROWS_WITH(device_step({"w"}, 0, " on rank 2"), Catch::Contains("accumulation_steps on rank 2 is 0"));
}

TEST_CASE("device path: with accumulation every micro-batch starts its buckets, and only the last updates",
          "[device_path]") {
  device_step step = device_step_for(fp32_variables({16, 16}), {.first_bucket_bytes = 64, .bucket_bytes = 64}, 3);
  fake_launcher l;
  std::vector<bool> updated;
  for (int micro = 0; micro < 6; ++micro) {
    step.grad_ready(1, l);
    step.grad_ready(0, l);
    updated.push_back(step.step(l));
    if (micro == 1)
      CHECK_THROWS_WITH(step.bookkeeping().require_between_updates("save_checkpoint"),
                        Catch::Contains("2 of 3 micro-batches done"));
  }
  CHECK(updated == std::vector<bool>{false, false, true, false, false, true});
  CHECK(l.updates == std::vector<std::int64_t>{1, 2});
  REQUIRE(l.launches.size() == 12);  // 2 buckets x 6 micro-batches
  for (std::size_t i = 0; i < l.launches.size(); ++i) {
    const micro_step m = l.launches[i].phase;
    const std::size_t micro = i / 2 % 3;
    INFO("launch " << i);
    CHECK(m.first == (micro == 0));  // the first micro-batch replaces the sum
    CHECK(m.last == (micro == 2));   // the last reduces
    CHECK(m.micro_batches == 3);
    CHECK(m.update == static_cast<std::int64_t>(i / 6 + 1));
  }
  step.bookkeeping().require_between_updates("save_checkpoint");  // after the update: allowed
}

TEST_CASE("device path: a restored checkpoint's update count continues, between updates only", "[device_path]") {
  device_step step = device_step_for(fp32_variables({16}), {}, 2);
  fake_launcher l;
  step.step(l);  // one micro-batch of two
  CHECK_THROWS_WITH(step.resume_at(40, "restore_checkpoint"),
                    Catch::Contains("restore_checkpoint() in the middle of an update"));
  step.step(l);
  step.resume_at(40, "restore_checkpoint");
  step.step(l);
  step.step(l);
  CHECK(step.updates() == 41);
  CHECK(l.updates == std::vector<std::int64_t>{1, 41});  // Adam's bias correction reads 41
}

// Where a device bucket's master parameters and optimizer state lie, member by member: the
// layout the nccl executor's checkpoints are described by.
TEST_CASE("device path: a bucket's updated range is cut into its members' parts", "[device_path]") {
  const std::vector<std::size_t> offsets = {0, 10, 25, 40}, sizes = {10, 15, 15, 5};  // 45 elements
  using part = sync::member_part;
  auto same = [](const std::vector<part>& a, const std::vector<part>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const part& x, const part& y) {
      return x.member == y.member && x.begin == y.begin && x.count == y.count && x.at == y.at;
    });
  };
  // The whole bucket: every member whole, at its offset.
  CHECK(same(sync::parts_in_range(offsets, sizes, 0, 45), {{0, 0, 10, 0}, {1, 0, 15, 10}, {2, 0, 15, 25}, {3, 0, 5, 40}}));
  // Two ranks' slices of 24 (padded to 48): a member split between them, the padding in none.
  const sync::bucket_slices slices = {24, 48};
  CHECK(same(sync::parts_in_range(offsets, sizes, slices.offset(0), slices.slice), {{0, 0, 10, 0}, {1, 0, 14, 10}}));
  CHECK(same(sync::parts_in_range(offsets, sizes, slices.offset(1), slices.slice),
             {{1, 14, 1, 0}, {2, 0, 15, 1}, {3, 0, 5, 16}}));
  // Every element of every member lies in exactly one rank's parts, for any number of ranks.
  const std::vector<std::size_t> big_offsets = {0, 100, 250, 400}, big_sizes = {100, 150, 150, 77};
  for (int ranks = 1; ranks <= 7; ++ranks) {
    const sync::bucket_slices s = sync::slice_bucket(477, ranks);
    std::vector<int> covered(477, 0);
    for (int r = 0; r < ranks; ++r)
      for (const part& p : sync::parts_in_range(big_offsets, big_sizes, s.offset(r), s.slice))
        for (std::size_t i = 0; i < p.count; ++i) ++covered[big_offsets[p.member] + p.begin + i];
    INFO(ranks << " ranks");
    CHECK(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
  }
}

TEST_CASE("device path: the signature compares settings and hyper-parameters as the host one does", "[device_path]") {
  const auto variables = fp32_variables({12, 3});
  const auto lines = device_signature(variables, 2, {}, 2, optim::adam{.lr = 1e-3f});
  CHECK(lines[0] == signature_header(2));
  CHECK(lines[1] == "setting accumulation_steps = 2");
  CHECK(std::find(lines.begin(), lines.end(), "setting buckets.bucket_bytes = 26214400") != lines.end());
  CHECK(std::find(lines.begin(), lines.end(), "setting optimizer.lr = 0.001") != lines.end());
  CHECK(lines.back() == "variable \"v1\" [3] fp32 as fp32 replicated");

  // Two ranks whose learning rates differ are told so, naming the setting.
  const auto other = device_signature(variables, 2, {}, 2, optim::adam{.lr = 1e-2f});
  CHECK_THROWS_WITH(check_signatures({lines, other}), Catch::Contains("optimizer.lr"));
  CHECK_NOTHROW(check_signatures({lines, device_signature(variables, 2, {}, 2, optim::adam{.lr = 1e-3f})}));
  // And an optimizer out of range is refused before anything runs, as on the host.
  CHECK_THROWS_WITH(check_hyper_parameters(optim::sgd{.lr = -1.0f}, 0), Catch::Contains("the optimizer's lr is -1 at start-up"));
}
