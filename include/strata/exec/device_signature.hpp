#pragma once
// The nccl executor's start-up signature, built on the CPU: the same header and setting lines
// as the host executor's (world, micro-batches per update, bucket sizes, the optimizer's
// hyper-parameters), then every device variable (name, shape, element type, wire type,
// placement). Plain C++ without fmt, so nvcc compiles it and CPU tests check it.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "strata/exec/signature_check.hpp"
#include "strata/model/device_variable.hpp"
#include "strata/sync/bucket_plan.hpp"

namespace strata {

/// A line per fact that decides the collectives or the replicas' values.
template <class O>
std::vector<std::string> device_signature(std::span<const device_variable_binding> variables, int world_size,
                                          const sync::bucket_options& buckets, int accumulation_steps, const O& optimizer) {
  std::vector<std::string> lines = {signature_header(world_size),
                                    setting_line("accumulation_steps", std::to_string(accumulation_steps))};
  for (std::vector<std::string> settings : {bucket_settings(buckets), hyper_parameter_settings(optimizer)})
    lines.insert(lines.end(), settings.begin(), settings.end());
  for (const device_variable_binding& v : variables)
    lines.push_back("variable \"" + v.name + "\" " + detail::shape_text(v.shape) + " " +
                    std::string(element_type_name(v.type)) + " as " + std::string(element_type_name(v.wire)) +
                    (v.sharded ? " PS" : " replicated"));
  return lines;
}

}  // namespace strata
