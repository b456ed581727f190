// The simulated device and the sim backend: CUDA's stream and memory semantics and NCCL's
// collective semantics, at 2, 3, 4 and 8 ranks (threads). These are the properties the GPU
// path's tests rely on: that a missing stream wait or an early free changes the numbers,
// and that a stalled or mismatched rank ends in an error naming it.
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/comm/sim/sim.hpp"
#include "strata/sim/device.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

/// Catch2's assertions are for the main thread: a rank's failed expectation throws, and
/// sim::run rethrows it there.
void expect(bool holds, const std::string& what) {
  if (!holds) throw std::runtime_error("expected: " + what);
}

/// Copies `n` elements from device memory to a host vector and waits.
template <class T>
std::vector<T> to_host(sim::device& d, sim::stream_t s, const T* from, std::size_t n) {
  std::vector<T> out(n);
  sim::copy_async(out.data(), from, n * sizeof(T), s);
  d.synchronize(s);
  return out;
}

template <class T>
void upload(sim::device& d, sim::stream_t s, T* to, const std::vector<T>& from) {
  sim::copy_async(to, from.data(), from.size() * sizeof(T), s);
  d.synchronize(s);
}

sim::device_options fast(std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  return {.seed = 7, .max_delay = std::chrono::microseconds(50), .poison = true, .timeout = timeout};
}

}  // namespace

TEMPLATE_TEST_CASE("sim collectives give NCCL's results", "[simdev]", float, half, bfloat16) {
  const int ranks = GENERATE(2, 3, 4, 8);
  CAPTURE(ranks);
  REQUIRE_NOTHROW(sim::run(ranks, fast(), [&](sim::communicator& comm, sim::device& d) {
    const std::size_t block = 5, n = block * static_cast<std::size_t>(ranks);
    const auto r = static_cast<float>(comm.rank());
    std::vector<TestType> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = TestType(r + static_cast<float>(i % 4));  // exact in 16 bits
    sim::device_buffer<TestType> buffer(n, comm.stream());
    const float rank_sum = static_cast<float>(ranks * (ranks - 1) / 2);

    upload(d, comm.stream(), buffer.data(), values);
    comm.allreduce_sum(buffer.span());
    const auto summed = to_host(d, comm.stream(), buffer.data(), n);
    for (std::size_t i = 0; i < n; ++i)
      expect(static_cast<float>(summed[i]) == rank_sum + static_cast<float>(ranks) * static_cast<float>(i % 4),
             "the all-reduced sum");

    upload(d, comm.stream(), buffer.data(), values);
    auto req = comm.ireduce_scatter_sum(buffer.span());
    comm.wait(req);
    const auto scattered = to_host(d, comm.stream(), buffer.data(), n);
    for (std::size_t i = comm.rank() * block; i < (comm.rank() + 1) * block; ++i)
      expect(static_cast<float>(scattered[i]) == rank_sum + static_cast<float>(ranks) * static_cast<float>(i % 4),
             "this rank's reduce-scattered block");

    // Each rank's own block reaches every rank.
    std::vector<TestType> own(n, TestType(-1.0f));
    for (std::size_t i = 0; i < block; ++i) own[comm.rank() * block + i] = TestType(r);
    upload(d, comm.stream(), buffer.data(), own);
    req = comm.iallgather_blocks(buffer.span());
    comm.wait(req);
    const auto gathered = to_host(d, comm.stream(), buffer.data(), n);
    for (std::size_t i = 0; i < n; ++i)
      expect(static_cast<float>(gathered[i]) == static_cast<float>(i / block), "every rank's block, gathered");

    // The average of equal values is the value (pre-multiplied by 1/size, as ncclAvg).
    upload(d, comm.stream(), buffer.data(), std::vector<TestType>(n, TestType(float(ranks))));
    req = comm.iallreduce_average(buffer.span());
    comm.wait(req);
    for (const TestType& x : to_host(d, comm.stream(), buffer.data(), n))
      expect(std::abs(static_cast<float>(x) - static_cast<float>(ranks)) <= 0.02f * static_cast<float>(ranks),
             "the average of equal values");
  }));
}

TEST_CASE("sim broadcast, allgather and barrier move bytes between ranks", "[simdev]") {
  const int ranks = GENERATE(2, 3, 4, 8);
  CAPTURE(ranks);
  REQUIRE_NOTHROW(sim::run(ranks, fast(), [&](sim::communicator& comm, sim::device& d) {
    sim::device_buffer<int> value(3, comm.stream());
    upload(d, comm.stream(), value.data(), std::vector<int>(3, 100 + comm.rank()));
    comm.broadcast(value.span(), ranks - 1);
    expect(to_host(d, comm.stream(), value.data(), 3) == std::vector<int>(3, 100 + ranks - 1), "the root's values");

    sim::device_buffer<int> all(static_cast<std::size_t>(ranks), comm.stream());
    upload(d, comm.stream(), value.data(), std::vector<int>{comm.rank(), 0, 0});
    comm.allgather(std::span<const int>(value.data(), 1), all.span());
    std::vector<int> expected(static_cast<std::size_t>(ranks));
    std::iota(expected.begin(), expected.end(), 0);
    expect(to_host(d, comm.stream(), all.data(), expected.size()) == expected, "every rank's value, in rank order");
    comm.barrier();
  }));
}

