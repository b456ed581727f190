#pragma once
// Comparing the ranks' model signatures, whatever carried them: every executor checks at
// start-up that all ranks declared the same model, since collectives over different models
// pair up unrelated buffers (or hang on different sizes). The host executor gathers the
// signatures over MPI (signature.hpp), the nccl executor over NCCL. Plain C++ without fmt,
// so the GPU-only build includes it too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/config.hpp"
#include "strata/error.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/sync/bucket_plan.hpp"

namespace strata {

/// The ranks disagree about the model.
class signature_error : public error {
 public:
  using error::error;
};

/// The first line of every executor's signature: the library and the world.
inline std::string signature_header(int world_size) {
  return "strata " + std::to_string(version_major) + "." + std::to_string(version_minor) + "." +
         std::to_string(version_patch) + " with " + std::to_string(world_size) + " ranks";
}

namespace detail {

/// A signature as one text (a line per fact), the form it travels in.
STRATA_DECL std::string join_lines(const std::vector<std::string>& lines);

STRATA_DECL std::vector<std::string> split_lines(std::string_view text);

/// Every rank's lines, gathered on every rank of `ranks`: variable-length texts through two
/// fixed-size all-gathers, the lengths, then the texts padded to the longest.
/// `allgather(mine, all)` is the transport's all-gather of host data (spans of
/// std::uint64_t, then of char): rank i's block lands at i * mine.size() of `all`.
template <class AllGather>
std::vector<std::vector<std::string>> gather_lines(int ranks, const std::vector<std::string>& lines, AllGather&& allgather) {
  std::string text = join_lines(lines);
  const std::uint64_t mine = text.size();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(ranks));
  allgather(std::span<const std::uint64_t>(&mine, 1), std::span<std::uint64_t>(sizes));
  const std::uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
  text.resize(longest, '\0');
  std::string all(longest * sizes.size(), '\0');
  allgather(std::span<const char>(text), std::span<char>(all));
  std::vector<std::vector<std::string>> result;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    result.push_back(split_lines(std::string_view(all.data() + r * longest, sizes[r])));
  return result;
}

}  // namespace detail

/// A signature line for a setting that must agree across ranks: "setting <name> = <value>".
inline std::string setting_line(std::string_view name, std::string_view value) {
  return "setting " + std::string(name) + " = " + std::string(value);
}

/// The setting lines of the fusion buckets' sizes: different sizes pair unrelated buffers.
inline std::vector<std::string> bucket_settings(const sync::bucket_options& buckets) {
  return {setting_line("buckets.first_bucket_bytes", std::to_string(buckets.first_bucket_bytes)),
          setting_line("buckets.bucket_bytes", std::to_string(buckets.bucket_bytes))};
}

/// The setting lines of an optimizer's hyper-parameters ("optimizer.lr", ...): replicas that
/// update with different settings drift apart in silence.
template <class O>
std::vector<std::string> hyper_parameter_settings(const O& optimizer) {
  std::vector<std::string> lines;
  for (const optim::hyper_parameter& h : hyper_parameters_of(optimizer))
    lines.push_back(setting_line("optimizer." + h.name, h.value_text()));
  return lines;
}

/// Throws signature_error unless every rank's signature (`all[r]`, a line per fact) equals
/// rank 0's. The message names the first differing line (the setting, for a setting) and
/// every rank that differs there.
STRATA_DECL void check_signatures(const std::vector<std::vector<std::string>>& all);

}  // namespace strata

#if defined(STRATA_HEADER_ONLY)
#include "strata/exec/impl/signature_check.ipp"
#endif
