#pragma once
// A directory of checkpoints, one sub-directory per saved step:
//
//   <directory>/step-000000000120/rank-00000-of-00004.ckpt   each rank's records, in parallel
//                                 rank-00001-of-00004.ckpt
//                                 ...
//                                 commit.ckpt                 written last, by rank 0
//
// A checkpoint exists once its commit file does: that file names the step, the world size,
// the checkpoint's identity (a random 64-bit number drawn by rank 0 at each save), the CRC-32
// of every rank file's contents, and the user's metadata (data position, random state). Every
// rank file carries the same identity, step, world size and its rank, so a file copied in from
// another step, another run or another rank is refused, never mixed into a restore.
// Every file is written to a temporary name, flushed to disk and renamed, so a crash leaves
// either the old state or the new one, never half a file under the final name. Only the
// newest `keep` committed checkpoints are kept.
//
// Restoring reads the commit file and every rank file of the checkpoint, checks all the
// checksums, and assembles each tensor whole from the slices, whatever the world size that
// wrote them: that is what makes resharding (4 ranks -> 2, 2 -> 4) a plain restore.
//
// nvcc compiles this too (the nccl executor saves through it), so it is written for nvcc's
// front end: messages built without fmt (which nvcc cannot compile), iterator-pair
// algorithms instead of std::ranges ones and explicit spans of vectors (which it refuses).
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/ckpt/format.hpp"
#include "strata/ckpt/state.hpp"
#include "strata/config.hpp"
#include "strata/detail/text.hpp"
#include "strata/error.hpp"

