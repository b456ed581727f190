#pragma once
// kernels::pack and unpack on the GPU for a fixed list of device buffers (a fusion
// bucket's gradients): one launch moves them all. The parts (kernels::bucket_parts) are
// uploaded once, when the packer is made; block row y of the grid copies buffer y.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "strata/cuda/buffer.cuh"
#include "strata/cuda/launch.cuh"
#include "strata/kernels/pack.hpp"

namespace strata::cuda {

namespace detail {

inline constexpr std::size_t grid_rows_max = 65535;  // CUDA's limit on gridDim.y

/// Pack: each buffer to its place in the bucket; otherwise the way back.
template <int N, bool Pack, class T>
__global__ void bucket_copy_kernel(const kernels::bucket_part<T>* parts, std::size_t count, T* bucket) {
  for (std::size_t i = blockIdx.y; i < count; i += gridDim.y) {
    const kernels::bucket_part<T> part = parts[i];
    for_each_fragment<N>(part.size, [&](std::size_t at, auto w) {
      constexpr int M = decltype(w)::value;
      T* buffer = part.data + at;
      T* packed = bucket + part.offset + at;
      if constexpr (Pack)
        store(packed, load<M>(buffer));
      else
        store(buffer, load<M>(packed));
    });
  }
}

}  // namespace detail

/// Packs a fixed list of device buffers into a bucket of size() elements and back.
template <class T>
class bucket_packer {
 public:
  bucket_packer(std::span<const std::span<T>> buffers, cudaStream_t stream)
      : parts_(kernels::bucket_parts(buffers)), table_(parts_.size(), stream) {
    for (const kernels::bucket_part<T>& p : parts_) {
      largest_ = std::max(largest_, p.size);
      vectorizable_ = vectorizable_ && aligned(p.data) && p.offset % fragment == 0;
    }
    if (!parts_.empty())
      STRATA_CUDA_CHECK(cudaMemcpyAsync(table_.data(), parts_.data(), parts_.size() * sizeof(parts_[0]),
                                        cudaMemcpyHostToDevice, stream));
  }

  std::size_t size() const { return kernels::bucket_size<T>(parts_); }

  void pack(std::span<T> bucket, cudaStream_t stream) const { copy<true>(bucket, stream); }
  void unpack(std::span<const T> bucket, cudaStream_t stream) const {
    copy<false>(std::span<T>(const_cast<T*>(bucket.data()), bucket.size()), stream);  // only read
  }

 private:
  static constexpr int fragment = static_cast<int>(16 / sizeof(T));

  static bool aligned(const T* p) { return reinterpret_cast<std::uintptr_t>(p) % (fragment * sizeof(T)) == 0; }

  template <bool Pack>
  void copy(std::span<T> bucket, cudaStream_t stream) const {
    kernels::detail::require_size(Pack ? "cuda::bucket_packer::pack" : "cuda::bucket_packer::unpack", "bucket",
                                  bucket.size(), size());
    if (size() == 0) return;
    auto run = [&](auto w) {
      constexpr int N = decltype(w)::value;
      const dim3 blocks(detail::blocks_for((largest_ + N - 1) / N),
                        static_cast<unsigned>(std::min(parts_.size(), detail::grid_rows_max)));
      detail::launch("bucket_copy_kernel", detail::bucket_copy_kernel<N, Pack, T>, blocks, detail::block_threads, stream,
                     table_.data(), parts_.size(), bucket.data());
    };
    if (vectorizable_ && aligned(bucket.data()))
      run(detail::width<fragment>{});
    else
      run(detail::width<1>{});
  }

  std::vector<kernels::bucket_part<T>> parts_;  // also the source of the table's upload
  device_buffer<kernels::bucket_part<T>> table_;
  std::size_t largest_ = 0;
  bool vectorizable_ = true;  // every buffer and its place in the bucket aligned to a fragment
};

}  // namespace strata::cuda
