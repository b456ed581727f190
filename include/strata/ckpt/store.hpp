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
#include <charconv>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "strata/ckpt/format.hpp"
#include "strata/ckpt/state.hpp"
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

inline record blob(std::string name, std::string_view bytes) {
  record r;
  r.kind = record_kind::blob;
  r.name = std::move(name);
  r.count = bytes.size();
  r.payload = std::as_bytes(std::span(bytes));
  return r;
}

/// What binds a rank file to its checkpoint: the checkpoint's random id, its step, the world
/// that wrote it and the writing rank.
inline std::string identity(std::uint64_t id, std::int64_t step, int rank, int world_size) {
  return text::cat("checkpoint ", text::hex(id), " step ", step, " rank ", rank, " of ", world_size);
}

/// The variables of a model description as a commit file keeps them: a line each, its
/// fields separated by tabs.
inline std::string print_variables(const std::vector<model_description::variable>& variables) {
  std::string out;
  for (const auto& v : variables) out += text::cat(v.name, '\t', v.strategy, '\t', v.dtype, '\n');
  return out;
}
inline std::vector<model_description::variable> parse_variables(std::string_view lines) {
  std::vector<model_description::variable> out;
  while (!lines.empty()) {
    const std::string_view line = lines.substr(0, lines.find('\n'));
    lines.remove_prefix(std::min(lines.size(), line.size() + 1));
    const std::size_t a = line.find('\t'), b = a == std::string_view::npos ? a : line.find('\t', a + 1);
    if (b == std::string_view::npos) continue;  // not a description line: nothing to show
    out.push_back({std::string(line.substr(0, a)), std::string(line.substr(a + 1, b - a - 1)), std::string(line.substr(b + 1))});
  }
  return out;
}

/// A fresh checkpoint id: 64 bits from the system's random source.
inline std::uint64_t random_id() {
  std::random_device source;
  return (std::uint64_t{source()} << 32) ^ source();
}

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
inline records_by_name index_records(const std::vector<record>& records) {
  records_by_name index;
  for (const record& r : records)
    if (r.kind != record_kind::blob) index[r.name].push_back(&r);
  for (auto& [name, list] : index)
    std::stable_sort(list.begin(), list.end(), [](const record* a, const record* b) { return a->begin < b->begin; });
  return index;
}

