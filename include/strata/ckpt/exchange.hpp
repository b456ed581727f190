#pragma once
// Checkpoints in and out of the safetensors format (strata-ckpt export / import):
//
//   export: the newest usable checkpoint of a store (or a given step), whatever layout wrote
//           it — data parallel, parameter-server shards, tensor-parallel parts, pipeline
//           stages — as whole tensors under their variables' names, one file or shards plus
//           model.safetensors.index.json. A tensor is assembled from the slices that cover
//           it a piece at a time, so memory holds a piece (4 MiB), not the checkpoint.
//   import: a safetensors file (or an index of shards) as the checkpoint at step 0 of a
//           store, marked as weights alone: any strategy and mesh restores it, the optimizer
//           state starting fresh.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/ckpt/safetensors.hpp"
#include "strata/ckpt/store.hpp"
#include "strata/detail/text.hpp"
#include "strata/error.hpp"

namespace strata::ckpt {

/// The newest checkpoint of `s` that opens with every check passed (or checkpoint `step`),
/// and why each newer one was refused. checkpoint_error when none is usable.
struct usable_checkpoint {
  checkpoint_contents contents;
  std::vector<std::string> refusals;  ///< of newer checkpoints, newest first
};
inline usable_checkpoint newest_usable(const store& s, std::optional<std::int64_t> step = std::nullopt) {
  usable_checkpoint found;
  const std::vector<std::int64_t> steps = step ? std::vector<std::int64_t>{*step} : s.committed_steps();
  for (std::int64_t candidate : steps) {
    try {
      found.contents = s.open(candidate);
      return found;
    } catch (const checkpoint_error& e) {
      found.refusals.push_back(e.what());
    }
  }
  if (steps.empty()) throw checkpoint_error(text::cat(s.directory().string(), " holds no committed checkpoint"));
  throw checkpoint_error(text::cat("none of the ", steps.size(), " checkpoints in ", s.directory().string(),
                                   " is usable: ", text::join(found.refusals, "; ")));
}

/// The dtype a variable was trained in, as a model description names it ("float32").
inline safetensors::dtype trained_dtype(const model_description& d, std::string_view tensor) {
  for (const auto& v : d.variables)
    if (v.name == tensor)
      if (const auto t = safetensors::dtype_named(v.dtype)) return *t;
  return safetensors::dtype::f32;
}

struct export_options {
  std::optional<safetensors::dtype> dtype;  ///< nullopt: each tensor as trained
  bool optimizer_state = false;             ///< also the optimizer's tensors ("fc1.weight/momentum")
  std::uint64_t max_shard_bytes = 0;        ///< 0: one file; else shards and an index
  std::optional<std::int64_t> step;         ///< nullopt: the newest usable checkpoint
};

struct export_result {
  std::int64_t step = 0;
  std::vector<std::filesystem::path> files;  ///< the shards, then the index (or the one file)
  std::size_t tensors = 0;
  std::uint64_t bytes = 0;  ///< of tensor data
};

/// Exports a checkpoint of `from` to `to` (a .safetensors path; with shards, their folder
/// and the stem of their names). Files are written whole or not at all: on an error, the
/// files of this export written so far are removed.
inline export_result export_safetensors(const store& from, const std::filesystem::path& to, const export_options& o) {
  const usable_checkpoint found = newest_usable(from, o.step);
  const checkpoint_contents& c = found.contents;
  const detail::records_by_name index = detail::index_records(c.records);

  std::vector<safetensors::tensor_to_write> tensors;
  for (const auto& [name, records] : index) {
    if (records.front()->kind == record_kind::rank_local) continue;  // each rank's own: no whole tensor
    if (!o.optimizer_state && detail::beyond_weights(name, index)) continue;
    tensors.push_back({std::string(name), o.dtype.value_or(trained_dtype(c.header.description, name)), records.front()->shape});
  }
  if (tensors.empty()) throw checkpoint_error(text::cat("checkpoint of step ", c.header.step, " holds no tensor to export"));

  // Shards: tensors in name order, a new shard where the next would pass the limit.
  std::vector<std::vector<std::size_t>> shards(1);
  std::uint64_t in_shard = 0;
  export_result result;
  result.step = c.header.step;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const std::uint64_t bytes = tensors[k].elements() * safetensors::size_of(tensors[k].type);
    if (o.max_shard_bytes > 0 && in_shard > 0 && in_shard + bytes > o.max_shard_bytes) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(k);
    in_shard += bytes;
    result.bytes += bytes;
  }
  result.tensors = tensors.size();
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"strata.step", std::to_string(c.header.step)},
      {"strata.world_size", std::to_string(c.header.world_size)},
      {"strata.mesh", c.header.description.mesh}};
  auto shard_path = [&](std::size_t i) {
    if (shards.size() == 1) return to;
    return to.parent_path() / text::cat(to.stem().string(), "-", text::zero_padded(static_cast<long long>(i + 1), 5), "-of-",
                                        text::zero_padded(static_cast<long long>(shards.size()), 5), to.extension().string());
  };
  try {
    nlohmann::json weight_map = nlohmann::json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      std::vector<safetensors::tensor_to_write> part;
      for (std::size_t k : shards[i]) part.push_back(tensors[k]);
      const std::filesystem::path path = shard_path(i);
      safetensors::write(path, part, metadata, [&](std::size_t k, std::uint64_t first, std::span<float> out) {
        const safetensors::tensor_to_write& t = part[k];
        const tensor_state piece{t.name, {t.shape.begin(), t.shape.end()}, sharing::sharded, out, false,
                                 static_cast<std::size_t>(first)};
        detail::fill(piece, index, 0, 1, from.folder_of(c.header.step), false);
      });
      result.files.push_back(path);
      for (const auto& t : part) weight_map[t.name] = path.filename().string();
    }
    if (shards.size() > 1) {
      const std::filesystem::path index_path = to.parent_path() / text::cat(to.filename().string(), ".index.json");
      const std::string json =
          nlohmann::json{{"metadata", {{"total_size", result.bytes}}}, {"weight_map", weight_map}}.dump(2) + "\n";
      detail::write_atomically(index_path, std::as_bytes(std::span(json)), "", " (the disk is full)");
      result.files.push_back(index_path);
    }
  } catch (...) {
    std::error_code ignored;
    for (const auto& f : result.files) std::filesystem::remove(f, ignored);
    throw;
  }
  return result;
}

