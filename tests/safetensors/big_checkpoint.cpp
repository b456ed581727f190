// Writes a checkpoint of about 1 GiB for the export memory test: a 256 MiB tensor (the
// largest), two of 192 MiB, three of 128 MiB and many small ones, each with a momentum
// tensor of 1 MiB beside it, saved as one rank.
//
//   big_checkpoint DIR
#include <cstdio>
#include <string>
#include <vector>

#include <strata/ckpt/store.hpp>

int main(int argc, char** argv) {
  using namespace strata::ckpt;
  if (argc != 2) {
    std::fputs("usage: big_checkpoint DIR\n", stderr);
    return 64;
  }
  const std::vector<std::size_t> mib = {256, 192, 192, 128, 128, 128};
  std::vector<std::vector<float>> values;
  state_set state;
  auto add = [&](std::string name, std::size_t elements, std::size_t rows) {
    std::vector<float>& v = values.emplace_back(elements);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1021) * 0.5f;
    state.add({std::move(name), {rows, elements / rows}, sharing::replicated, v});
  };
  for (std::size_t k = 0; k < mib.size(); ++k) {
    add("layer" + std::to_string(k) + ".weight", (mib[k] << 20) / sizeof(float), 1024);
    add("layer" + std::to_string(k) + ".weight/momentum", (1 << 20) / sizeof(float), 1024);
  }
  for (int k = 0; k < 200; ++k) add("small" + std::to_string(k), 4096, 64);
  single_process one;
  store(argv[1]).save(one, 7, state);
  return 0;
}
