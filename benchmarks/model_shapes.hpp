#pragma once
// The parameter shapes of torchvision's resnet50 (161 tensors, 25,557,032 parameters) and
// vgg16 (32 tensors, 138,357,544 parameters), in declaration order: the gradients a
// data-parallel model synchronizes every step.
#include <cstddef>
#include <stdexcept>
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

inline std::vector<tensor_shape> vgg16_shapes() {
  std::vector<tensor_shape> shapes;
  const std::size_t convs[][2] = {{64, 3},    {64, 64},   {128, 64},  {128, 128}, {256, 128}, {256, 256}, {256, 256},
                                  {512, 256}, {512, 512}, {512, 512}, {512, 512}, {512, 512}, {512, 512}};
  const std::size_t features[] = {0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28};  // torchvision's module indices
  for (std::size_t i = 0; i < 13; ++i) {
    shapes.push_back({fmt::format("features.{}.weight", features[i]), {convs[i][0], convs[i][1], 3, 3}});
    shapes.push_back({fmt::format("features.{}.bias", features[i]), {convs[i][0]}});
  }
  const std::size_t fcs[][3] = {{0, 4096, 25088}, {3, 4096, 4096}, {6, 1000, 4096}};
  for (const auto& fc : fcs) {
    shapes.push_back({fmt::format("classifier.{}.weight", fc[0]), {fc[1], fc[2]}});
    shapes.push_back({fmt::format("classifier.{}.bias", fc[0]), {fc[1]}});
  }
  return shapes;
}

/// Checks a shape list against the parameter count torchvision reports.
inline void expect_size(const std::vector<tensor_shape>& shapes, std::size_t tensors, std::size_t parameters) {
  std::size_t total = 0;
  for (const auto& s : shapes) total += s.elements();
  if (shapes.size() != tensors || total != parameters)
    throw std::logic_error(fmt::format("expected {} tensors and {} parameters, got {} and {}", tensors, parameters,
                                       shapes.size(), total));
}

}  // namespace bench
