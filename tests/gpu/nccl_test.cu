// The nccl backend on one rank, without MPI or a launcher: collectives on known vectors of
// every element type, point to point to itself, split, and the error paths (a bad
// argument is reported with its call and rank; a communicator whose other rank never joins
// times out at the deadline, as a receive nobody answers does). Exits with STRATA_GPU_SKIP_CODE when there is no GPU.
#include <chrono>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "gpu_test.hpp"
#include "strata/comm/nccl/nccl.hpp"
#include "strata/cuda/device.cuh"

namespace {

using gpu_test::expect;
using gpu_test::expect_throws;
using strata::nccl::communicator;

/// Device memory holding `host`, ready for `comm` (copied on the default stream, which the
/// communicator's own stream does not wait for by itself).
template <class T>
strata::cuda::device_buffer<T> on_device(communicator& comm, const std::vector<T>& host) {
  auto device = gpu_test::to_device(host);
  comm.depend_on(nullptr);
  return device;
}

template <class T>
void expect_same(const strata::cuda::device_buffer<T>& device, const std::vector<T>& host, const std::string& what) {
  const std::vector<T> back = gpu_test::to_host(device);
  gpu_test::expect_equal(std::span<const T>(back), std::span<const T>(host), what);
}

template <class T>
void all_reduce(communicator& comm, const char* type) {
  std::vector<T> host;
  for (float x : {1.0f, -2.0f, 3.5f, 0.25f, 1024.0f}) host.push_back(T(x));
  auto device = on_device(comm, host);
  comm.allreduce_sum(device.span());  // one rank: the sum is the input
  expect_same(device, host, std::string("allreduce_sum<") + type + "> on 1 rank");
  auto r = comm.iallreduce_sum(device.span());
  comm.wait(r);
  comm.wait(r);  // waiting a finished request is a no-op
  expect_same(device, host, std::string("iallreduce_sum<") + type + "> + wait on 1 rank");
}

void collectives(communicator& comm) {
  expect(comm.rank() == 0 && comm.size() == 1, "single_process(): rank 0 of 1");
  expect(comm.backend_name() == "nccl", "backend_name() is nccl");
  all_reduce<float>(comm, "float");
  all_reduce<double>(comm, "double");
  all_reduce<strata::half>(comm, "half");
  all_reduce<strata::bfloat16>(comm, "bfloat16");

  const std::vector<double> values = {3.0, -1.5, 7.25};
  auto broadcast = on_device(comm, values);
  comm.broadcast(broadcast.span(), 0);
  expect_same(broadcast, values, "broadcast from rank 0");

  auto mine = on_device(comm, std::vector<float>{4.0f, 5.0f, 6.0f});
  auto all = on_device(comm, std::vector<float>{0.0f, 0.0f, 0.0f});
  comm.allgather(std::span<const float>(mine.span()), all.span());
  expect_same(all, std::vector<float>{4.0f, 5.0f, 6.0f}, "allgather on 1 rank");

  comm.barrier();
}

void to_itself(communicator& comm) {
  const std::vector<float> sent = {1.0f, 2.0f, 3.0f, 4.0f};
  auto from = on_device(comm, sent);
  auto to = on_device(comm, std::vector<float>(sent.size(), 0.0f));
  // Posted receive first, as the ring does: both start together at the first wait.
  auto received = comm.irecv(to.span(), 0, 7);
  auto send = comm.isend(std::span<const float>(from.span()), 0, 7);
  comm.wait(received);
  comm.wait(send);
  expect_same(to, sent, "isend/irecv to itself");
}

void split(communicator& comm) {
  communicator child = comm.split(0, 0);
  expect(child.rank() == 0 && child.size() == 1, "split(0, 0) on 1 rank: rank 0 of 1");
  expect(child.stream() != comm.stream(), "a split communicator has a stream of its own");
  const std::vector<float> values = {2.0f, 4.0f};
  auto data = on_device(child, values);
  child.allreduce_sum(data.span());
  expect_same(data, values, "allreduce_sum on a split communicator");
}

void errors(communicator& comm) {
  auto mine = on_device(comm, std::vector<float>{1.0f, 2.0f});
  auto all = on_device(comm, std::vector<float>{0.0f, 0.0f, 0.0f});
  expect_throws<strata::usage_error>([&] { comm.allgather(std::span<const float>(mine.span()), all.span()); },
                                     {"allgather", "rank 0", "2 elements", "3 elements"}, "allgather into the wrong size");
  expect_throws<strata::usage_error>([&] { comm.split(-1, 0); }, {"split", "rank 0", "negative"}, "split with a negative color");
  all_reduce<float>(comm, "float, after rejected arguments");  // checked before NCCL: still usable

  // NCCL checks the root itself; its explanation reaches the message. (Whether the
  // communicator survives is NCCL's call, so this uses one of its own.)
  communicator other = communicator::single_process(comm.device());
  auto data = on_device(other, std::vector<float>{1.0f});
  expect_throws<strata::comm_error>([&] { other.broadcast(data.span(), 1); }, {"ncclBroadcast", "rank 0", "invalid"},
                                    "broadcast from a root that does not exist");
}

void deadline(int device) {
  // A communicator of two ranks that only this one joins: its initialization can never
  // finish, so the wait for it must reach the deadline (the timeout path itself, which a
  // receive from itself does not: NCCL may refuse that outright).
  ncclUniqueId id;
  expect(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  const auto start = std::chrono::steady_clock::now();
  expect_throws<strata::timeout_error>(
      [&] { communicator lonely(id, 2, 0, device, 0, {.timeout = std::chrono::seconds(2)}); },
      {"rank 0", "nccl::options::timeout"}, "a communicator whose other rank never joins");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect(waited >= 1.9 && waited < 30.0, "the wait for the missing rank lasted the deadline, " + std::to_string(waited) + " s");

  // A receive that no send answers: the wait gives up at the deadline and aborts.
  communicator comm = communicator::single_process(device, {.timeout = std::chrono::seconds(2)});
  auto data = on_device(comm, std::vector<float>(4, 0.0f));
  auto r = comm.irecv(data.span(), 0, 0);
  bool timed_out = false;
  try {
    comm.wait(r);
    expect(false, "a receive without a send: wait returned");
  } catch (const strata::timeout_error& e) {
    timed_out = true;
    expect(std::string_view(e.what()).find("rank 0") != std::string_view::npos, std::string("timeout names the rank: ") + e.what());
  } catch (const strata::comm_error& e) {  // NCCL may refuse the unmatched receive instead
    std::printf("note: NCCL refused a receive from itself without a send: %s\n", e.what());
  }
  if (timed_out)
    expect_throws<strata::comm_error>([&] { comm.barrier(); }, {"barrier", "aborted"}, "a call after the timeout");
}

}  // namespace

int main() {
  try {
    if (!strata::cuda::device_available()) {
      std::puts("no CUDA device: skipped");
      return STRATA_GPU_SKIP_CODE;
    }
    strata::nccl::check_versions();
    communicator comm = communicator::single_process();
    // Each part names itself first, so that an exception says where it came from.
    const auto part = [](const char* name, auto&& run) {
      std::printf("%s\n", name);
      std::fflush(stdout);
      run();
    };
    part("collectives", [&] { collectives(comm); });
    part("to_itself", [&] { to_itself(comm); });
    part("split", [&] { split(comm); });
    part("errors", [&] { errors(comm); });
    part("deadline", [&] { deadline(comm.device()); });
  } catch (const std::exception& e) {
    std::printf("FAILED with an exception: %s\n", e.what());
    return 1;
  }
  std::printf("%s\n", gpu_test::failures == 0 ? "all passed" : "some checks FAILED");
  return gpu_test::failures == 0 ? 0 : 1;
}
