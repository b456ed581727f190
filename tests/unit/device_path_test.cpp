// The nccl executor's bookkeeping, run on the CPU with a fake device launcher: the executor
// marks gradients, counts micro-batches and starts buckets through the same step_bookkeeping,
// launch_order, plan_device_buckets and device_signature as here, so what the GPU path
// decides (which bucket starts when, in which micro-batch, what ranks compare) is tested
// without a GPU. Only the kernels and NCCL calls themselves need one.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/exec/device_signature.hpp"
#include "strata/exec/step_bookkeeping.hpp"
#include "strata/optim/adam.hpp"
#include "strata/optim/sgd.hpp"
#include "strata/sync/device_buckets.hpp"
#include "strata/sync/launch_order.hpp"

using namespace strata;

namespace {

/// What the nccl executor does between grad_ready and the collectives, with a launcher
/// that records each bucket it is asked to start and the micro-batch it started in.
class fake_device_executor {
 public:
  struct launch {
    std::size_t bucket;
    micro_step phase;
  };

  fake_device_executor(std::vector<device_variable_binding> variables, sync::bucket_options buckets, int accumulation)
      : variables_(std::move(variables)), steps_(device_variable_names(variables_), accumulation) {
    std::vector<std::size_t> members;
    bucket_of_.resize(variables_.size());
    for (const sync::typed_bucket& b : sync::plan_device_buckets(variables_, buckets)) {
      for (std::size_t m : b.layout.members) bucket_of_[m] = members.size();
      members.push_back(b.layout.members.size());
    }
    order_ = sync::launch_order(std::move(members));
  }

  void grad_ready(std::size_t v) {
    steps_.mark_ready(v);
    order_.member_ready(bucket_of_[v]);
    start();
  }

  /// Returns whether the step updated (the last micro-batch).
  bool step() {
    if (steps_.marking()) steps_.require_all_ready();
    else order_.all_ready();
    start();
    const bool last = steps_.phase(updates_).last;
    if (last) ++updates_;
    order_.reset();
    steps_.end_micro_batch();
    return last;
  }

  const step_bookkeeping& steps() const { return steps_; }
  std::vector<launch> launches;

 private:
  void start() {
    order_.start_ready([&](std::size_t b) { launches.push_back({b, steps_.phase(updates_)}); });
  }

  std::vector<device_variable_binding> variables_;
  step_bookkeeping steps_;
  std::vector<std::size_t> bucket_of_;
  sync::launch_order order_{{}};
  std::int64_t updates_ = 0;
};

std::vector<device_variable_binding> fp32_variables(const std::vector<std::size_t>& elements) {
  std::vector<device_variable_binding> variables;
  for (std::size_t i = 0; i < elements.size(); ++i)
    variables.push_back({"v" + std::to_string(i), {elements[i]}, nullptr, nullptr, elements[i], element_type::fp32,
                         element_type::fp32, false});
  return variables;
}

std::vector<std::size_t> buckets_of(const std::vector<fake_device_executor::launch>& launches) {
  std::vector<std::size_t> out;
  for (const auto& l : launches) out.push_back(l.bucket);
  return out;
}

}  // namespace

TEST_CASE("device path: a bucket starts once its gradients are ready and the buckets before it have started",
          "[device_path]") {
  // 4 variables of 16 floats, buckets of 64 bytes: {v3}, {v2}, {v1}, {v0} in launch order.
  fake_device_executor exec(fp32_variables({16, 16, 16, 16}), {.first_bucket_bytes = 64, .bucket_bytes = 64}, 1);
  exec.grad_ready(3);
  CHECK(buckets_of(exec.launches) == std::vector<std::size_t>{0});
  exec.grad_ready(1);  // bucket 2 is complete, but bucket 1 has not started: it waits
  CHECK(buckets_of(exec.launches) == std::vector<std::size_t>{0});
  exec.grad_ready(2);  // now both, in order
  CHECK(buckets_of(exec.launches) == std::vector<std::size_t>{0, 1, 2});
  exec.grad_ready(0);
  CHECK(exec.step());
  CHECK(buckets_of(exec.launches) == std::vector<std::size_t>{0, 1, 2, 3});

  // A step that marks nothing starts every bucket, in order; the next step starts afresh.
  exec.launches.clear();
  CHECK(exec.step());
  CHECK(buckets_of(exec.launches) == std::vector<std::size_t>{0, 1, 2, 3});
}

TEST_CASE("device path: marking errors are the host executor's", "[device_path]") {
  fake_device_executor exec(fp32_variables({4, 4}), {}, 1);
  exec.grad_ready(1);
  CHECK_THROWS_WITH(exec.grad_ready(1), Catch::Contains("grad_ready(\"v1\") called twice in one step"));
  CHECK_THROWS_WITH(exec.grad_ready(7), Catch::Contains("the model has 2 variables"));
  CHECK_THROWS_WITH(exec.step(), Catch::Contains("the gradient of \"v0\" was never marked ready"));
  CHECK_THROWS_AS(step_bookkeeping({"w"}, 0), usage_error);
}

TEST_CASE("device path: with accumulation every micro-batch starts its buckets, and only the last updates",
          "[device_path]") {
  fake_device_executor exec(fp32_variables({16, 16}), {.first_bucket_bytes = 64, .bucket_bytes = 64}, 3);
  std::vector<bool> updated;
  for (int micro = 0; micro < 6; ++micro) {
    exec.grad_ready(1);
    exec.grad_ready(0);
    updated.push_back(exec.step());
    if (micro == 1) CHECK_THROWS_WITH(exec.steps().require_between_updates("save_checkpoint"),
                                      Catch::Contains("2 of 3 micro-batches done"));
  }
  CHECK(updated == std::vector<bool>{false, false, true, false, false, true});
  REQUIRE(exec.launches.size() == 12);  // 2 buckets x 6 micro-batches
  for (std::size_t i = 0; i < exec.launches.size(); ++i) {
    const micro_step m = exec.launches[i].phase;
    const std::size_t micro = i / 2 % 3;
    INFO("launch " << i);
    CHECK(m.first == (micro == 0));  // the first micro-batch replaces the sum
    CHECK(m.last == (micro == 2));   // the last reduces
    CHECK(m.micro_batches == 3);
    CHECK(m.update == static_cast<std::int64_t>(i / 6 + 1));
  }
  exec.steps().require_between_updates("save_checkpoint");  // after the update: allowed
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
