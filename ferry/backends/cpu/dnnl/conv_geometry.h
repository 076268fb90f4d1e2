// What the portable convolutions share (conv_reference.cc's direct loops and conv_gemm_f64.cc's
// im2col path): a typed 4-d view over any strides, and the convolution's sizes and parameters
// read from operands the front end has already checked. No allocation, no checks.
#pragma once

#include <array>
#include <cstdint>

#include "ferry/core/tensor.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cpu::reference {

template <typename T>
struct View4 {
  T* data;
  std::array<int64_t, 4> size, stride;
  explicit View4(const Tensor& t)
      : data(static_cast<T*>(t.data_ptr())),
        size{t.size(0), t.size(1), t.size(2), t.size(3)},
        stride{t.stride(0), t.stride(1), t.stride(2), t.stride(3)} {}
  T* at(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return data + a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
  }
  T& operator()(int64_t a, int64_t b, int64_t c, int64_t d) const { return *at(a, b, c, d); }
};

// N, C, H, W of the input, O, oH, oW of the output, kH, kW of the weight; groups with the
// channels of each (cg in, og out); stride, padding and dilation per spatial dim.
struct ConvGeometry {
  int64_t n, c, h, w, o, oh, ow, kh, kw;
  int64_t groups, cg, og;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t rows() const { return cg * kh * kw; }  // of an im2col matrix
  int64_t cols() const { return oh * ow; }
};

// `weight` may be the weight's gradient, `out` the output's: only their sizes are read.
inline ConvGeometry conv_geometry(const Tensor& input, const Tensor& weight, const Tensor& out,
                                  const Conv2dParams& p) {
  ConvGeometry g{};
  g.n = input.size(0), g.c = input.size(1), g.h = input.size(2), g.w = input.size(3);
  g.o = out.size(1), g.oh = out.size(2), g.ow = out.size(3);
  g.kh = weight.size(2), g.kw = weight.size(3);
  g.groups = p.groups, g.cg = g.c / p.groups, g.og = g.o / p.groups;
  g.sh = p.stride[0], g.sw = p.stride[1], g.ph = p.padding[0], g.pw = p.padding[1];
  g.dh = p.dilation[0], g.dw = p.dilation[1];
  return g;
}

}  // namespace ferry::cpu::reference
