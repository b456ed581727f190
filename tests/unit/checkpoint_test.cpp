// Checkpoints on loopback ranks: the file format and its refusal of damaged files, exact
// resumption, resharding between world sizes, keeping the last K, and falling back to the
// previous checkpoint when the newest is corrupted.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "conformance/ps_cases.hpp"
#include "conformance/temporary_folder.hpp"

using namespace strata;
namespace fs = std::filesystem;

namespace {

using conformance::temporary_folder;

std::vector<std::byte> sample_file() {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  ckpt::file_builder file;
  file.add({.kind = ckpt::record_kind::slice, .name = "w", .shape = {2, 3}, .begin = 2, .count = 3, .source_rank = 1,
            .payload = std::as_bytes(std::span(values))});
  file.add({.kind = ckpt::record_kind::rank_local, .name = "r", .shape = {3}, .begin = 0, .count = 3, .source_rank = 1,
            .payload = std::as_bytes(std::span(values))});
  const std::string text = "step 7";
  file.add(ckpt::detail::blob("meta/position", text));
  return std::move(file).finish();
}

// A model whose every part has checkpoint state: FP16 with error feedback on matrices and an
// uncompressed vector, under Adam.
using Compressed = Strategy<AllReduce<Ring>, Compress<FP16, ErrorFeedback>>;
using Plain = Strategy<AllReduce<Ring>>;
using Mixed = model_of<Compressed, Plain>;

/// Where the replica's gradients live: each in a vector of its own, or the two compressed
/// matrices in one tensor_arena, where they follow each other as a bucket lists them.
enum class gradients { separate, arena };

struct replica {
  std::vector<std::vector<float>> params, separate;
  std::optional<tensor_arena<float>> arena;
  std::vector<std::span<float>> grads;
  Mixed m;
  explicit replica(gradients memory = gradients::separate) {
    const std::vector<std::size_t> sizes = {12 * 7, 5, 300};
    for (std::size_t n : sizes) {
      params.emplace_back(n, 0.25f);
      separate.emplace_back(n, 0.0f);
    }
    for (auto& g : separate) grads.emplace_back(g);
    if (memory == gradients::arena) {
      arena.emplace(std::vector<std::size_t>{sizes[0], sizes[2]});
      grads[0] = (*arena)[0];
      grads[2] = (*arena)[1];
    }
    m.add(variable<Compressed>("fc.weight", params[0], grads[0], {12, 7}));
    m.add(variable<Plain>("fc.bias", params[1], grads[1], {5}));
    m.add(variable<Compressed>("out.weight", params[2], grads[2], {30, 10}));
  }
  /// Gradients that differ by rank and update and are not exactly representable in fp16.
  void backward(int rank, std::int64_t update) {
    for (std::size_t v = 0; v < grads.size(); ++v)
      for (std::size_t i = 0; i < grads[v].size(); ++i)
        grads[v][i] = std::sin(0.37f * static_cast<float>(i + 3 * v) + 0.91f * static_cast<float>(rank) +
                               0.13f * static_cast<float>(update)) / 3.0f;
  }
};

executor_options small_buckets() { return {.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 512}}; }

/// Every tensor of rank `ctx.rank()`'s executor state, by name.
template <class Exec>
std::map<std::string, std::vector<float>> snapshot(Exec& exec) {
  std::map<std::string, std::vector<float>> result;
  const ckpt::state_set set = exec.state();
  for (const ckpt::tensor_state& t : set.tensors()) result[t.name].assign(t.data.begin(), t.data.end());
  return result;
}

/// Trains `updates` updates on `ranks` ranks, from `resume` if given, saving at the end
/// into `save` if given. Returns every rank's state.
std::vector<std::map<std::string, std::vector<float>>> train(int ranks, int updates, const ckpt::store* resume,
                                                             const ckpt::store* save,
                                                             gradients memory = gradients::separate,
                                                             const executor_options& options = small_buckets()) {
  std::vector<std::map<std::string, std::vector<float>>> states(static_cast<std::size_t>(ranks));
  loopback::run(ranks, [&](loopback::context& ctx) {
    replica r(memory);
    auto exec = make_executor(ctx, r.m, optim::adam{.lr = 0.01f}, options);
    if (resume) conformance::expect(exec.restore_checkpoint(*resume).has_value(), "nothing to restore");
    for (int u = 0; u < updates; ++u) {
      r.backward(ctx.rank(), exec.updates() + 1);
      exec.step();
    }
    if (save) exec.save_checkpoint(*save, {{"epoch", "3"}});
    states[static_cast<std::size_t>(ctx.rank())] = snapshot(exec);
  });
  return states;
}

