#pragma once
// The parameter shapes of torchvision's resnet50 (161 tensors, 25,557,032 parameters), in
// declaration order: the gradients a data-parallel ResNet-50 synchronizes every step.
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace bench {

struct tensor_shape {
  std::string name;
  std::vector<std::size_t> dims;
  std::size_t elements() const {
    std::size_t n = 1;
    for (std::size_t d : dims) n *= d;
    return n;
  }
};

inline std::vector<tensor_shape> resnet50_shapes() {
  std::vector<tensor_shape> shapes;
  auto conv = [&](std::string name, std::size_t out, std::size_t in, std::size_t k) {
    shapes.push_back({name + ".weight", {out, in, k, k}});
  };
  auto batch_norm = [&](std::string name, std::size_t channels) {
    shapes.push_back({name + ".weight", {channels}});
    shapes.push_back({name + ".bias", {channels}});
  };
  conv("conv1", 64, 3, 7);
  batch_norm("bn1", 64);
  std::size_t in = 64;
  const std::size_t blocks[] = {3, 4, 6, 3}, widths[] = {64, 128, 256, 512};
  for (std::size_t layer = 0; layer < 4; ++layer)
    for (std::size_t b = 0; b < blocks[layer]; ++b) {
      const std::string prefix = fmt::format("layer{}.{}", layer + 1, b);
      const std::size_t width = widths[layer], out = width * 4;
      conv(prefix + ".conv1", width, in, 1);
      batch_norm(prefix + ".bn1", width);
      conv(prefix + ".conv2", width, width, 3);
      batch_norm(prefix + ".bn2", width);
      conv(prefix + ".conv3", out, width, 1);
      batch_norm(prefix + ".bn3", out);
      if (b == 0) {
        conv(prefix + ".downsample.0", out, in, 1);
        batch_norm(prefix + ".downsample.1", out);
      }
      in = out;
    }
  shapes.push_back({"fc.weight", {1000, 2048}});
  shapes.push_back({"fc.bias", {1000}});
  return shapes;
}

}  // namespace bench