namespace strata::ckpt {

/// The ranks that save and restore a checkpoint together, as the store uses them: their
/// number, this one's place, and two blocking collectives over host memory. The host
/// backends' communicators are such groups; the nccl executor makes one of its
/// communicator by staging through device memory.
template <class G>
concept Group = requires(G& g, const G& cg, std::span<std::byte> bytes, std::span<const std::uint32_t> mine,
                         std::span<std::uint32_t> all, int root) {
  { cg.rank() } -> std::same_as<int>;
  { cg.size() } -> std::same_as<int>;
  g.broadcast(bytes, root);
  g.allgather(mine, all);
};

/// The one process of a program that reads or writes checkpoints alone (strata-ckpt): a
/// Group of one rank.
struct single_process {
  int rank() const { return 0; }
  int size() const { return 1; }
  void broadcast(std::span<std::byte>, int) {}
  void allgather(std::span<const std::uint32_t> mine, std::span<std::uint32_t> all) {
    std::copy(mine.begin(), mine.end(), all.begin());
  }
};

/// The user's own facts to restore with the tensors: data position, random state, epoch.
using metadata = std::map<std::string, std::string>;

/// What a checkpoint says of the model that saved it, for the people and tools that read it
/// (strata-ckpt info): each variable's canonical strategy and element type, and the mesh.
/// Restoring needs none of it.
struct model_description {
  struct variable {
    std::string name, strategy, dtype;
  };
  std::string mesh;  ///< "dp=2,tp=2,pp=1"; empty without a mesh
  std::vector<variable> variables;
  /// Weights alone (written by an import: strata-ckpt import): tensors the model has beyond
  /// them (optimizer state) keep their fresh values when restored.
  bool weights_only = false;
};

struct restored_checkpoint {
  std::int64_t step = 0;  ///< updates done when it was saved
  int world_size = 0;     ///< of the job that saved it
  metadata meta;
  model_description description;  ///< empty where the saver gave none
};

/// A committed checkpoint opened for reading, every checksum checked: what it says of itself,
/// and the tensor records of all its rank files, whose payloads are read from the files on
/// demand.
struct checkpoint_contents {
  restored_checkpoint header;
  std::vector<std::unique_ptr<file_reader>> files;
  std::vector<record> records;  ///< tensor records (slices and rank-local tensors) only
};

namespace detail {

/// [begin, end) of part `k` of `n` elements split as evenly as possible into `parts`.
inline std::pair<std::size_t, std::size_t> even_part(std::size_t n, int parts, int k) {
  const auto p = static_cast<std::size_t>(parts), i = static_cast<std::size_t>(k);
  return {n * i / p, n * (i + 1) / p};
}

inline std::vector<std::uint64_t> to_u64(const std::vector<std::size_t>& shape) { return {shape.begin(), shape.end()}; }

STRATA_DECL record blob(std::string name, std::string_view bytes);

/// What binds a rank file to its checkpoint: the checkpoint's random id, its step, the world
/// that wrote it and the writing rank.
inline std::string identity(std::uint64_t id, std::int64_t step, int rank, int world_size) {
  return text::cat("checkpoint ", text::hex(id), " step ", step, " rank ", rank, " of ", world_size);
}

/// A fresh checkpoint id: 64 bits from the system's random source.
STRATA_DECL std::uint64_t random_id();

/// One rank's agreement value for a collective decision (all ranks learn every rank's).
template <Group C>
std::vector<std::uint32_t> gather_u32(C& comm, std::uint32_t mine) {
  std::vector<std::uint32_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::uint32_t>(&mine, 1), std::span<std::uint32_t>(all.data(), all.size()));
  return all;
}

/// Each tensor's records, in order of their first element. A shard of many blocks (a
/// parameter-server variable partitioned along an inner axis has one per outer index) is
/// saved as as many slices, and restoring each from a search of every record took time
/// quadratic in them.
using records_by_name = std::map<std::string_view, std::vector<const record*>>;
STRATA_DECL records_by_name index_records(const std::vector<record>& records);

/// Fills one tensor from the records: a replicated tensor, or a sharded range of one, from
/// the slices that intersect it; a rank-local one from the old ranks that map to this rank.
/// `may_be_absent`: the checkpoint holds weights alone and `t` is state beyond them, which
/// keeps its fresh values when the checkpoint lacks it.
STRATA_DECL void fill(const tensor_state& t, const records_by_name& index, int rank, int size,
                      const std::filesystem::path& folder, bool may_be_absent);

/// Whether `tensor` is state of another tensor the checkpoint holds ("fc1.weight/momentum"
/// beside "fc1.weight"), rather than a weight of its own.
inline bool beyond_weights(std::string_view tensor, const records_by_name& index) {
  for (std::size_t slash = tensor.find('/'); slash != std::string_view::npos; slash = tensor.find('/', slash + 1))
    if (index.contains(tensor.substr(0, slash))) return true;
  return false;
}

/// Throws Error unless every rank's `ok` is 1: the local failure's message where there is
/// one, else which ranks failed.
template <class Error = checkpoint_error>
void throw_unless_all(const std::vector<std::uint32_t>& ok, const std::string& local_failure, std::string_view doing) {
  std::vector<int> failed;
  for (std::size_t r = 0; r < ok.size(); ++r)
    if (!ok[r]) failed.push_back(static_cast<int>(r));
  if (failed.empty()) return;
  if (!local_failure.empty()) throw Error(local_failure);
  throw Error(text::cat(doing, ": rank", failed.size() > 1 ? "s" : "", " ", text::join(failed, ", "), " failed (see ",
                        failed.size() > 1 ? "their" : "its", " message)"));
}

/// Imported weights that the model does not have are refused by name: they would be
/// dropped silently (a renamed layer, a file of another model).
STRATA_DECL void refuse_unknown(const records_by_name& index, const state_set& state, const std::filesystem::path& folder);

/// Runs `f` on every rank of `comm`; where it throws on any rank, every rank throws Error: the
/// local message where it failed here, else which ranks failed. The ranks learn it together,
/// so that none goes on into a collective the others have left.
template <class Error = checkpoint_error, Group C, class F>
void agree(C& comm, std::string_view doing, F&& f) {
  std::string failure;
  try {
    f();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  throw_unless_all<Error>(gather_u32(comm, failure.empty() ? 1u : 0u), failure, doing);
}

/// Collective: fills every tensor of `state` from `records` (any world size and layout may
/// have written them), then runs its restore hooks. `weights_only`: the records are weights
/// alone; state beyond them keeps its fresh values, and a record the model has no tensor for
/// is refused. A sharded tensor is checked only in its rank's range, so one rank may refuse
/// what the others took: they agree before the hooks, which may run collectives.
template <Group C>
void fill_state(C& comm, const std::vector<record>& records, const state_set& state, const std::filesystem::path& from,
                bool weights_only) {
  agree(comm, text::cat("restoring from ", from.string()), [&] {
    const records_by_name index = index_records(records);
    for (const tensor_state& t : state.tensors())
      fill(t, index, comm.rank(), comm.size(), from, weights_only && beyond_weights(t.name, index));
    if (weights_only) refuse_unknown(index, state, from);
  });
  state.restored();
}

}  // namespace detail

class store {
 public:
  /// Checkpoints live in `directory` (created on the first save); the newest `keep` are kept.
  explicit store(std::filesystem::path directory, int keep = 3) : directory_(std::move(directory)), keep_(keep) {
    if (keep < 1) throw usage_error(text::cat("ckpt::store: keep must be at least 1, got ", keep));
  }

