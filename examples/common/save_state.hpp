#pragma once
// --save-state of the examples on a mesh: each rank writes the parameters it holds, as its
// executor places them in the whole model (exec.state()), to a safetensors file of its own.
// A tensor-parallel part or a parameter-server shard is a slice of the whole tensor: each
// slice is stored flat under "<name>@<first element>", and the whole tensor's shape is in
// the metadata under "<name>". What the tests compare strata-ckpt's exports against.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <strata/ckpt/safetensors.hpp>

namespace examples {

/// Collective (exec.state() reads parameter-server shards from their servers).
template <class Executor>
void save_rank_state(Executor& exec, const std::string& path) {
  const strata::ckpt::state_set state = exec.state();
  const strata::ckpt::model_description d = exec.description();
  std::vector<strata::ckpt::safetensors::tensor_to_write> slices;
  std::vector<std::span<const float>> values;
  std::map<std::string, std::string> shapes;
  for (const strata::ckpt::tensor_state& t : state.tensors()) {
    const bool parameter = std::ranges::any_of(d.variables, [&](const auto& v) { return v.name == t.name; });
    if (!parameter || t.how == strata::ckpt::sharing::rank_local) continue;
    const std::size_t first = t.how == strata::ckpt::sharing::sharded ? t.begin : 0;
    slices.push_back({fmt::format("{}@{}", t.name, first), strata::ckpt::safetensors::dtype::f32, {t.data.size()}});
    values.emplace_back(t.data);
    shapes[t.name] = fmt::format("{}", fmt::join(t.shape, ","));
  }
  strata::ckpt::safetensors::write(path, slices, shapes, [&](std::size_t k, std::uint64_t first, std::span<float> out) {
    std::copy_n(values[k].begin() + static_cast<std::ptrdiff_t>(first), out.size(), out.begin());
  });
}

}  // namespace examples
