// The portable pooling loops, with PyTorch's exact semantics: max pooling with argmax indices
// (the first maximum wins, a NaN wins and propagates), average pooling with ceil-mode windows
// clipped to the padded input, count_include_pad and divisor_override, and adaptive windows.
// Planes (n, c) are independent: they split over ferry's pool; backward passes accumulate a
// plane in the accumulator type (float for reduced types) before writing it once.
#include <cmath>
#include <limits>
#include <vector>

#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu::reference {
namespace {

// One (n, c) plane of a 4-d tensor over any strides.
template <typename T>
struct Planes {
  T* data = nullptr;
  int64_t c = 1, h = 0, w = 0, sn = 0, sc = 0, sh = 0, sw = 0;
  Planes() = default;
  explicit Planes(const Tensor& t)
      : data(static_cast<T*>(t.data_ptr())),
        c(t.size(1)),
        h(t.size(2)),
        w(t.size(3)),
        sn(t.stride(0)),
        sc(t.stride(1)),
        sh(t.stride(2)),
        sw(t.stride(3)) {}
  T* plane(int64_t index) const { return data + (index / c) * sn + (index % c) * sc; }
};

// The window of output position `o` along one dim: [start, end) clipped to the input, and the
// divisor PyTorch's avg_pool2d uses for it before clipping (the window clipped to the padded
// input only).
struct AvgWindow {
  int64_t start, end, padded_size;
};
AvgWindow avg_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad) {
  int64_t start = o * s - pad;
  int64_t end = std::min(start + k, in + pad);
  const int64_t padded = end - start;
  start = std::max<int64_t>(start, 0);
  end = std::min(end, in);
  return {start, end, padded};
}

int64_t adaptive_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
int64_t adaptive_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

template <typename T>
void max_forward_loop(const Tensor& out, const Tensor& indices, const Tensor& input,
                      const Pool2dParams& p) {
  using Acc = nn::acc_t<T>;
  const Planes<T> x(input), y(out);
  const bool want_idx = indices.defined();
  const Planes<int64_t> idx = want_idx ? Planes<int64_t>(indices) : Planes<int64_t>();
  const int64_t kh = p.kernel[0], kw = p.kernel[1], sh = p.stride[0], sw = p.stride[1];
  const int64_t ph = p.padding[0], pw = p.padding[1], dh = p.dilation[0], dw = p.dilation[1];
  parallel_for(0, out.size(0) * y.c, nn::grain_for(y.h * y.w * kh * kw), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x.plane(pl);
      T* yp = y.plane(pl);
      int64_t* ip = want_idx ? idx.plane(pl) : nullptr;
      for (int64_t oh = 0; oh < y.h; ++oh) {
        int64_t h0 = oh * sh - ph;
        const int64_t h1 = std::min(h0 + (kh - 1) * dh + 1, x.h);
        while (h0 < 0) h0 += dh;
        for (int64_t ow = 0; ow < y.w; ++ow) {
          int64_t w0 = ow * sw - pw;
          const int64_t w1 = std::min(w0 + (kw - 1) * dw + 1, x.w);
          while (w0 < 0) w0 += dw;
          Acc best = -std::numeric_limits<Acc>::infinity();
          int64_t best_index = h0 * x.w + w0;
          for (int64_t ih = h0; ih < h1; ih += dh) {
            for (int64_t iw = w0; iw < w1; iw += dw) {
              // As PyTorch: a NaN beats everything, and a later NaN takes its index.
              const Acc v = static_cast<Acc>(xp[ih * x.sh + iw * x.sw]);
              if (v > best || std::isnan(v)) {
                best = v;
                best_index = ih * x.w + iw;
              }
            }
          }
          yp[oh * y.sh + ow * y.sw] = static_cast<T>(best);
          if (ip) ip[oh * idx.sh + ow * idx.sw] = best_index;
        }
      }
    }
  });
}

