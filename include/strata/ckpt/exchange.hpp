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
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "strata/ckpt/safetensors.hpp"
#include "strata/ckpt/store.hpp"
#include "strata/config.hpp"
#include "strata/detail/text.hpp"
#include "strata/error.hpp"

namespace strata::ckpt {

/// The newest checkpoint of `s` that opens with every check passed (or checkpoint `step`),
/// and why each newer one was refused. checkpoint_error when none is usable.
struct usable_checkpoint {
  checkpoint_contents contents;
  std::vector<std::string> refusals;  ///< of newer checkpoints, newest first
};
STRATA_DECL usable_checkpoint newest_usable(const store& s, std::optional<std::int64_t> step = std::nullopt);

/// The dtype a variable was trained in, as a model description names it ("float32").
STRATA_DECL safetensors::dtype trained_dtype(const model_description& d, std::string_view tensor);

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
STRATA_DECL export_result export_safetensors(const store& from, const std::filesystem::path& to, const export_options& o);

/// The safetensors files of `from`: itself, or the shards its index (*.index.json) names.
STRATA_DECL std::vector<std::unique_ptr<safetensors::reader>> open_safetensors(const std::filesystem::path& from);

/// The tensors of opened safetensors files as checkpoint records, one whole tensor each; a
/// name in two files, or a dtype strata does not convert, is refused naming the tensor.
STRATA_DECL std::vector<record> weight_records(const std::vector<std::unique_ptr<safetensors::reader>>& files);

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
STRATA_DECL import_result import_safetensors(const std::filesystem::path& from, const store& into);

}  // namespace strata::ckpt

#if defined(STRATA_HEADER_ONLY)
#include "strata/ckpt/impl/exchange.ipp"
#endif
