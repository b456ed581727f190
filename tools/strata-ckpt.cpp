// strata-ckpt: strata's checkpoints for people and for the rest of the ecosystem.
//
//   strata-ckpt info DIR                                  the newest usable checkpoint, why newer ones are not
//   strata-ckpt export DIR --to model.safetensors         whole tensors, whatever layout saved them
//               [--dtype bf16] [--max-shard-size 5GB] [--optimizer-state] [--step N]
//   strata-ckpt import model.safetensors --into DIR       a checkpoint at step 0 that any strategy and mesh resumes
//
// Exit status: 0; 64 for a usage error; 65 for an unusable checkpoint or safetensors file
// (one line naming the file and the tensor or byte at fault; nothing is written); 74 where the
// output cannot be written.
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <ranges>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <strata/ckpt/exchange.hpp>
#include <strata/exit_status.hpp>

#include "../examples/common/cli.hpp"

namespace {

using namespace strata;
namespace fs = std::filesystem;

/// "5GB", "500MB", "1GiB", "4096": bytes, or a usage error naming the flag.
std::uint64_t parse_size(const std::string& text) {
  std::uint64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  std::string unit(end, text.data() + text.size());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, std::uint64_t> units = {
      {"", 1},         {"B", 1},          {"KB", 1000},       {"MB", 1000'000}, {"GB", 1000'000'000},
      {"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1ull << 30}};
  const auto scale = units.find(unit);
  if (ec != std::errc() || end == text.data() || scale == units.end() || number == 0 ||
      number > std::numeric_limits<std::uint64_t>::max() / scale->second)
    throw examples::flag_error("--max-shard-size", fmt::format("'{}' is not a size such as 5GB, 500MB or 1GiB",
                                                               strata::detail::excerpt(text, 40)));
  return number * scale->second;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int info(const std::string& directory, std::optional<std::int64_t> step) {
  const ckpt::store store(directory);
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) throw ckpt::checkpoint_error(fmt::format("{} is not a folder", directory));
  const ckpt::usable_checkpoint found = ckpt::newest_usable(store, step);
  const ckpt::checkpoint_contents& c = found.contents;
  for (const std::string& why : found.refusals) fmt::print("refused: {}\n", why);
  const auto& d = c.header.description;
  fmt::print("checkpoint {}: step {} (updates done), saved by {} rank{}{}{}\n", store.folder_of(c.header.step).string(),
             c.header.step, c.header.world_size, c.header.world_size == 1 ? "" : "s",
             d.mesh.empty() ? "" : fmt::format(" on mesh {}", d.mesh), d.weights_only ? ", weights alone (imported)" : "");
  fmt::print("checksums: CRC-32 of the commit file and of {} rank file{} match\n", c.header.world_size,
             c.header.world_size == 1 ? "" : "s");
  for (const auto& [key, value] : c.header.meta) fmt::print("meta {} = {}\n", key, strata::detail::excerpt(value, 80));
  const ckpt::detail::records_by_name index = ckpt::detail::index_records(c.records);
  fmt::print("{:<40} {:<18} {:<10} {}\n", "tensor", "shape", "dtype", "strategy");
  for (const auto& [name, records] : index) {
    const bool weight = !ckpt::detail::beyond_weights(name, index);
    std::string what = records.front()->kind == ckpt::record_kind::rank_local ? "(each rank's own: not exported)"
                       : weight                                              ? ""
                                                                             : "(optimizer state)";
    std::string dtype = "float32";
    for (const auto& v : d.variables)
      if (v.name == name) what = v.strategy, dtype = v.dtype;
    fmt::print("{:<40} {:<18} {:<10} {}\n", weight ? std::string(name) : "  " + std::string(name),
               shape_text(records.front()->shape), dtype, what);
  }
  for (std::int64_t older : store.committed_steps()) {
    if (older >= c.header.step) continue;
    try {
      store.open(older);
      fmt::print("older: step {}, usable\n", older);
    } catch (const ckpt::checkpoint_error& e) {
      fmt::print("older: step {}, refused: {}\n", older, e.what());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata's checkpoints: inspect them, export them to safetensors, import safetensors into them"};
  app.require_subcommand(1);
  std::string directory, to, from, dtype = "as-trained", shard_size;
  std::int64_t step = -1;
  bool optimizer_state = false;

  auto* info_command = app.add_subcommand("info", "the newest usable checkpoint: step, ranks, mesh, tensors, checks");
  info_command->add_option("DIR", directory, "a checkpoint folder (--checkpoint-dir of a run)")->required();
  examples::number(*info_command, "--step", step, std::int64_t{0}, std::numeric_limits<std::int64_t>::max(),
                   "this checkpoint instead of the newest usable one");

  auto* export_command = app.add_subcommand("export", "one consolidated safetensors file (or shards and an index)");
  export_command->add_option("DIR", directory, "a checkpoint folder")->required();
  export_command->add_option("--to", to, "the .safetensors file to write")->required();
  examples::one_of(*export_command, "--dtype", dtype, {"as-trained", "f32", "f16", "bf16", "f64"},
                   "element type of the exported tensors");
  export_command->add_option("--max-shard-size", shard_size,
                             "split into shards of at most this size (5GB, 500MB, 1GiB) plus an index");
  export_command->add_flag("--optimizer-state", optimizer_state, "also the optimizer's tensors (name/momentum, ...)");
  examples::number(*export_command, "--step", step, std::int64_t{0}, std::numeric_limits<std::int64_t>::max(),
                   "this checkpoint instead of the newest usable one");

  auto* import_command = app.add_subcommand("import", "a checkpoint at step 0 from safetensors weights");
  import_command->add_option("FILE", from, "a .safetensors file, or the .index.json of shards")->required();
  import_command->add_option("--into", directory, "the checkpoint folder to create (empty or new)")->required();

  if (const auto status = examples::parse(app, argc, argv, "strata-ckpt")) return *status;
  try {
    const std::optional<std::int64_t> chosen = step >= 0 ? std::optional(step) : std::nullopt;
    if (info_command->parsed()) return info(directory, chosen);
    if (export_command->parsed()) {
      ckpt::export_options o;
      o.step = chosen;
      o.optimizer_state = optimizer_state;
      if (dtype != "as-trained") o.dtype = ckpt::safetensors::dtype_named(dtype);
      if (!shard_size.empty()) o.max_shard_bytes = parse_size(shard_size);
      require_writable_file(to, "--to");
      std::error_code ec;
      if (!fs::is_directory(directory, ec)) throw ckpt::checkpoint_error(fmt::format("{} is not a folder", directory));
      if (fs::path(to).has_parent_path()) fs::create_directories(fs::path(to).parent_path());
      const ckpt::export_result r = ckpt::export_safetensors(ckpt::store(directory), to, o);
      fmt::print("exported step {}: {} tensors, {:.1f} MiB, to {}\n", r.step, r.tensors,
                 static_cast<double>(r.bytes) / (1 << 20),
                 fmt::join(r.files | std::views::transform([](const fs::path& p) { return p.string(); }), ", "));
      return 0;
    }
    require_writable_folder(directory, "--into");
    const ckpt::import_result r = ckpt::import_safetensors(from, ckpt::store(directory));
    fmt::print("imported {} tensors ({} values) from {} as the checkpoint of step 0 in {}\n", r.tensors, r.elements, from,
               directory);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-ckpt: %s\n", e.what());
    return static_cast<int>(exit_status_of(e));
  }
}
