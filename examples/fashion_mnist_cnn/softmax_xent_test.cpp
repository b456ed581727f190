// The loss's host/device math on the CPU: known values, the gradient against central
// finite differences, and no overflow with large logits.
#include <cmath>
#include <cstdio>

#include "softmax_xent.hpp"

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (ok) return;
  ++failures;
  std::printf("FAILED: %s\n", what);
}

}  // namespace

int main() {
  using fashion_mnist_cnn::softmax_cross_entropy;
  constexpr int classes = 4;
  // Equal logits: the loss is log(classes) and the gradient softmax - one-hot.
  const float equal[classes] = {0.5f, 0.5f, 0.5f, 0.5f};
  float grad[classes];
  const auto uniform = softmax_cross_entropy(equal, classes, 2, 1.0f, grad);
  expect(std::abs(uniform.loss - std::log(4.0f)) < 1e-6f, "equal logits: loss log(4)");
  expect(std::abs(grad[2] + 0.75f) < 1e-6f && std::abs(grad[0] - 0.25f) < 1e-6f, "equal logits: gradient");
  expect(uniform.correct == false, "equal logits: the first class wins ties");

  // The gradient (scaled by 0.5) against central differences of the loss.
  float logits[classes] = {1.0f, -2.0f, 0.3f, 2.5f};
  const auto r = softmax_cross_entropy(logits, classes, 1, 0.5f, grad);
  expect(!r.correct, "class 3 has the largest logit");
  for (int c = 0; c < classes; ++c) {
    const float h = 1e-2f, saved = logits[c];
    logits[c] = saved + h;
    const float up = softmax_cross_entropy(logits, classes, 1, 1.0f, nullptr).loss;
    logits[c] = saved - h;
    const float down = softmax_cross_entropy(logits, classes, 1, 1.0f, nullptr).loss;
    logits[c] = saved;
    expect(std::abs(0.5f * (up - down) / (2 * h) - grad[c]) < 1e-3f, "gradient matches finite differences");
  }

  // Logits far beyond exp's range stay finite.
  const float large[classes] = {1000.0f, 0.0f, -1000.0f, 999.0f};
  const auto big = softmax_cross_entropy(large, classes, 0, 1.0f, grad);
  expect(std::isfinite(big.loss) && big.correct && std::abs(big.loss - std::log1p(std::exp(-1.0f))) < 1e-5f,
         "large logits: finite loss");
  std::printf("%s\n", failures == 0 ? "softmax_xent_test: all passed" : "softmax_xent_test: failed");
  return failures == 0 ? 0 : 1;
}