// Calls body(plane_index, acc) for each plane with a zeroed accumulator plane of grad_input's
// size, then writes the accumulator into grad_input's plane.
template <typename T, typename Body>
void accumulate_planes(const Tensor& grad_input, int64_t work_per_plane, Body&& body) {
  using Acc = nn::acc_t<T>;
  const Planes<T> dx(grad_input);
  parallel_for(0, grad_input.size(0) * dx.c, nn::grain_for(work_per_plane),
               [&](int64_t b, int64_t e) {
                 std::vector<Acc> acc(static_cast<size_t>(dx.h * dx.w));
                 for (int64_t pl = b; pl < e; ++pl) {
                   std::fill(acc.begin(), acc.end(), Acc(0));
                   body(pl, acc.data());
                   T* dp = dx.plane(pl);
                   for (int64_t i = 0; i < dx.h; ++i) {
                     for (int64_t j = 0; j < dx.w; ++j) {
                       dp[i * dx.sh + j * dx.sw] = static_cast<T>(acc[i * dx.w + j]);
                     }
                   }
                 }
               });
}

template <typename T>
void max_backward_loop(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  using Acc = nn::acc_t<T>;
  const Planes<T> dy(grad_out);
  const Planes<int64_t> idx(indices);
  const int64_t plane_size = grad_input.size(2) * grad_input.size(3);
  accumulate_planes<T>(grad_input, dy.h * dy.w, [&](int64_t pl, Acc* acc) {
    const T* gp = dy.plane(pl);
    const int64_t* ip = idx.plane(pl);
    for (int64_t oh = 0; oh < dy.h; ++oh) {
      for (int64_t ow = 0; ow < dy.w; ++ow) {
        const int64_t i = ip[oh * idx.sh + ow * idx.sw];
        FERRY_CHECK_AS(
            IndexError, i >= 0 && i < plane_size, "max_pool2d_backward: expected indices in [0, ",
            plane_size, ") (H * W of grad_input ", nn::shape_str(grad_input), "), but got ", i,
            " at output (", oh, ", ", ow, ") of plane ", pl, "; grad_input is left partly written");
        acc[i] += static_cast<Acc>(gp[oh * dy.sh + ow * dy.sw]);
      }
    }
  });
}

template <typename T>
void avg_forward_loop(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  using Acc = nn::acc_t<T>;
  const Planes<T> x(input), y(out);
  parallel_for(
      0, out.size(0) * y.c, nn::grain_for(y.h * y.w * p.kernel[0] * p.kernel[1]),
      [&](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          const T* xp = x.plane(pl);
          T* yp = y.plane(pl);
          for (int64_t oh = 0; oh < y.h; ++oh) {
            const AvgWindow wh = avg_window(oh, x.h, p.kernel[0], p.stride[0], p.padding[0]);
            for (int64_t ow = 0; ow < y.w; ++ow) {
              const AvgWindow ww = avg_window(ow, x.w, p.kernel[1], p.stride[1], p.padding[1]);
              Acc sum = 0;
              for (int64_t ih = wh.start; ih < wh.end; ++ih) {
                for (int64_t iw = ww.start; iw < ww.end; ++iw) {
                  sum += static_cast<Acc>(xp[ih * x.sh + iw * x.sw]);
                }
              }
              const int64_t divisor = p.divisor_override ? *p.divisor_override
                                      : p.count_include_pad
                                          ? wh.padded_size * ww.padded_size
                                          : (wh.end - wh.start) * (ww.end - ww.start);
              const bool empty = wh.start >= wh.end || ww.start >= ww.end;
              yp[oh * y.sh + ow * y.sw] =
                  static_cast<T>(empty ? Acc(0) : sum / static_cast<Acc>(divisor));
            }
          }
        }
      });
}

