// The index arithmetic of 2-d pooling, shared by the CUDA pooling kernels and the host tests:
// PyTorch's output sizes (ceil_mode keeps a last window only if it starts inside the input or
// its left padding), the max window with dilation, the average window clipped to the padded
// input (count_include_pad's divisor) and to the input, the adaptive windows
// [floor(i * in / out), ceil((i + 1) * in / out)), and, for the gather-style backward kernels,
// the range of outputs whose windows can hold a given input position (a superset: the kernels
// test each candidate's window, and the tests check no window is missed).
#pragma once

#include <cstdint>

#include "ferry/core/float_bits.h"  // FERRY_HOST_DEVICE

namespace ferry::cuda::pool {

FERRY_HOST_DEVICE inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
FERRY_HOST_DEVICE inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
FERRY_HOST_DEVICE inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// kernel >= 1, stride >= 1, pad >= 0, dilation >= 1 (the caller checks).
FERRY_HOST_DEVICE inline int64_t output_size(int64_t in, int64_t kernel, int64_t stride,
                                             int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = floor_div(span, stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The input positions of max window `o`: begin, begin + dilation, ... < end, all inside the
// input (begin may be >= end when the window lies in the padding).
struct MaxWindow {
  int64_t begin;
  int64_t end;
};
FERRY_HOST_DEVICE inline MaxWindow max_window(int64_t o, int64_t in, int64_t kernel, int64_t stride,
                                              int64_t pad, int64_t dilation) {
  int64_t begin = o * stride - pad;
  const int64_t end = min64(begin + (kernel - 1) * dilation + 1, in);
  if (begin < 0) begin += ((-begin + dilation - 1) / dilation) * dilation;
  return {begin, end};
}

// Average window `o`: [begin, end) inside the input, and its size clipped to the padded input
// only (count_include_pad's count).
struct AvgWindow {
  int64_t begin;
  int64_t end;
  int64_t padded_size;
};
FERRY_HOST_DEVICE inline AvgWindow avg_window(int64_t o, int64_t in, int64_t kernel, int64_t stride,
                                              int64_t pad) {
  int64_t begin = o * stride - pad;
  int64_t end = min64(begin + kernel, in + pad);
  const int64_t padded = end - begin;
  begin = max64(begin, 0);
  end = min64(end, in);
  return {begin, end, padded};
}

// PyTorch's divisor of one average window (divisor_override: 0 when not given).
FERRY_HOST_DEVICE inline int64_t avg_divisor(const AvgWindow& h, const AvgWindow& w,
                                             bool count_include_pad, int64_t divisor_override) {
  if (divisor_override != 0) return divisor_override;
  if (count_include_pad) return h.padded_size * w.padded_size;
  return (h.end - h.begin) * (w.end - w.begin);
}

// Outputs [begin, end) whose average windows may hold input position i.
struct OutputRange {
  int64_t begin;
  int64_t end;
};
FERRY_HOST_DEVICE inline OutputRange avg_outputs_of(int64_t i, int64_t kernel, int64_t stride,
                                                    int64_t pad, int64_t out) {
  const int64_t begin = i + pad < kernel ? 0 : (i + pad - kernel) / stride + 1;
  const int64_t end = min64((i + pad) / stride + 1, out);
  return {begin, end};
}

FERRY_HOST_DEVICE inline int64_t adaptive_begin(int64_t o, int64_t out, int64_t in) {
  return (o * in) / out;
}
FERRY_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t out, int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}
// Outputs [begin, end) whose adaptive windows may hold input position i.
FERRY_HOST_DEVICE inline OutputRange adaptive_outputs_of(int64_t i, int64_t in, int64_t out) {
  return {(i * out) / in, ((i + 1) * out + in - 1) / in};
}

}  // namespace ferry::cuda::pool