/// The safetensors files of `from`: itself, or the shards its index (*.index.json) names.
inline std::vector<std::unique_ptr<safetensors::reader>> open_safetensors(const std::filesystem::path& from) {
  std::vector<std::unique_ptr<safetensors::reader>> files;
  if (from.extension() != ".json") {
    files.push_back(std::make_unique<safetensors::reader>(from.string()));
    return files;
  }
  std::ifstream in(from);
  if (!in) throw safetensors::format_error(text::cat("safetensors index ", from.string(), " cannot be opened"));
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw safetensors::format_error(text::cat("safetensors index ", from.string(), " is not valid JSON: ", e.what()));
  }
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    throw safetensors::format_error(text::cat("safetensors index ", from.string(), " has no \"weight_map\" object"));
  std::map<std::string, std::vector<std::string>> names_by_file;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string())
      throw safetensors::format_error(text::cat("safetensors index ", from.string(), " maps \"", name, "\" to no file name"));
    names_by_file[file.get<std::string>()].push_back(name);
  }
  for (const auto& [file, names] : names_by_file) {
    files.push_back(std::make_unique<safetensors::reader>((from.parent_path() / file).string()));
    for (const std::string& name : names)
      if (!files.back()->find(name))
        throw safetensors::format_error(text::cat("safetensors index ", from.string(), " places tensor \"", name,
                                                  "\" in ", file, ", which does not hold it"));
  }
  return files;
}