std::vector<float> sum_over_ranks(const std::vector<std::map<std::string, std::vector<float>>>& states,
                                  const std::string& name) {
  std::vector<float> sum(states[0].at(name).size(), 0.0f);
  for (const auto& s : states)
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += s.at(name)[i];
  return sum;
}

}  // namespace

TEST_CASE("a checkpoint file parses back to its records", "[checkpoint][format]") {
  const std::vector<std::byte> bytes = sample_file();
  const std::vector<ckpt::record> records = ckpt::parse_file(bytes, "sample");
  REQUIRE(records.size() == 3);
  CHECK(records[0].kind == ckpt::record_kind::slice);
  CHECK(records[0].name == "w");
  CHECK(records[0].shape == std::vector<std::uint64_t>{2, 3});
  CHECK(records[0].begin == 2);
  CHECK(records[0].source_rank == 1);
  CHECK(records[0].floats() == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(records[1].kind == ckpt::record_kind::rank_local);
  CHECK(records[2].text() == "step 7");
}

TEST_CASE("every truncation and every flipped bit of a checkpoint file is refused", "[checkpoint][format]") {
  const std::vector<std::byte> bytes = sample_file();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    CHECK_THROWS_AS(ckpt::parse_file(std::span(bytes).first(n), "sample"), ckpt::checkpoint_error);
  }
  for (std::size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<std::byte> damaged = bytes;
      damaged[i] ^= std::byte(1u << bit);
      INFO("byte " << i << " bit " << bit);
      CHECK_THROWS_AS(ckpt::parse_file(damaged, "sample"), ckpt::checkpoint_error);
    }
}

TEST_CASE("a damaged file's error names the file and the defect", "[checkpoint][format]") {
  std::vector<std::byte> bytes = sample_file();
  CHECK_THROWS_WITH(ckpt::parse_file(std::span(bytes).first(bytes.size() - 5), "rank-1.ckpt"),
                    Catch::Contains("rank-1.ckpt") && Catch::Contains("CRC-32"));
  bytes[8] = std::byte{2};  // format version 2
  CHECK_THROWS_WITH(ckpt::parse_file(bytes, "x.ckpt"), Catch::Contains("format version 2") && Catch::Contains("version 1"));
  bytes[0] = std::byte{'X'};
  CHECK_THROWS_WITH(ckpt::parse_file(bytes, "x.ckpt"), Catch::Contains("not a strata checkpoint"));
}

TEST_CASE("resuming from a checkpoint continues bitwise as if never interrupted", "[checkpoint][executor]") {
  temporary_folder folder;
  const ckpt::store store(folder.path);
  const auto uninterrupted = train(3, 6, nullptr, nullptr);
  train(3, 3, nullptr, &store);
  const auto resumed = train(3, 3, &store, nullptr);
  for (std::size_t r = 0; r < uninterrupted.size(); ++r) {
    INFO("rank " << r);
    CHECK(resumed[r] == uninterrupted[r]);  // parameters, Adam moments, fp16 residuals: every bit
  }
  CHECK(uninterrupted[0].count("fc.weight/exp_avg_sq") == 1);
  CHECK(uninterrupted[0].count("out.weight/feedback_residual") == 1);
  CHECK(uninterrupted[0].count("fc.bias/feedback_residual") == 0);  // uncompressed: no residual
}

TEST_CASE("gradients in one tensor_arena train and checkpoint bitwise as separate ones do", "[checkpoint][executor]") {
  // One bucket holds both compressed matrices. In the arena they follow each other, so the
  // bucket is one part of memory, and each variable still gets its own error-feedback residual.
  const executor_options one_bucket{.buckets = {.first_bucket_bytes = 1 << 20, .bucket_bytes = 1 << 20}};
  const auto separate = train(3, 4, nullptr, nullptr, gradients::separate, one_bucket);
  const auto arena = train(3, 4, nullptr, nullptr, gradients::arena, one_bucket);
  CHECK(arena == separate);
  CHECK(arena[0].count("out.weight/feedback_residual") == 1);
  temporary_folder folder;
  const ckpt::store store(folder.path);
  train(3, 2, nullptr, &store, gradients::arena, one_bucket);
  CHECK(train(3, 2, &store, nullptr, gradients::arena, one_bucket) == arena);
}

