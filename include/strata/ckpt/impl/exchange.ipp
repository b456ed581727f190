#pragma once
// Checkpoint export and import's non-template code: compiled in every translation unit when
// strata is header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <system_error>

#include <nlohmann/json.hpp>

#include "strata/ckpt/exchange.hpp"

namespace strata::ckpt {

STRATA_DECL usable_checkpoint newest_usable(const store& s, std::optional<std::int64_t> step) {
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

STRATA_DECL safetensors::dtype trained_dtype(const model_description& d, std::string_view tensor) {
  for (const auto& v : d.variables)
    if (v.name == tensor)
      if (const auto t = safetensors::dtype_named(v.dtype)) return *t;
  return safetensors::dtype::f32;
}

STRATA_DECL export_result export_safetensors(const store& from, const std::filesystem::path& to, const export_options& o) {
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

STRATA_DECL std::vector<std::unique_ptr<safetensors::reader>> open_safetensors(const std::filesystem::path& from) {
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

STRATA_DECL std::vector<record> weight_records(const std::vector<std::unique_ptr<safetensors::reader>>& files) {
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

STRATA_DECL import_result import_safetensors(const std::filesystem::path& from, const store& into) {
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
