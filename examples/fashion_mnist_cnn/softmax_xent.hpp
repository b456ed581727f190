#pragma once
// Softmax cross-entropy of one sample, written once for the host and the device: the loss
// kernel (train.cu) calls it per sample, and softmax_xent_test.cpp checks it on the CPU
// against finite differences.
#include <math.h>  // expf, logf: the same names on the host and the device

#include <strata/config.hpp>

namespace fashion_mnist_cnn {

struct xent_result {
  float loss;    ///< -log softmax(logits)[label]
  bool correct;  ///< the largest logit (the first, on ties) is the label's
};

/// The loss of `logits[0..classes)` for `label`; when `grad` is not null, also writes
/// `scale * d loss / d logits` there (scale: 1 / batch for the gradient of the batch mean).
/// The softmax is taken after subtracting the largest logit, so large logits cannot overflow.
STRATA_HOST_DEVICE xent_result softmax_cross_entropy(const float* logits, int classes, int label, float scale,
                                                     float* grad) {
  int best = 0;
  for (int c = 1; c < classes; ++c)
    if (logits[c] > logits[best]) best = c;
  const float top = logits[best];
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum += expf(logits[c] - top);
  const float log_sum = logf(sum);
  if (grad != nullptr)
    for (int c = 0; c < classes; ++c)
      grad[c] = scale * (expf(logits[c] - top - log_sum) - (c == label ? 1.0f : 0.0f));
  return {log_sum - (logits[label] - top), best == label};
}

}  // namespace fashion_mnist_cnn