TEST_CASE("a checkpoint restores into another world size", "[checkpoint][resharding]") {
  for (auto [from, to] : {std::pair{4, 2}, std::pair{2, 4}, std::pair{3, 3}}) {
    INFO(from << " ranks -> " << to << " ranks");
    temporary_folder folder;
    const ckpt::store store(folder.path);
    const auto saved = train(from, 3, nullptr, &store);
    const auto restored = train(to, 0, &store, nullptr);
    for (const auto& [name, values] : saved[0]) {
      INFO(name);
      if (name.ends_with("feedback_residual")) {
        // Each rank's own; what matters to the next update is their sum, which is kept.
        const std::vector<float> before = sum_over_ranks(saved, name), after = sum_over_ranks(restored, name);
        for (std::size_t i = 0; i < before.size(); ++i) CHECK(after[i] == Approx(before[i]).margin(1e-7));
        if (from == to)
          for (std::size_t r = 0; r < saved.size(); ++r) CHECK(restored[r].at(name) == saved[r].at(name));
      } else {
        for (const auto& rank : restored) CHECK(rank.at(name) == values);  // replicated: exact on every rank
      }
    }
  }
}

TEST_CASE("only the newest K checkpoints are kept, and abandoned ones are ignored", "[checkpoint]") {
  temporary_folder folder;
  const ckpt::store store(folder.path, 2);
  loopback::run(2, [&](loopback::context& ctx) {
    replica r;
    auto exec = make_executor(ctx, r.m, optim::sgd{.lr = 0.1f}, small_buckets());
    for (int u = 1; u <= 5; ++u) {
      r.backward(ctx.rank(), u);
      exec.step();
      exec.save_checkpoint(store, {{"update", std::to_string(u)}});
    }
  });
  CHECK(store.committed_steps() == std::vector<std::int64_t>{5, 4});
  fs::create_directories(store.folder_of(9));  // a save that crashed before its commit
  std::ofstream(store.folder_of(9) / "rank-00000-of-00002.ckpt.tmp.1") << "partial";
  CHECK(store.committed_steps() == std::vector<std::int64_t>{5, 4});
  loopback::run(2, [&](loopback::context& ctx) {
    replica r;
    auto exec = make_executor(ctx, r.m, optim::sgd{.lr = 0.1f}, small_buckets());
    const auto restored = exec.restore_checkpoint(store);
    conformance::expect(restored && restored->step == 5 && restored->meta.at("update") == "5" && exec.updates() == 5,
                        "restored the wrong checkpoint");
  });
}

TEST_CASE("a diverged model is not saved: every rank refuses, naming the tensor or the rank", "[checkpoint]") {
  temporary_folder folder;
  const ckpt::store store(folder.path);
  std::mutex mutex;
  std::vector<std::string> messages(2);
  loopback::run(2, [&](loopback::context& ctx) {
    replica r;
    auto exec = make_executor(ctx, r.m, optim::sgd{.lr = 0.1f}, small_buckets());
    r.backward(ctx.rank(), 1);
    exec.step();
    if (ctx.rank() == 1) r.params[1][3] = std::numeric_limits<float>::infinity();  // one rank's replica diverged
    try {
      exec.save_checkpoint(store);
    } catch (const numeric_error& e) {
      const std::lock_guard lock(mutex);
      messages[static_cast<std::size_t>(ctx.rank())] = e.what();
    }
  });
  CHECK_THAT(messages[1], Catch::Contains("\"fc.bias\" holds NaN or infinite values (the model diverged"));
  CHECK_THAT(messages[0], Catch::Contains("the state on rank 1 holds NaN or infinite values"));
  CHECK_THAT(messages[0], Catch::Contains("not saving checkpoint") && Catch::Contains("of update 1"));
  CHECK(store.committed_steps().empty());
}

