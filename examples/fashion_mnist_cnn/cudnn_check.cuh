#pragma once
// Every cuDNN status goes through CNN_CUDNN_CHECK, like STRATA_CUDA_CHECK for CUDA and
// cuBLAS: a failure throws strata::cuda_error naming the call, the place and cuDNN's reason.
#include <cudnn.h>

#include <string>

#include <strata/cuda/check.cuh>

namespace fashion_mnist_cnn::detail {

inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw strata::cuda_error(strata::cuda::detail::describe_failure(call, file, line, cudnnGetErrorString(status),
                                                                    ("cudnnStatus_t " + std::to_string(status)).c_str()));
}

}  // namespace fashion_mnist_cnn::detail

/// A macro only because the message quotes the call and its file and line.
#define CNN_CUDNN_CHECK(call) ::fashion_mnist_cnn::detail::check_cudnn((call), #call, __FILE__, __LINE__)