  const std::filesystem::path& directory() const { return directory_; }
  std::filesystem::path folder_of(std::int64_t step) const {
    return directory_ / text::cat("step-", text::zero_padded(step, 12));
  }

  /// Steps of the committed checkpoints, newest first (their contents are not checked here).
  STRATA_DECL std::vector<std::int64_t> committed_steps() const;

  /// Collective: every rank writes its slices of the replicated tensors and its rank-local
  /// tensors; rank 0 then commits `step` with `meta`. When it returns on any rank, the
  /// checkpoint is committed. A rank that cannot write makes every rank throw; a state that
  /// holds NaN or infinite values on any rank is not saved (numeric_error on every rank).
  template <Group C>
  void save(C& comm, std::int64_t step, const state_set& state, const metadata& meta = {},
            const model_description& description = {}) const {
    const std::filesystem::path folder = folder_of(step);
    refuse_diverged(comm, step, state);
    std::uint64_t id = comm.rank() == 0 ? detail::random_id() : 0;
    comm.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&id, 1)), 0);
    std::string failure;
    std::uint32_t crc = 0;
    const std::string identity = detail::identity(id, step, comm.rank(), comm.size());
    try {
      crc = write_rank_file(folder, identity, comm.rank(), comm.size(), state, description);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    // Everyone learns every rank's outcome and checksum at once.
    const std::vector<std::uint32_t> ok = detail::gather_u32(comm, failure.empty() ? 1u : 0u);
    const std::vector<std::uint32_t> crcs = detail::gather_u32(comm, crc);
    if (std::find(ok.begin(), ok.end(), 0u) != ok.end()) forget(folder, comm.rank(), comm.size());
    detail::throw_unless_all<checkpoint_write_error>(ok, failure, text::cat("saving checkpoint ", folder.string()));
    if (comm.rank() == 0) {
      try {
        commit(folder, step, id, comm.size(), crcs, meta);
        prune(step);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    std::uint32_t committed = failure.empty() ? 1u : 0u;
    comm.broadcast(std::as_writable_bytes(std::span<std::uint32_t>(&committed, 1)), 0);
    if (!committed) {
      forget(folder, comm.rank(), comm.size());
      throw checkpoint_write_error(comm.rank() == 0 ? failure : text::cat("rank 0 could not commit ", folder.string()));
    }
  }

  /// Collective: restores checkpoint `step` into `state` (any world size may have written
  /// it). Every rank checks every file; if any rank finds a defect, every rank throws
  /// checkpoint_error and `state` may be partly overwritten — restore another checkpoint.
  template <Group C>
  restored_checkpoint restore(C& comm, std::int64_t step, const state_set& state) const {
    const std::filesystem::path folder = folder_of(step);
    checkpoint_contents contents;
    detail::agree(comm, text::cat("restoring checkpoint ", folder.string()), [&] { contents = open(step); });
    detail::fill_state(comm, contents.records, state, folder, contents.header.description.weights_only);
    return std::move(contents.header);
  }

  /// Opens committed checkpoint `step` for reading, checking the commit file, every rank
  /// file's checksum and identity; throws checkpoint_error saying what is wrong. Nothing but
  /// the record headers is held in memory.
  STRATA_DECL checkpoint_contents open(std::int64_t step) const;

  /// Collective: restores the newest usable checkpoint. A newer one that is unusable is
  /// refused with a message on rank 0's standard error, and the one before it is tried.
  /// Nothing committed: nullopt. Checkpoints exist but none is usable: checkpoint_error.
  template <Group C>
  std::optional<restored_checkpoint> restore_latest(C& comm, const state_set& state) const {
    std::vector<std::int64_t> steps = committed_steps();
    // Rank 0's listing decides, so that every rank tries the same checkpoints.
    std::uint64_t count = steps.size();
    comm.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&count, 1)), 0);
    steps.resize(count);
    comm.broadcast(std::as_writable_bytes(std::span<std::int64_t>(steps.data(), steps.size())), 0);
    std::string refusals;
    for (std::int64_t step : steps) {
      try {
        return restore(comm, step, state);
      } catch (const checkpoint_error& e) {
        refusals += text::cat("\n  ", e.what());
        if (comm.rank() == 0) {
          std::fputs(text::cat("strata: refusing checkpoint ", folder_of(step).string(), ": ", e.what(), "\n").c_str(),
                     stderr);
          std::fflush(stderr);
        }
      }
    }
    if (steps.empty()) return std::nullopt;
    throw checkpoint_error(
        text::cat("none of the ", steps.size(), " checkpoints in ", directory_.string(), " is usable:", refusals));
  }

 private:
  static constexpr std::string_view commit_name = "commit.ckpt";
  static constexpr std::string_view identity_name = "strata/identity";

  // A diverged model is not saved: resuming from it would only diverge again.
  template <Group C>
  void refuse_diverged(C& comm, std::int64_t step, const state_set& state) const {
    const std::string nonfinite = first_nonfinite(state);
    const std::vector<std::uint32_t> finite = detail::gather_u32(comm, nonfinite.empty() ? 1u : 0u);
    if (const auto bad = std::find(finite.begin(), finite.end(), 0u); bad != finite.end())
      throw numeric_error(text::cat(
          "not saving checkpoint ", folder_of(step).string(), " of update ", step, ": ",
          nonfinite.empty() ? text::cat("the state on rank ", bad - finite.begin()) : text::cat("\"", nonfinite, "\""),
          " holds NaN or infinite values (the model diverged; lower the learning rate, or resume from an earlier "
          "checkpoint)"));
  }

  static std::string rank_file(int rank, int size) {
    return text::cat("rank-", text::zero_padded(rank, 5), "-of-", text::zero_padded(size, 5), ".ckpt");
  }

  STRATA_DECL static std::optional<std::int64_t> step_of(const std::filesystem::path& folder);

  /// Removes what a failed save wrote into `folder`: this rank's file, and the folder once
  /// empty (each rank removes its own file; the last to leave removes the folder).
  STRATA_DECL static void forget(const std::filesystem::path& folder, int rank, int size);

  STRATA_DECL void commit(const std::filesystem::path& folder, std::int64_t step, std::uint64_t id, int world_size,
                          const std::vector<std::uint32_t>& crcs, const metadata& meta) const;

  /// Writes this rank's file of a save into `folder` (made here; rank 0 also removes an old
  /// commit file) and returns its checksum; throws what the writing throws.
  STRATA_DECL static std::uint32_t write_rank_file(const std::filesystem::path& folder, const std::string& identity,
                                                   int rank, int size, const state_set& state,
                                                   const model_description& description);

  /// Keeps the newest `keep_` committed checkpoints; removes older ones and abandoned
  /// (never committed) folders of earlier steps.
  STRATA_DECL void prune(std::int64_t newest) const;

  /// Adds what a rank file's blob says of the model to `description`.
  STRATA_DECL static void describe(const record& blob, model_description& description);

  std::filesystem::path directory_;
  int keep_;
};

}  // namespace strata::ckpt

#if defined(STRATA_HEADER_ONLY)
#include "strata/ckpt/impl/store.ipp"
#endif