TEST_CASE("a rank missing at a save is named by the others within the deadline, and nothing is committed",
          "[checkpoint][timeout]") {
  temporary_folder folder;
  const ckpt::store store(folder.path);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(loopback::run(3,
                                  [&](loopback::context& ctx) {
                                    replica r;
                                    executor_options options = small_buckets();
                                    options.timeout = std::chrono::milliseconds(300);
                                    auto exec = make_executor(ctx, r.m, optim::sgd{.lr = 0.1f}, options);
                                    r.backward(ctx.rank(), 1);
                                    exec.step();
                                    if (ctx.rank() != 1) exec.save_checkpoint(store);  // rank 1 stops before the save
                                  }),
                    Catch::Contains("step-000000000001") && Catch::Contains("rank 1 did not reach this step"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(store.committed_steps().empty());
}

TEST_CASE("a corrupted newest checkpoint is refused and the previous one restored", "[checkpoint][corruption]") {
  for (std::string damage : {"flip", "truncate", "remove", "commit"}) {
    INFO(damage);
    temporary_folder folder;
    const ckpt::store store(folder.path);
    train(2, 2, nullptr, &store);
    const auto previous = train(2, 0, &store, nullptr);
    const auto newest = train(2, 1, &store, &store);  // step 3
    REQUIRE(store.committed_steps() == std::vector<std::int64_t>{3, 2});
    const fs::path victim = damage == "commit" ? store.folder_of(3) / "commit.ckpt" : store.folder_of(3) / "rank-00001-of-00002.ckpt";
    if (damage == "remove") {
      fs::remove(victim);
    } else if (damage == "truncate" || damage == "commit") {
      fs::resize_file(victim, fs::file_size(victim) - 3);
    } else {
      std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(100);
      const char byte = static_cast<char>(f.get() ^ 0x10);
      f.seekp(100);
      f.put(byte);
    }
    // Asked for by step: a clear error naming the file.
    loopback::run(2, [&](loopback::context& ctx) {
      replica r;
      auto exec = make_executor(ctx, r.m, optim::adam{.lr = 0.01f}, small_buckets());
      try {
        store.restore(ctx.control(), 3, exec.state());
        conformance::expect(false, "a damaged checkpoint was restored");
      } catch (const ckpt::checkpoint_error& e) {
        conformance::expect(std::string_view(e.what()).find(victim.filename().string()) != std::string_view::npos,
                            "the error does not name {}: {}", victim.string(), e.what());
      }
    });
    // The newest usable: the previous checkpoint, exactly.
    const auto fallback = train(2, 0, &store, nullptr);
    CHECK(fallback == previous);
    CHECK(fallback != newest);
  }
}

/// Restores checkpoint `step` of `store` on 2 ranks; the checkpoint_error's message, or ""
/// when it was restored.
std::string restore_error(const ckpt::store& store, std::int64_t step) {
  std::string message;
  std::mutex mutex;
  loopback::run(2, [&](loopback::context& ctx) {
    replica r;
    auto exec = make_executor(ctx, r.m, optim::adam{.lr = 0.01f}, small_buckets());
    try {
      store.restore(ctx.control(), step, exec.state());
    } catch (const ckpt::checkpoint_error& e) {
      const std::lock_guard lock(mutex);
      message = e.what();
    }
  });
  return message;
}

TEST_CASE("a rank file copied in from another step or another run is refused, and the restore falls back",
          "[checkpoint][identity]") {
  const std::string rank1 = "rank-00001-of-00002.ckpt";
  for (std::string source : {"other step", "other run", "other run, commit too", "other rank", "whole folder"}) {
    INFO(source);
    temporary_folder folder, other_folder;
    const ckpt::store store(folder.path), other(other_folder.path);
    train(2, 2, nullptr, &store);                 // step 2
    const auto previous = train(2, 0, &store, nullptr);
    train(2, 1, &store, &store);                  // step 3
    train(2, 3, nullptr, &other);                 // another run's step 3, same model and world
    const fs::path target = store.folder_of(3) / rank1;
    if (source == "other step") {
      fs::copy_file(store.folder_of(2) / rank1, target, fs::copy_options::overwrite_existing);
    } else if (source == "other run") {
      fs::copy_file(other.folder_of(3) / rank1, target, fs::copy_options::overwrite_existing);
    } else if (source == "other run, commit too") {  // the commit agrees with the file, rank 0's file does not
      fs::copy_file(other.folder_of(3) / rank1, target, fs::copy_options::overwrite_existing);
      fs::copy_file(other.folder_of(3) / "commit.ckpt", store.folder_of(3) / "commit.ckpt", fs::copy_options::overwrite_existing);
    } else if (source == "other rank") {
      fs::copy_file(store.folder_of(3) / "rank-00000-of-00002.ckpt", target, fs::copy_options::overwrite_existing);
    } else {  // step 2's whole folder renamed to step 3
      fs::remove_all(store.folder_of(3));
      fs::copy(store.folder_of(2), store.folder_of(3));
    }
    const std::string message = restore_error(store, 3);
    CHECK_THAT(message, Catch::Contains("unusable"));
    CHECK(train(2, 0, &store, nullptr) == previous);
  }
}

TEST_CASE("a symlink loop or a folder in place of a checkpoint file falls back instead of aborting the restore",
          "[checkpoint][identity]") {
  for (std::string damage : {"folder as commit", "folder as rank file", "symlink loop"}) {
    INFO(damage);
    temporary_folder folder;
    const ckpt::store store(folder.path);
    train(2, 2, nullptr, &store);
    const auto previous = train(2, 0, &store, nullptr);
    train(2, 1, &store, &store);
    const fs::path commit = store.folder_of(3) / "commit.ckpt", rank1 = store.folder_of(3) / "rank-00001-of-00002.ckpt";
    if (damage == "folder as commit") {
      fs::remove(commit);
      fs::create_directory(commit);
    } else if (damage == "folder as rank file") {
      fs::remove(rank1);
      fs::create_directory(rank1);
    } else {
      fs::remove(commit);
      fs::create_symlink("loop.b", store.folder_of(3) / "loop.a");
      fs::create_symlink("loop.a", store.folder_of(3) / "loop.b");
      fs::create_symlink("loop.a", commit);
    }
    CHECK(train(2, 0, &store, nullptr) == previous);
  }
}

TEST_CASE("restoring into a different model is refused with the variable's name", "[checkpoint]") {
  temporary_folder folder;
  const ckpt::store store(folder.path);
  train(2, 1, nullptr, &store);
  loopback::run(2, [&](loopback::context& ctx) {
    std::vector<float> p(84), g(84);
    model<Compressed> m;
    m.add(variable<Compressed>("fc.weight", p, g, {7, 12}));  // transposed
    auto exec = make_executor(ctx, m, optim::adam{}, small_buckets());
    try {
      exec.restore_checkpoint(store);
      conformance::expect(false, "restored into the wrong shape");
    } catch (const ckpt::checkpoint_error& e) {
      conformance::expect(std::string_view(e.what()).find("\"fc.weight\" with shape [12,7]") != std::string_view::npos,
                          "unexpected message: {}", e.what());
    }
  });
}

TEST_CASE("checkpoints are taken between updates only", "[checkpoint][usage]") {
  temporary_folder folder;
  const ckpt::store store(folder.path);
  loopback::run(1, [&](loopback::context& ctx) {
    replica r;
    auto exec = make_executor(ctx, r.m, optim::sgd{}, {.accumulation_steps = 2});
    exec.step();  // first of two micro-batches
    try {
      exec.save_checkpoint(store);
      conformance::expect(false, "saved in the middle of an update");
    } catch (const usage_error& e) {
      conformance::expect(std::string_view(e.what()).find("1 of 2 micro-batches") != std::string_view::npos, "{}", e.what());
    }
  });
  CHECK_THROWS_AS(ckpt::store(folder.path, 0), usage_error);
}

namespace {

/// Rank 0's values after conformance::train_ps_checkpointed on `ranks` loopback ranks.
std::vector<float> train_ps(int ranks, int before, int after, const ckpt::store* restore, const ckpt::store* save) {
  std::vector<float> result;
  std::mutex mutex;
  loopback::run(ranks, [&](loopback::context& ctx) {
    std::vector<float> values = conformance::train_ps_checkpointed(ctx, before, after, restore, save);
    if (ctx.collectives().rank() != 0) return;
    std::lock_guard lock(mutex);
    result = std::move(values);
  });
  return result;
}

}  // namespace

TEST_CASE("parameter-server state is checkpointed by its hosts and restores into any world size", "[checkpoint][ps]") {
  for (auto [from, to] : {std::pair{3, 3}, std::pair{4, 2}, std::pair{2, 4}}) {
    INFO(from << " ranks -> " << to << " ranks");
    temporary_folder folder;
    const ckpt::store store(folder.path);
    const std::vector<float> uninterrupted = train_ps(from, 3, 3, nullptr, &store);
    const std::vector<float> resumed = train_ps(to, 0, 3, &store, nullptr);
    REQUIRE(resumed.size() == uninterrupted.size());
    for (std::size_t i = 0; i < resumed.size(); ++i) {
      INFO("value " << i);
      if (from == to) CHECK(resumed[i] == uninterrupted[i]);  // same shards, same order: exact
      else CHECK(resumed[i] == Approx(uninterrupted[i]).epsilon(1e-5));
    }
    // The restore really mattered: a fresh start ends elsewhere.
    CHECK(train_ps(to, 0, 3, nullptr, nullptr) != uninterrupted);
  }
}

TEST_CASE("a parameter-server checkpoint restores into another shard placement", "[checkpoint][ps]") {
  for (int ranks : {2, 3}) {
    temporary_folder folder;
    CHECK_NOTHROW(loopback::run(ranks, [&](loopback::context& ctx) {
      conformance::ps_checkpoint_restores_into_another_placement(ctx, folder.path);
    }));
  }
}

TEST_CASE("a sharded tensor saved as many slices restores into ranges that cut across them, each element once",
          "[checkpoint][resharding]") {
  // Saved by 2 ranks in slices of 7 elements dealt round-robin (as a table's blocks of rows
  // are), restored by 3 ranks holding contiguous ranges that start and end inside slices.
  constexpr std::size_t n = 200, slice = 7;
  std::vector<float> truth(n);
  for (std::size_t i = 0; i < n; ++i) truth[i] = 0.5f * static_cast<float>(i) + 1.0f;
  temporary_folder folder;
  const ckpt::store store(folder.path);
  const auto save = [&](bool twice) {
    loopback::run(2, [&](loopback::context& ctx) {
      const int rank = ctx.collectives().rank();
      std::vector<float> held = truth;  // each rank hands over views of its slices
      ckpt::state_set set;
      for (std::size_t b = 0, first = 0; first < n; first += slice, ++b)
        if (static_cast<int>(b % 2) == rank || (twice && b == 3))  // slice 3 once more, from rank 0: a corrupt save
          set.add({"t", {n}, ckpt::sharing::sharded, std::span(held).subspan(first, std::min(slice, n - first)), false, first});
      store.save(ctx.collectives(), twice ? 2 : 1, set);
    });
  };
  save(false);
  save(true);

  const auto restore = [&](std::int64_t step) {
    std::vector<float> restored(n, -1.0f);
    std::vector<std::string> errors(3);
    loopback::run(3, [&](loopback::context& ctx) {
      const int rank = ctx.collectives().rank();
      const std::size_t first = n * static_cast<std::size_t>(rank) / 3, last = n * static_cast<std::size_t>(rank + 1) / 3;
      ckpt::state_set set;
      set.add({"t", {n}, ckpt::sharing::sharded, std::span(restored).subspan(first, last - first), false, first});
      try {
        store.restore(ctx.collectives(), step, set);
      } catch (const ckpt::checkpoint_error& e) {
        errors[static_cast<std::size_t>(rank)] = e.what();
      }
    });
    return std::pair{restored, errors};
  };
  const auto [restored, errors] = restore(1);
  CHECK(restored == truth);
  for (const std::string& e : errors) CHECK(e.empty());

  // Slice 3 (elements [21, 28), in rank 0's range) saved twice: rank 0 says so, and every rank
  // refuses the restore.
  const auto [unused, refused] = restore(2);
  CHECK_THAT(refused[0], Catch::Contains("\"t\" exactly once with its slices (element 21 of [0, 66)"));
  CHECK_THAT(refused[1], Catch::Contains("rank 0 failed"));
  CHECK_THAT(refused[2], Catch::Contains("rank 0 failed"));
}