TEST_CASE("sim sends and receives pair in posting order, as one group", "[simdev]") {
  const int ranks = GENERATE(2, 3, 4, 8);
  CAPTURE(ranks);
  REQUIRE_NOTHROW(sim::run(ranks, fast(), [&](sim::communicator& comm, sim::device& d) {
    // A ring: every rank sends right and receives left, two messages each way; one at a
    // time this would deadlock, as it does under NCCL.
    const int right = (comm.rank() + 1) % ranks, left = (comm.rank() + ranks - 1) % ranks;
    sim::device_buffer<float> out(4, comm.stream()), in(4, comm.stream());
    upload(d, comm.stream(), out.data(), std::vector<float>{float(comm.rank()), 1, float(comm.rank()), 2});
    comm.isend(std::span<const float>(out.data(), 2), right, 0);
    comm.isend(std::span<const float>(out.data() + 2, 2), right, 0);
    comm.irecv(std::span<float>(in.data(), 2), left, 0);
    auto last = comm.irecv(std::span<float>(in.data() + 2, 2), left, 0);
    comm.wait(last);
    expect(to_host(d, comm.stream(), in.data(), 4) == std::vector<float>{float(left), 1, float(left), 2},
           "the left neighbour's two messages, in order");
  }));
}

TEST_CASE("sim ranks that call different collectives fail at once, naming both calls", "[simdev]") {
  const int ranks = GENERATE(2, 4);
  CAPTURE(ranks);
  const auto started = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(sim::run(ranks, fast(), [&](sim::communicator& comm, sim::device&) {
                        sim::device_buffer<float> buffer(comm.rank() == ranks - 1 ? 6 : 8, comm.stream());
                        comm.allreduce_sum(buffer.span());
                      }),
                      Contains("as their collective #0") && Contains("allreduce sum (fp32 x 6)") &&
                          Contains("allreduce sum (fp32 x 8)") && Contains("rank " + std::to_string(ranks - 1)));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));  // at once, not at a deadline
}

TEST_CASE("sim a rank that stops is named by the others within the deadline", "[simdev]") {
  const int ranks = GENERATE(2, 3, 8);
  const auto deadline = std::chrono::milliseconds(1000);
  const int stopped = ranks - 1;
  std::vector<std::string> messages(static_cast<std::size_t>(ranks));
  std::vector<std::chrono::steady_clock::duration> took(static_cast<std::size_t>(ranks));
  REQUIRE_NOTHROW(sim::run(ranks, fast(deadline), [&](sim::communicator& comm, sim::device&) {
    sim::device_buffer<float> buffer(16, comm.stream());
    comm.allreduce_sum(buffer.span());  // collective #0: everyone
    if (comm.rank() == stopped) return;  // stops before collective #1
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.allreduce_sum(buffer.span());
    } catch (const timeout_error& e) {
      messages[static_cast<std::size_t>(comm.rank())] = e.what();
    }
    took[static_cast<std::size_t>(comm.rank())] = std::chrono::steady_clock::now() - start;
  }));
  for (int r = 0; r < stopped; ++r) {
    CAPTURE(r);
    CHECK_THAT(messages[static_cast<std::size_t>(r)],
               Contains("collective #1 waits for rank " + std::to_string(stopped) + " (1 reached)") &&
                   Contains("allreduce sum (fp32 x 16), collective #1"));
    CHECK(took[static_cast<std::size_t>(r)] < deadline + std::chrono::seconds(2));
  }
}

TEST_CASE("sim abort fails this rank's pending operations", "[simdev]") {
  std::string message;
  REQUIRE_NOTHROW(sim::run(2, fast(), [&](sim::communicator& comm, sim::device&) {
    sim::device_buffer<float> buffer(4, comm.stream());
    if (comm.rank() == 0) {
      auto pending = comm.iallreduce_sum(buffer.span());  // rank 1 never joins
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      comm.abort("the test gave up");
      try {
        comm.wait(pending);
      } catch (const comm_error& e) {
        message = e.what();
      }
    }
  }));
  CHECK_THAT(message, Contains("wait after abort (the test gave up)"));
}

TEST_CASE("sim an event orders work across streams; without it the streams race", "[simdev]") {
  sim::device d(fast());
  sim::owned_stream producer(d, "producer"), consumer(d, "consumer");
  sim::device_buffer<int> value(1, producer);
  auto run = [&](bool ordered) {
    sim::memset_async(value.data(), 0, sizeof(int), producer);
    d.synchronize(producer);
    sim::launch(producer, "slow write", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      *value.data() = 42;
    });
    if (ordered) {
      sim::event written;
      written.record(producer);
      d.wait_event(consumer, written);
    }
    int seen = -1;
    sim::launch(consumer, "read", [&] { seen = *value.data(); });
    d.synchronize(consumer);
    d.synchronize(producer);
    return seen;
  };
  CHECK(run(true) == 42);