/// Fills one tensor from the records: a replicated tensor, or a sharded range of one, from
/// the slices that intersect it; a rank-local one from the old ranks that map to this rank.
/// `may_be_absent`: the checkpoint holds weights alone and `t` is state beyond them, which
/// keeps its fresh values when the checkpoint lacks it.
inline void fill(const tensor_state& t, const records_by_name& index, int rank, int size,
                 const std::filesystem::path& folder, bool may_be_absent) {
  const std::vector<std::uint64_t> shape = detail::to_u64(t.shape);
  const auto named = index.find(t.name);
  const std::span<const record* const> all = named == index.end() ? std::span<const record* const>() : named->second;
  const std::size_t found = all.size();
  // The elements this rank fills: the whole tensor, or its shard's range.
  const std::uint64_t first = t.how == sharing::sharded ? t.begin : 0, last = first + t.data.size();
  // The records that may intersect it: those that start before it and reach into it, then
  // those that start inside it.
  std::span<const record* const> near = all;
  if (t.how != sharing::rank_local) {
    const auto starts_before = [](const record* r, std::uint64_t at) { return r->begin < at; };
    auto from = std::lower_bound(all.begin(), all.end(), first, starts_before);
    while (from != all.begin() && (*(from - 1))->begin + (*(from - 1))->count > first) --from;
    near = {from, std::lower_bound(all.begin(), all.end(), last, starts_before)};
  }
  struct part {
    std::uint64_t begin, end;  // of a slice's part in range
  };
  std::vector<part> slices;
  if (found == 0 && (t.optional || may_be_absent)) return;  // keeps its values
  if (t.how == sharing::rank_local) std::fill(t.data.begin(), t.data.end(), 0.0f);
  const auto check_shape = [&](const record& r) {
    if (r.shape != shape)
      throw checkpoint_error(text::cat("checkpoint ", folder.string(), " holds \"", t.name, "\" with shape [",
                                       text::join(r.shape, ","), "], but the model's is [", text::join(shape, ","),
                                       "]; restore into a model with the same variables"));
  };
  if (!all.empty()) check_shape(*all.front());  // also where none of its slices is in this rank's range
  for (const record* each : near) {
    const record& r = *each;
    check_shape(r);
    if (t.how != sharing::rank_local) {
      const std::uint64_t from = std::max(first, r.begin), to = std::min(last, r.begin + r.count);
      if (from >= to) continue;
      r.read_floats(from - r.begin, t.data.subspan(static_cast<std::size_t>(from - first), static_cast<std::size_t>(to - from)));
      slices.push_back({from, to});
      continue;
    }
    if (static_cast<int>(r.source_rank % static_cast<std::uint32_t>(size)) == rank) {
      const std::vector<float> values = r.floats();
      for (std::size_t i = 0; i < values.size(); ++i) t.data[i] += values[i];
    }
  }
  if (found == 0)
    throw checkpoint_error(
        text::cat("checkpoint ", folder.string(), " has no \"", t.name, "\"; it was saved from a different model"));
  if (t.how != sharing::rank_local) {
    std::sort(slices.begin(), slices.end(), [](const part& x, const part& y) {
      return x.begin < y.begin || (x.begin == y.begin && x.end < y.end);
    });
    std::uint64_t end = first;
    for (const part& p : slices) {
      if (p.begin > end) break;  // a gap
      if (p.begin < end) {       // written twice: which copy holds the value?
        end = p.begin;
        break;
      }
      end = p.end;
    }
    if (end != last)
      throw checkpoint_error(text::cat("checkpoint ", folder.string(), " does not cover \"", t.name,
                                       "\" exactly once with its slices (element ", end, " of [", first, ", ", last,
                                       ") is missing or written twice)"));
  }
}

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
inline void refuse_unknown(const records_by_name& index, const state_set& state, const std::filesystem::path& folder) {
  for (const auto& entry : index) {
    const auto& name = entry.first;
    const auto known = std::find_if(state.tensors().begin(), state.tensors().end(),
                                    [&](const tensor_state& t) { return t.name == name; });
    if (known == state.tensors().end())
      throw checkpoint_error(text::cat("checkpoint ", folder.string(), " holds \"", name,
                                       "\", which the model has no tensor of (imported from another model, or a "
                                       "variable renamed?)"));
  }
}

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
  std::vector<std::int64_t> committed_steps() const {
    std::vector<std::int64_t> steps;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(directory_, ec))
      if (auto step = step_of(entry.path()); step && std::filesystem::exists(entry.path() / commit_name, ec)) steps.push_back(*step);
    std::sort(steps.begin(), steps.end(), std::greater<>());
    return steps;
  }

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
      std::filesystem::create_directories(folder);
      if (comm.rank() == 0) std::filesystem::remove(folder / commit_name);  // re-saving a step: not committed meanwhile
      file_builder file;
      file.add(detail::blob(std::string(identity_name), identity));
      // Each rank describes the variables it holds (a pipeline stage knows only its own).
      const std::string variables = detail::print_variables(description.variables);
      if (!description.mesh.empty()) file.add(detail::blob("strata/mesh", description.mesh));
      if (!variables.empty()) file.add(detail::blob("strata/variables", variables));
      if (description.weights_only) file.add(detail::blob("strata/weights_only", "1"));
      for (const tensor_state& t : state.tensors()) {
        record r;
        r.kind = record_kind::slice;
        r.name = t.name;
        r.shape = detail::to_u64(t.shape);
        r.source_rank = static_cast<std::uint32_t>(comm.rank());
        std::span<const float> data = t.data;
        if (t.how == sharing::replicated || t.how == sharing::sharded) {
          // Each holder of the same values writes an even part of them.
          const bool everyone = t.how == sharing::replicated && t.holders == 0;
          const int holders = everyone ? comm.size() : std::max(t.holders, 1), holder = everyone ? comm.rank() : t.holder;
          const auto [begin, end] = detail::even_part(t.data.size(), holders, holder);
          r.begin = (t.how == sharing::sharded ? t.begin : 0) + begin;
          data = data.subspan(begin, end - begin);
        } else {
          r.kind = record_kind::rank_local;
        }
        r.count = data.size();
        r.payload = std::as_bytes(data);
        file.add(r);
      }
      const std::vector<std::byte> bytes = std::move(file).finish();
      const std::span<const std::byte> contents(bytes.data(), bytes.size());
      crc = detail::stored_crc(contents);
      detail::write_atomically(folder / rank_file(comm.rank(), comm.size()), contents);
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
  checkpoint_contents open(std::int64_t step) const {
    const std::filesystem::path folder = folder_of(step);
    const std::string commit_path = (folder / commit_name).string();
    checkpoint_contents result;
    file_reader commit_file(commit_path);
    restored_checkpoint& header = result.header;
    std::optional<std::string_view> step_text, world, crcs, id;
    const std::vector<record> commit_records = commit_file.records();
    for (const record& r : commit_records) {
      if (r.kind != record_kind::blob) continue;
      if (r.name == "strata/step") step_text = r.text();
      else if (r.name == "strata/world_size") world = r.text();
      else if (r.name == "strata/file_crc32") crcs = r.text();
      else if (r.name == "strata/checkpoint_id") id = r.text();
      else if (r.name.starts_with("meta/")) header.meta.emplace(r.name.substr(5), r.text());
    }
    auto unusable = [&](std::string_view why) {
      return checkpoint_error(text::cat("checkpoint file ", commit_path, " is unusable: ", why));
    };
    auto number = [&](std::optional<std::string_view> field, std::string_view what) {
      std::int64_t value = -1;
      if (!field || std::from_chars(field->data(), field->data() + field->size(), value).ec != std::errc() || value < 0)
        throw unusable(text::cat("no valid ", what));
      return value;
    };
    header.step = number(step_text, "step");
    const std::int64_t world_size = number(world, "world size");
    if (header.step != step)
      throw unusable(text::cat("it commits step ", header.step, ", but lies in the folder of step ", step,
                               " (copied from another checkpoint?)"));
    if (world_size == 0 || world_size > std::numeric_limits<int>::max() ||
        !crcs || crcs->size() != static_cast<std::size_t>(world_size) * sizeof(std::uint32_t))
      throw unusable("it lists no checksum per rank file");
    header.world_size = static_cast<int>(world_size);
    std::uint64_t id_value = 0;
    if (!id || id->size() != 16 || std::from_chars(id->data(), id->data() + id->size(), id_value, 16).ec != std::errc())
      throw unusable("it carries no checkpoint id (written by an earlier strata version, or damaged)");
    for (int r = 0; r < header.world_size; ++r) {
      file_reader& file = *result.files.emplace_back(std::make_unique<file_reader>((folder / rank_file(r, header.world_size)).string()));
      std::uint32_t expected;
      std::memcpy(&expected, crcs->data() + static_cast<std::size_t>(r) * sizeof(expected), sizeof(expected));
      if (file.stored_crc() != expected)
        throw checkpoint_error(text::cat("checkpoint file ", file.path(),
                                         " is unusable: it is not the file that was committed (its checksum differs; "
                                         "corrupted, truncated, or copied in from another checkpoint)"));
      std::vector<record> parsed = file.records();
      const std::string expected_identity = detail::identity(id_value, header.step, r, header.world_size);
      if (parsed.empty() || parsed.front().name != identity_name || parsed.front().text() != expected_identity)
        throw checkpoint_error(
            text::cat("checkpoint file ", file.path(), " is unusable: it says \"",
                      parsed.empty() || parsed.front().name != identity_name ? "nothing"
                                                                             : text::excerpt(parsed.front().text(), 96),
                      "\" but belongs to \"", expected_identity, "\" (copied in from another step, run or rank)"));
      for (record& rec : parsed)
        if (rec.kind != record_kind::blob) result.records.push_back(std::move(rec));
        else describe(rec, header.description);
    }
    return result;
  }

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

  static std::optional<std::int64_t> step_of(const std::filesystem::path& folder) {
    const std::string name = folder.filename().string();
    if (!name.starts_with("step-")) return std::nullopt;
    std::int64_t step = 0;
    const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
    if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
    return step;
  }

  /// Removes what a failed save wrote into `folder`: this rank's file, and the folder once
  /// empty (each rank removes its own file; the last to leave removes the folder).
  static void forget(const std::filesystem::path& folder, int rank, int size) {
    std::error_code ignored;
    std::filesystem::remove(folder / rank_file(rank, size), ignored);
    std::filesystem::remove(folder, ignored);  // only if empty
  }

  void commit(const std::filesystem::path& folder, std::int64_t step, std::uint64_t id, int world_size,
              const std::vector<std::uint32_t>& crcs, const metadata& meta) const {
    const std::string step_text = std::to_string(step), world_text = std::to_string(world_size);
    const std::string id_text = text::hex(id);
    const std::string crc_text(reinterpret_cast<const char*>(crcs.data()), crcs.size() * sizeof(std::uint32_t));
    file_builder file;
    file.add(detail::blob("strata/step", step_text));
    file.add(detail::blob("strata/world_size", world_text));
    file.add(detail::blob("strata/checkpoint_id", id_text));
    file.add(detail::blob("strata/file_crc32", crc_text));
    for (const auto& [key, value] : meta) file.add(detail::blob("meta/" + key, value));
    detail::write_atomically(folder / commit_name, std::move(file).finish());
  }

  /// Keeps the newest `keep_` committed checkpoints; removes older ones and abandoned
  /// (never committed) folders of earlier steps.
  void prune(std::int64_t newest) const {
    const std::vector<std::int64_t> committed = committed_steps();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(directory_, ec)) {
      const auto step = step_of(entry.path());
      if (!step || *step >= newest) continue;
      const auto rank = std::find(committed.begin(), committed.end(), *step) - committed.begin();
      const bool abandoned = rank == static_cast<std::ptrdiff_t>(committed.size());
      if (abandoned || rank >= keep_) std::filesystem::remove_all(entry.path(), ec);
    }
  }

  /// Adds what a rank file's blob says of the model to `description`.
  static void describe(const record& blob, model_description& description) {
    if (blob.name == "strata/mesh") description.mesh = blob.text();
    if (blob.name == "strata/weights_only") description.weights_only = blob.text() == "1";
    if (blob.name != "strata/variables") return;
    for (auto& v : detail::parse_variables(blob.text()))
      if (std::none_of(description.variables.begin(), description.variables.end(),
                       [&](const model_description::variable& known) { return known.name == v.name; }))
        description.variables.push_back(std::move(v));
  }

  std::filesystem::path directory_;
  int keep_;
};

}  // namespace strata::ckpt
