#pragma once
// STRATA_DEBUG=detail, as PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL: checks on every step that
// cost too much to be the default. In detail mode
// - the tensor-parallel collectives compare their group's inputs (a CRC-32 each) where every
//   rank of the tensor group must hold the same values, and name the rank that differs;
// - the executor scans every bucket's averaged gradient for NaN and infinity, not only the
//   compressed ones (executor_options::compression.scan_uncompressed).
// The checks that cost little run always: the tensor group's whole variables are compared
// before every checkpoint (executor.hpp).
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include <fmt/format.h>

#include "strata/ckpt/format.hpp"
#include "strata/error.hpp"

namespace strata {

/// STRATA_DEBUG as a level: unset, empty or "off" is the default; "detail" adds the per-step
/// checks. Anything else is refused, so that a misspelling does not leave the checks off.
inline bool debug_detail_from(std::string_view setting) {
  if (setting.empty() || setting == "off") return false;
  if (setting == "detail") return true;
  throw usage_error(fmt::format("STRATA_DEBUG=\"{}\": say \"detail\" for the per-step checks, or \"off\"", setting));
}

/// Whether STRATA_DEBUG=detail: read once, when first asked.
inline bool debug_detail() {
  static const bool on = [] {
    const char* setting = std::getenv("STRATA_DEBUG");
    return debug_detail_from(setting ? setting : "");
  }();
  return on;
}

/// What the detail checks compare across ranks: a CRC-32 of the values' bytes, so that equal
/// values compare equal bit for bit and a difference anywhere shows.
inline std::uint32_t fingerprint_of(std::span<const float> values) { return ckpt::crc32_of(std::as_bytes(values)); }

}  // namespace strata
