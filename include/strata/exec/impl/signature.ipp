#pragma once
// The host executor's model signature: compiled in every translation unit when strata is
// header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/exec/signature.hpp"

namespace strata {

STRATA_DECL std::vector<std::string> model_signature(std::span<const variable_binding> variables, int world_size,
                                                     int micro_batches) {
  std::vector<std::string> lines = {signature_header(world_size),
                                    setting_line("accumulation_steps", std::to_string(micro_batches))};
  for (const variable_binding& v : variables)
    lines.push_back(fmt::format("variable \"{}\" [{}] float32 {}", v.name, fmt::join(v.shape, ","), v.strategy));
  return lines;
}

}  // namespace strata
