#pragma once
// The checkpoint store's non-template code: compiled in every translation unit when strata
// is header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <system_error>

#include "strata/ckpt/store.hpp"

namespace strata::ckpt {
namespace detail {

STRATA_DECL record blob(std::string name, std::string_view bytes) {
  record r;
  r.kind = record_kind::blob;
  r.name = std::move(name);
  r.count = bytes.size();
  r.payload = std::as_bytes(std::span(bytes));
  return r;
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

STRATA_DECL std::uint64_t random_id() {
  std::random_device source;
  return (std::uint64_t{source()} << 32) ^ source();
}

STRATA_DECL records_by_name index_records(const std::vector<record>& records) {
  records_by_name index;
  for (const record& r : records)
    if (r.kind != record_kind::blob) index[r.name].push_back(&r);
  for (auto& [name, list] : index)
    std::stable_sort(list.begin(), list.end(), [](const record* a, const record* b) { return a->begin < b->begin; });
  return index;
}

STRATA_DECL void fill(const tensor_state& t, const records_by_name& index, int rank, int size,
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

STRATA_DECL void refuse_unknown(const records_by_name& index, const state_set& state, const std::filesystem::path& folder) {
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

}  // namespace detail

STRATA_DECL std::vector<std::int64_t> store::committed_steps() const {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, ec))
    if (auto step = step_of(entry.path()); step && std::filesystem::exists(entry.path() / commit_name, ec)) steps.push_back(*step);
  std::sort(steps.begin(), steps.end(), std::greater<>());
  return steps;
}

STRATA_DECL checkpoint_contents store::open(std::int64_t step) const {
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

STRATA_DECL std::optional<std::int64_t> store::step_of(const std::filesystem::path& folder) {
  const std::string name = folder.filename().string();
  if (!name.starts_with("step-")) return std::nullopt;
  std::int64_t step = 0;
  const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return step;
}

STRATA_DECL void store::forget(const std::filesystem::path& folder, int rank, int size) {
  std::error_code ignored;
  std::filesystem::remove(folder / rank_file(rank, size), ignored);
  std::filesystem::remove(folder, ignored);  // only if empty
}

STRATA_DECL void store::commit(const std::filesystem::path& folder, std::int64_t step, std::uint64_t id, int world_size,
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

STRATA_DECL std::uint32_t store::write_rank_file(const std::filesystem::path& folder, const std::string& identity, int rank,
                                                 int size, const state_set& state, const model_description& description) {
  std::filesystem::create_directories(folder);
  if (rank == 0) std::filesystem::remove(folder / commit_name);  // re-saving a step: not committed meanwhile
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
    r.source_rank = static_cast<std::uint32_t>(rank);
    std::span<const float> data = t.data;
    if (t.how == sharing::replicated || t.how == sharing::sharded) {
      // Each holder of the same values writes an even part of them.
      const bool everyone = t.how == sharing::replicated && t.holders == 0;
      const int holders = everyone ? size : std::max(t.holders, 1), holder = everyone ? rank : t.holder;
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
  detail::write_atomically(folder / rank_file(rank, size), contents);
  return detail::stored_crc(contents);
}

STRATA_DECL void store::prune(std::int64_t newest) const {
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

STRATA_DECL void store::describe(const record& blob, model_description& description) {
  if (blob.name == "strata/mesh") description.mesh = blob.text();
  if (blob.name == "strata/weights_only") description.weights_only = blob.text() == "1";
  if (blob.name != "strata/variables") return;
  for (auto& v : detail::parse_variables(blob.text()))
    if (std::none_of(description.variables.begin(), description.variables.end(),
                     [&](const model_description::variable& known) { return known.name == v.name; }))
      description.variables.push_back(std::move(v));
}

}  // namespace strata::ckpt
