// The portable 2-d convolution: direct loops over any strides. They run the degenerate shapes (no
// channels, an empty batch) of every float dtype, and are the tests' reference for the float64
// path (conv_gemm_f64.cc). Each output element is written by exactly one iteration (gathers, no
// scatters), so the outer loops split freely.
#include "ferry/backends/cpu/dnnl/conv_geometry.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu::reference {
namespace {

template <typename T>
void forward_loop(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Conv2dParams& p) {
  using Acc = nn::acc_t<T>;
  const View4<T> y(out), x(input), w(weight);
  const ConvGeometry g = conv_geometry(input, weight, out, p);
  const int64_t kh = w.size[2], kw = w.size[3], h = x.size[2], wd = x.size[3];
  const T* b = bias.defined() ? static_cast<const T*>(bias.const_data_ptr()) : nullptr;
  const int64_t b_stride = bias.defined() ? bias.stride(0) : 0;
  const int64_t planes = y.size[0] * y.size[1];
  parallel_for(0, planes, nn::grain_for(y.size[2] * y.size[3] * g.cg * kh * kw),
               [&](int64_t begin, int64_t end) {
                 for (int64_t plane = begin; plane < end; ++plane) {
                   const int64_t n = plane / y.size[1], o = plane % y.size[1];
                   const int64_t c0 = (o / g.og) * g.cg;
                   for (int64_t oh = 0; oh < y.size[2]; ++oh) {
                     for (int64_t ow = 0; ow < y.size[3]; ++ow) {
                       Acc sum = b ? static_cast<Acc>(b[o * b_stride]) : Acc(0);
                       for (int64_t ci = 0; ci < g.cg; ++ci) {
                         for (int64_t i = 0; i < kh; ++i) {
                           const int64_t ih = oh * g.sh - g.ph + i * g.dh;
                           if (ih < 0 || ih >= h) continue;
                           for (int64_t j = 0; j < kw; ++j) {
                             const int64_t iw = ow * g.sw - g.pw + j * g.dw;
                             if (iw < 0 || iw >= wd) continue;
                             sum += static_cast<Acc>(x(n, c0 + ci, ih, iw)) *
                                    static_cast<Acc>(w(o, ci, i, j));
                           }
                         }
                       }
                       y(n, o, oh, ow) = static_cast<T>(sum);
                     }
                   }
                 }
               });
}

template <typename T>
void backward_input_loop(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                         const Conv2dParams& p) {
  using Acc = nn::acc_t<T>;
  const View4<T> dx(grad_input), dy(grad_out), w(weight);
  const ConvGeometry g = conv_geometry(grad_input, weight, grad_out, p);
  const int64_t kh = w.size[2], kw = w.size[3], oh_n = dy.size[2], ow_n = dy.size[3];
  const int64_t planes = dx.size[0] * dx.size[1];
  parallel_for(0, planes, nn::grain_for(dx.size[2] * dx.size[3] * g.og * kh * kw),
               [&](int64_t begin, int64_t end) {
                 for (int64_t plane = begin; plane < end; ++plane) {
                   const int64_t n = plane / dx.size[1], c = plane % dx.size[1];
                   const int64_t group = c / g.cg, ci = c % g.cg;
                   for (int64_t h = 0; h < dx.size[2]; ++h) {
                     for (int64_t wi = 0; wi < dx.size[3]; ++wi) {
                       Acc sum = 0;
                       for (int64_t ol = 0; ol < g.og; ++ol) {
                         const int64_t o = group * g.og + ol;
                         for (int64_t i = 0; i < kh; ++i) {
                           const int64_t th = h + g.ph - i * g.dh;
                           if (th < 0 || th % g.sh != 0 || th / g.sh >= oh_n) continue;
                           for (int64_t j = 0; j < kw; ++j) {
                             const int64_t tw = wi + g.pw - j * g.dw;
                             if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= ow_n) continue;
                             sum += static_cast<Acc>(dy(n, o, th / g.sh, tw / g.sw)) *
                                    static_cast<Acc>(w(o, ci, i, j));
                           }
                         }
                       }
                       dx(n, c, h, wi) = static_cast<T>(sum);
                     }
                   }
                 }
               });
}

template <typename T>
void backward_weight_loop(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& input,
                          const Tensor& grad_out, const Conv2dParams& p) {
  using Acc = nn::acc_t<T>;
  const View4<T> x(input), dy(grad_out);
  const int64_t o_n = dy.size[1];
  const ConvGeometry g = conv_geometry(input, grad_weight, grad_out, p);
  const int64_t kh = grad_weight.size(2), kw = grad_weight.size(3);
  const int64_t h = x.size[2], wd = x.size[3];
  T* db = grad_bias.defined() ? static_cast<T*>(grad_bias.data_ptr()) : nullptr;
  const int64_t db_stride = grad_bias.defined() ? grad_bias.stride(0) : 0;
  parallel_for(0, o_n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const int64_t c0 = (o / g.og) * g.cg;
      if (grad_weight.numel() > 0) {
        const View4<T> dw(grad_weight);
        for (int64_t ci = 0; ci < g.cg; ++ci) {
          for (int64_t i = 0; i < kh; ++i) {
            for (int64_t j = 0; j < kw; ++j) {
              Acc sum = 0;
              for (int64_t n = 0; n < dy.size[0]; ++n) {
                for (int64_t oh = 0; oh < dy.size[2]; ++oh) {
                  const int64_t ih = oh * g.sh - g.ph + i * g.dh;
                  if (ih < 0 || ih >= h) continue;
                  for (int64_t ow = 0; ow < dy.size[3]; ++ow) {
                    const int64_t iw = ow * g.sw - g.pw + j * g.dw;
                    if (iw < 0 || iw >= wd) continue;
                    sum += static_cast<Acc>(dy(n, o, oh, ow)) *
                           static_cast<Acc>(x(n, c0 + ci, ih, iw));
                  }
                }
              }
              dw(o, ci, i, j) = static_cast<T>(sum);
            }
          }
        }
      }
      if (db) {
        Acc sum = 0;
        for (int64_t n = 0; n < dy.size[0]; ++n) {
          for (int64_t oh = 0; oh < dy.size[2]; ++oh) {
            for (int64_t ow = 0; ow < dy.size[3]; ++ow) sum += static_cast<Acc>(dy(n, o, oh, ow));
          }
        }
        db[o * db_stride] = static_cast<T>(sum);
      }
    }
  });
}

}  // namespace

void conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, const Conv2dParams& p) {
  nn::dispatch_floating(out.dtype(), "conv2d_forward", [&](auto tag) {
    forward_loop<decltype(tag)>(out, input, weight, bias, p);
  });
}

void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p) {
  nn::dispatch_floating(grad_input.dtype(), "conv2d_backward_input", [&](auto tag) {
    backward_input_loop<decltype(tag)>(grad_input, grad_out, weight, p);
  });
}

void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& input,
                            const Tensor& grad_out, const Conv2dParams& p) {
  nn::dispatch_floating(grad_out.dtype(), "conv2d_backward_weight", [&](auto tag) {
    backward_weight_loop<decltype(tag)>(grad_weight, grad_bias, input, grad_out, p);
  });
}

}  // namespace ferry::cpu::reference