template <typename T>
void avg_backward_loop(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p) {
  using Acc = nn::acc_t<T>;
  const Planes<T> dy(grad_out);
  const int64_t h = grad_input.size(2), w = grad_input.size(3);
  accumulate_planes<T>(
      grad_input, dy.h * dy.w * p.kernel[0] * p.kernel[1], [&](int64_t pl, Acc* acc) {
        const T* gp = dy.plane(pl);
        for (int64_t oh = 0; oh < dy.h; ++oh) {
          const AvgWindow wh = avg_window(oh, h, p.kernel[0], p.stride[0], p.padding[0]);
          for (int64_t ow = 0; ow < dy.w; ++ow) {
            const AvgWindow ww = avg_window(ow, w, p.kernel[1], p.stride[1], p.padding[1]);
            if (wh.start >= wh.end || ww.start >= ww.end) continue;
            const int64_t divisor = p.divisor_override ? *p.divisor_override
                                    : p.count_include_pad
                                        ? wh.padded_size * ww.padded_size
                                        : (wh.end - wh.start) * (ww.end - ww.start);
            const Acc share =
                static_cast<Acc>(gp[oh * dy.sh + ow * dy.sw]) / static_cast<Acc>(divisor);
            for (int64_t ih = wh.start; ih < wh.end; ++ih) {
              for (int64_t iw = ww.start; iw < ww.end; ++iw) acc[ih * w + iw] += share;
            }
          }
        }
      });
}

template <typename T>
void adaptive_forward_loop(const Tensor& out, const Tensor& input) {
  using Acc = nn::acc_t<T>;
  const Planes<T> x(input), y(out);
  parallel_for(0, out.size(0) * y.c, nn::grain_for(x.h * x.w), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x.plane(pl);
      T* yp = y.plane(pl);
      for (int64_t oh = 0; oh < y.h; ++oh) {
        const int64_t h0 = adaptive_start(oh, y.h, x.h), h1 = adaptive_end(oh, y.h, x.h);
        for (int64_t ow = 0; ow < y.w; ++ow) {
          const int64_t w0 = adaptive_start(ow, y.w, x.w), w1 = adaptive_end(ow, y.w, x.w);
          Acc sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<Acc>(xp[ih * x.sh + iw * x.sw]);
          }
          yp[oh * y.sh + ow * y.sw] = static_cast<T>(sum / static_cast<Acc>((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
}

template <typename T>
void adaptive_backward_loop(const Tensor& grad_input, const Tensor& grad_out) {
  using Acc = nn::acc_t<T>;
  const Planes<T> dy(grad_out);
  const int64_t h = grad_input.size(2), w = grad_input.size(3);
  accumulate_planes<T>(grad_input, h * w, [&](int64_t pl, Acc* acc) {
    const T* gp = dy.plane(pl);
    for (int64_t oh = 0; oh < dy.h; ++oh) {
      const int64_t h0 = adaptive_start(oh, dy.h, h), h1 = adaptive_end(oh, dy.h, h);
      for (int64_t ow = 0; ow < dy.w; ++ow) {
        const int64_t w0 = adaptive_start(ow, dy.w, w), w1 = adaptive_end(ow, dy.w, w);
        const Acc share =
            static_cast<Acc>(gp[oh * dy.sh + ow * dy.sw]) / static_cast<Acc>((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) acc[ih * w + iw] += share;
        }
      }
    }
  });
}

}  // namespace

void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& input,
                        const Pool2dParams& p) {
  nn::dispatch_floating(input.dtype(), "max_pool2d_forward",
                        [&](auto tag) { max_forward_loop<decltype(tag)>(out, indices, input, p); });
}

void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  nn::dispatch_floating(grad_out.dtype(), "max_pool2d_backward", [&](auto tag) {
    max_backward_loop<decltype(tag)>(grad_input, grad_out, indices);
  });
}

void avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  nn::dispatch_floating(input.dtype(), "avg_pool2d_forward",
                        [&](auto tag) { avg_forward_loop<decltype(tag)>(out, input, p); });
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p) {
  nn::dispatch_floating(grad_out.dtype(), "avg_pool2d_backward", [&](auto tag) {
    avg_backward_loop<decltype(tag)>(grad_input, grad_out, p);
  });
}

void adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& input) {
  nn::dispatch_floating(input.dtype(), "adaptive_avg_pool2d_forward",
                        [&](auto tag) { adaptive_forward_loop<decltype(tag)>(out, input); });
}

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  nn::dispatch_floating(grad_out.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    adaptive_backward_loop<decltype(tag)>(grad_input, grad_out);
  });
}

}  // namespace ferry::cpu::reference