#if !defined(__SANITIZE_THREAD__)  // there, the unordered run is the data race it reports
  CHECK(run(false) == 0);  // the reader ran before the 5 ms write
#endif
}

TEST_CASE("sim freed memory is poisoned and handed out again at once", "[simdev]") {
  sim::device d(fast());
  sim::owned_stream owner(d, "owner"), reader(d, "reader");
  auto read_after_free = [&](bool wait_for_reader) {
    auto buffer = std::make_unique<sim::device_buffer<float>>(64, owner);
    float* data = buffer->data();
    std::vector<float> ones(64, 1.0f);
    upload(d, owner, data, ones);
    float seen = 0;
    sim::launch(reader, "late read", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      seen = data[7];
    });
    if (wait_for_reader) {  // the fix: the free waits for the last reader
      sim::event read;
      read.record(reader);
      d.wait_event(owner, read);
    }
    buffer.reset();  // freed in order on `owner`
    d.synchronize(owner);
    sim::device_buffer<float> next(64, owner);  // the same block, at once
    CHECK(next.data() == data);
    d.synchronize(reader);
    return seen;
  };
  CHECK(read_after_free(true) == 1.0f);
#if !defined(__SANITIZE_THREAD__)  // there, the early free is the data race it reports
  CHECK(std::isnan(read_after_free(false)));
#endif
}

TEST_CASE("sim a stalled stream's deadline lists what every stream still holds", "[simdev]") {
  sim::device d(fast(std::chrono::milliseconds(200)));
  sim::owned_stream stuck(d, "stuck"), other(d, "other");
  sim::event never;  // recorded on a stream that waits for longer than the deadline
  sim::launch(other, "long kernel", [] { std::this_thread::sleep_for(std::chrono::milliseconds(600)); });
  never.record(other);
  d.wait_event(stuck, never);
  sim::launch(stuck, "the kernel after it", [] {});
  REQUIRE_THROWS_WITH(d.synchronize(stuck, " on rank 0"),
                      Contains("sim::device on rank 0: stream \"stuck\" did not finish") &&
                          Contains("running: wait for other #1") &&
                          Contains("then: the kernel after it") && Contains("running: long kernel"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  d.synchronize(stuck);  // it does finish, after the long kernel
}

TEST_CASE("sim sends and receives of different sizes fail naming both ranks", "[simdev]") {
  REQUIRE_THROWS_WITH(sim::run(2, fast(), [&](sim::communicator& comm, sim::device&) {
                        sim::device_buffer<float> buffer(8, comm.stream());
                        if (comm.rank() == 0) {
                          auto r = comm.isend(std::span<const float>(buffer.data(), 8), 1, 0);
                          comm.wait(r);
                        } else {
                          auto r = comm.irecv(std::span<float>(buffer.data(), 4), 0, 0);
                          comm.wait(r);
                        }
                      }),
                      Contains("rank 0 sent 32 bytes to rank 1, which posted a receive of 16 bytes"));
}

TEST_CASE("sim split forms groups ordered by key, whose collectives stay in the group", "[simdev]") {
  const int ranks = GENERATE(4, 8);
  CAPTURE(ranks);
  REQUIRE_NOTHROW(sim::run(ranks, fast(), [&](sim::communicator& comm, sim::device& d) {
    // Two colors (even and odd ranks), each ordered by descending world rank.
    sim::communicator group = comm.split(comm.rank() % 2, -comm.rank());
    expect(group.size() == ranks / 2, "half the ranks in each group");
    expect(group.rank() == (ranks - 1 - comm.rank()) / 2, "ranks ordered by key");
    sim::device_buffer<float> value(1, group.stream());
    const std::vector<float> mine{static_cast<float>(comm.rank())};
    upload(d, group.stream(), value.data(), mine);
    group.allreduce_sum(value.span());
    float expected = 0;
    for (int r = comm.rank() % 2; r < ranks; r += 2) expected += static_cast<float>(r);
    expect(to_host(d, group.stream(), value.data(), 1)[0] == expected, "the sum over this group only");
    comm.barrier();  // the parent goes on working beside its children
  }));
}

TEST_CASE("sim a split that a rank never calls times out, naming it", "[simdev]") {
  std::string message;
  REQUIRE_NOTHROW(sim::run(3, fast(std::chrono::milliseconds(500)), [&](sim::communicator& comm, sim::device&) {
    if (comm.rank() == 2) return;
    try {
      comm.split(0, comm.rank());
    } catch (const timeout_error& e) {
      if (comm.rank() == 0) message = e.what();
    }
  }));
  CHECK_THAT(message, Contains("split #0 waits for rank 2"));
}