/// The tensors of opened safetensors files as checkpoint records, one whole tensor each; a
/// name in two files, or a dtype strata does not convert, is refused naming the tensor.
inline std::vector<record> weight_records(const std::vector<std::unique_ptr<safetensors::reader>>& files) {
  std::vector<record> records;
  std::map<std::string, const safetensors::reader*> seen;  // not views: the records move
  for (const auto& f : files)
    for (record& r : f->records()) {
      if (const auto [at, fresh] = seen.emplace(r.name, f.get()); !fresh)
        throw safetensors::format_error(text::cat("tensor \"", r.name, "\" is both in ", at->second->path(), " and in ",
                                                  f->path()));
      records.push_back(std::move(r));
    }
  return records;
}

/// Collective: fills `state` from the weights in `from` (a .safetensors file, or an index of
/// shards), read by every rank, as a restore of weights alone does: any layout and mesh
/// takes its parts, the state beyond the weights (optimizer state) keeps its values, a
/// tensor the model lacks and a weight missing from the file are refused by name.
/// `executor::load_weights` calls it.
template <Group C>
void load_weights(C& comm, const std::filesystem::path& from, const state_set& state) {
  std::vector<std::unique_ptr<safetensors::reader>> files;
  std::vector<record> records;
  detail::agree(comm, text::cat("loading weights from ", from.string()), [&] {
    files = open_safetensors(from);
    records = weight_records(files);
    // The weights alone: optimizer state the file may carry (export --optimizer-state) stays
    // out. (The index's keys are views into the records: decided first, erased after.)
    std::set<std::string> beyond;
    const detail::records_by_name index = detail::index_records(records);
    for (const record& r : records)
      if (detail::beyond_weights(r.name, index)) beyond.insert(r.name);
    std::erase_if(records, [&](const record& r) { return beyond.contains(r.name); });
  });
  detail::fill_state(comm, records, state, from, true);
}

struct import_result {
  std::size_t tensors = 0;
  std::uint64_t elements = 0;
};

/// Imports the tensors of `from` (a .safetensors file, or an index of shards) as the
/// checkpoint at step 0 of `into`, weights alone. Refused before anything is written when
/// `into` holds checkpoints already, or a tensor is refused (its dtype, a name twice, a NaN
/// or an infinity). Holds the tensors in memory as float32 while it writes them.
inline import_result import_safetensors(const std::filesystem::path& from, const store& into) {
  if (const auto steps = into.committed_steps(); !steps.empty())
    throw usage_error(text::cat(into.directory().string(), " holds checkpoints already (the newest of step ", steps.front(),
                                "); import into an empty folder"));
  const auto files = open_safetensors(from);
  const std::vector<record> records = weight_records(files);
  if (records.empty()) throw safetensors::format_error(text::cat(from.string(), " holds no tensor"));
  import_result result;
  std::vector<std::vector<float>> values;
  state_set state;
  model_description description;
  description.weights_only = true;
  for (const record& r : records) {
    const std::vector<float>& v = values.emplace_back(r.floats());
    if (const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); }); bad != v.end())
      throw safetensors::format_error(text::cat("safetensors file ", from.string(), ": tensor \"", r.name, "\" holds ",
                                                std::isnan(*bad) ? "NaN" : "an infinity", " at element ", bad - v.begin()));
    state.add({r.name, {r.shape.begin(), r.shape.end()}, sharing::replicated, values.back()});
    const safetensors::tensor_info& t = static_cast<const safetensors::reader*>(r.file)->tensor_of(r);
    description.variables.push_back({r.name, "", std::string(safetensors::word_of(*t.type))});
    ++result.tensors;
    result.elements += r.count;
  }
  single_process one;
  into.save(one, 0, state, {}, description);
  return result;
}

}  // namespace strata::ckpt
