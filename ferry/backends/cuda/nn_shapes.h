// Shape arithmetic of the CUDA nn kernels, in plain C++ so that it is unit-tested on the host:
// merging a run of dims into one strided dim (batch norm's [N, C, S], layer norm's [R, D],
// softmax's [outer, axis, inner]), convolution output sizes, and how many batch samples one
// cuDNN call may take (cuDNN describes tensors with 32-bit sizes and strides).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>

#include "ferry/core/array_ref.h"

namespace ferry::cuda {

// Dims [begin, end) of (sizes, strides) as one dim, when one stride walks them all in order;
// size-1 dims never stand in the way. An empty range (or all size 1) merges to (1, 1).
struct MergedDim {
  int64_t size = 1;
  int64_t stride = 1;
};
inline std::optional<MergedDim> merge_dims(IntArrayRef sizes, IntArrayRef strides, int64_t begin,
                                           int64_t end) {
  MergedDim m;
  bool any = false;
  for (int64_t d = end - 1; d >= begin; --d) {
    const auto i = static_cast<size_t>(d);
    if (sizes[i] == 1) continue;
    if (!any) {
      m = {sizes[i], strides[i]};
      any = true;
    } else if (strides[i] == m.size * m.stride) {
      m.size *= sizes[i];
    } else {
      return std::nullopt;
    }
  }
  return m;
}

// PyTorch's convolution output size (0 when the dilated kernel does not fit the padded input).
inline int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

// The largest number of batch samples (>= 1) such that every tensor of a call on them holds at
// most INT_MAX elements, given each tensor's elements per sample; 0 when even one sample is too
// large.
inline int64_t samples_per_call(int64_t batch, std::initializer_list<int64_t> per_sample) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  int64_t n = batch;
  for (int64_t e : per_sample) {
    if (e > kMax) return 0;
    if (e > 0) n = std::min(n, kMax / e);
  }
  return std::max<int64_t>(n, batch > 0 ? 1 : 0);
}

// How many blocks share one reduction of `count` elements when `groups` such reductions (one per
// channel or column group) run at once: enough blocks to reach `target_blocks`, but each of
// `threads` threads keeps >= 16 elements; between 1 and 65535 (a grid's y limit).
inline int splits_for(int64_t groups, int64_t count, int threads, int64_t target_blocks) {
  const int64_t by_work = (count + int64_t{threads} * 16 - 1) / (int64_t{threads} * 16);
  const int64_t by_device = target_blocks / std::max<int64_t>(groups, 1);
  return static_cast<int>(std::clamp<int64_t>(std::min(by_work, by_device), 1, 65535));
}

}  // namespace ferry::cuda
