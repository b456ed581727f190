// STRATA_TIMELINE across ranks: 3 ranks train a dense all-reduced layer and a table on the
// parameter server for a few updates, rank 2 lagging 100 ms before each step, then save a
// checkpoint. Each rank writes its trace; rank 0 reads all of them and checks that each is
// JSON in the trace-event format, that its spans nest on every thread, that every rank has
// its own track with the events the timeline promises (steps, collectives with bytes,
// pushes, applications, updates, waits, the checkpoint), and that the straggler shows as
// waits on the others: at least most of its lag, per update, on ranks 0 and 1, little on
// rank 2 itself.
//
//   STRATA_TIMELINE=<dir>/run.json mpirun -np 3 ./timeline_test <checkpoint dir>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "strata/strata.hpp"

namespace {

using namespace strata;
using json = nlohmann::json;

constexpr int updates = 5;
constexpr double lag_ms = 100.0;  // long beside the scheduling delays of a loaded machine (ctest -j2 oversubscribes)

void expect(bool holds, const std::string& what) {
  if (!holds) throw std::runtime_error("timeline: " + what);
}

void train(mpi::context& ctx, const std::filesystem::path& checkpoints) {
  std::vector<float> w(1 << 16, 0.5f), gw(w.size(), 1e-3f), t(512 * 16, 0.25f), gt(t.size(), 1e-3f);
  auto m = make_model(variable<Strategy<AllReduce<Ring>>>("dense.weight", w, gw, {256, 256}),
                      variable<Strategy<PS<2>, Partition<0>>>("table", t, gt, {512, 16}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 0.1f});
  for (int u = 0; u < updates; ++u) {
    if (ctx.rank() == 2) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(lag_ms));
    exec.step();
  }
  exec.save_checkpoint(ckpt::store(checkpoints));
}

/// Every complete ("X") event of one thread lies inside the one before it that is still
/// open, or after it: spans nest.
void expect_nested(std::vector<const json*> spans, int rank, int tid) {
  std::ranges::sort(spans, [](const json* a, const json* b) {
    const double ta = (*a)["ts"], tb = (*b)["ts"];
    return ta != tb ? ta < tb : (*a)["dur"].get<double>() > (*b)["dur"].get<double>();
  });
  constexpr double slack_us = 1e-3;  // microseconds printed as decimals
  std::vector<double> open_until;
  for (const json* e : spans) {
    const double begin = (*e)["ts"], end = begin + (*e)["dur"].get<double>();
    while (!open_until.empty() && begin >= open_until.back() - slack_us) open_until.pop_back();
    expect(open_until.empty() || end <= open_until.back() + slack_us,
           fmt::format("rank {} thread {}: \"{}\" at {} us overlaps the end of the span it starts in", rank, tid,
                       (*e)["name"].get<std::string>(), begin));
    open_until.push_back(end);
  }
}

/// Checks rank `rank`'s trace; returns its total time in "wait" spans within steps, in ms.
double check_trace(const std::filesystem::path& file, int rank, int ranks) {
  std::ifstream in(file);
  expect(in.good(), fmt::format("rank {} wrote no trace at {}", rank, file.string()));
  const json trace = json::parse(in);  // throws on malformed JSON
  expect(trace["otherData"]["rank"] == rank && trace["otherData"]["ranks"] == ranks,
         fmt::format("{} does not say it is rank {} of {}", file.string(), rank, ranks));
  expect(trace["otherData"]["dropped_events"] == 0, "events were dropped");
  std::map<int, std::string> threads;
  std::map<int, std::vector<const json*>> spans;
  std::multiset<std::string> names;
  double waited_ms = 0.0, all_reduced_bytes = 0.0;
  for (const json& e : trace["traceEvents"]) {
    expect(e["pid"] == rank, fmt::format("an event of rank {}'s trace is on track {}", rank, e["pid"].dump()));
    const std::string ph = e["ph"], name = e["name"];
    if (ph == "M") {
      if (name == "thread_name") threads[e["tid"]] = e["args"]["name"];
      continue;
    }
    expect(ph == "X" || ph == "i", fmt::format("event \"{}\" has phase {}", name, ph));
    expect(e["ts"].get<double>() >= 0.0, fmt::format("event \"{}\" starts before time 0", name));
    names.insert(name);
    if (ph == "X") {
      spans[e["tid"]].push_back(&e);
      if (name == "wait" && e["args"]["detail"].get<std::string>().starts_with("for the synchronization"))
        waited_ms += e["dur"].get<double>() / 1e3;
      if (name == "all-reduce") all_reduced_bytes += e["args"]["bytes"].get<double>();
    }
  }
  for (auto& [tid, list] : spans) expect_nested(list, rank, tid);
  std::set<std::string> thread_names;
  for (const auto& [tid, name] : threads) thread_names.insert(name);
  expect(thread_names.contains("training") && thread_names.contains("communication"),
         fmt::format("rank {} has no training or no communication track", rank));
  for (const char* wanted : {"step", "launch", "all-reduce", "push", "pull", "reply", "update", "wait", "checkpoint"})
    expect(names.contains(wanted), fmt::format("rank {}'s trace has no \"{}\" event", rank, wanted));
  expect(names.count("step") == updates, fmt::format("rank {} traced {} steps, not {}", rank, names.count("step"), updates));
  // Each update all-reduces the dense layer: at least (p-1)/p of its bytes leave each rank.
  expect(all_reduced_bytes >= updates * (1 << 16) * 4.0 * (ranks - 1) / ranks,
         fmt::format("rank {}'s all-reduce events carry {} bytes", rank, all_reduced_bytes));
  return waited_ms;
}

}  // namespace

int main(int argc, char** argv) {
  mpi::context ctx(argc, argv);
  try {
    expect(argc == 2, "usage: timeline_test <checkpoint dir> (with STRATA_TIMELINE set)");
    const char* path = std::getenv("STRATA_TIMELINE");
    expect(path != nullptr && trace::on(), "STRATA_TIMELINE is not set, or did not start the timeline");
    if (ctx.rank() == 0) std::filesystem::remove_all(argv[1]);  // an earlier run's checkpoints
    ctx.control().barrier();
    train(ctx, argv[1]);
    const std::filesystem::path mine = trace::timeline::instance().write();
    expect(mine == trace::timeline::file_of(path, ctx.rank()), "the trace went to " + mine.string());
    ctx.control().barrier();
    if (ctx.rank() == 0) {
      std::vector<double> waited;
      for (int r = 0; r < ctx.size(); ++r) waited.push_back(check_trace(trace::timeline::file_of(path, r), r, ctx.size()));
      std::printf("waits: rank 0 %.1f ms, rank 1 %.1f ms, rank 2 (the straggler) %.1f ms over %d updates\n", waited[0],
                  waited[1], waited[2], updates);
      for (int r : {0, 1})
        expect(waited[static_cast<std::size_t>(r)] >= 0.7 * updates * lag_ms,
               fmt::format("rank {} waited {:.1f} ms for a straggler {:.0f} ms late on each of {} updates", r,
                           waited[static_cast<std::size_t>(r)], lag_ms, updates));
      expect(waited[2] < 0.5 * std::min(waited[0], waited[1]), "the straggler waited as long as the others");
      std::printf("timeline: %d ranks' traces parse, nest and show the straggler\n", ctx.size());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", ctx.rank(), e.what());
    return 1;
  }
  return 0;
}
