// The CUDA pooling kernels (max with argmax indices, average, adaptive average; forward and
// backward), with PyTorch's exact semantics as the CPU loops have them: the first maximum wins
// and a NaN wins (a later NaN takes the index), ceil_mode windows clipped to the padded input,
// count_include_pad, divisor_override, uneven adaptive windows. cuDNN's pooling expresses none of
// indices, ceil_mode divisors, divisor_override or uneven windows, so these are ferry's own; the
// window arithmetic is pool_index.h, shared with the host tests. Forward kernels and the average
// backward kernels gather (one thread per written element, deterministic); max backward
// scatters by index with atomics, into float32 for float16/bfloat16. Any strides, NCHW or NHWC.
// Accumulation: float for float32/float16/bfloat16, double for float64 (the CPU's).
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/device_reduce.cuh"
#include "ferry/backends/cuda/pool_index.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cuda {
namespace {

// A 4-d tensor's sizes and element strides.
struct Geom {
  int64_t n, c, h, w;
  int64_t sn, sc, sh, sw;
  FERRY_HOST_DEVICE int64_t at(int64_t in, int64_t ic, int64_t ih, int64_t iw) const {
    return in * sn + ic * sc + ih * sh + iw * sw;
  }
};

Geom geom(const Tensor& t) {
  return {t.size(0),   t.size(1),   t.size(2),   t.size(3),
          t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

struct Params {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool count_include_pad;
  int64_t divisor_override;  // 0: none
};

Params params(const Pool2dParams& p) {
  return {p.kernel[0],         p.kernel[1],
          p.stride[0],         p.stride[1],
          p.padding[0],        p.padding[1],
          p.dilation[0],       p.dilation[1],
          p.count_include_pad, p.divisor_override.value_or(0)};
}

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Splits a linear index over [n, c, h, w] (w fastest).
struct Pos {
  int64_t n, c, h, w;
};
__device__ inline Pos position(int64_t e, const Geom& g) {
  Pos p;
  p.w = e % g.w;
  e /= g.w;
  p.h = e % g.h;
  e /= g.h;
  p.c = e % g.c;
  p.n = e / g.c;
  return p;
}

#define FERRY_FOR_EACH_ELEMENT(e, total)                                                     \
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < (total); \
       e += static_cast<int64_t>(blockDim.x) * gridDim.x)

template <typename T>
__global__ void max_forward_kernel(const T* x, Geom xg, T* y, Geom yg, int64_t* idx, Geom ig,
                                   Params p) {
  using Acc = acc_t<T>;
  FERRY_FOR_EACH_ELEMENT(e, yg.n * yg.c * yg.h * yg.w) {
    const Pos o = position(e, yg);
    const pool::MaxWindow wh = pool::max_window(o.h, xg.h, p.kh, p.sh, p.ph, p.dh);
    const pool::MaxWindow ww = pool::max_window(o.w, xg.w, p.kw, p.sw, p.pw, p.dw);
    Acc best = -std::numeric_limits<Acc>::infinity();
    int64_t best_index = wh.begin * xg.w + ww.begin;
    for (int64_t ih = wh.begin; ih < wh.end; ih += p.dh) {
      for (int64_t iw = ww.begin; iw < ww.end; iw += p.dw) {
        const Acc v = static_cast<Acc>(x[xg.at(o.n, o.c, ih, iw)]);
        if (v > best || v != v) {
          best = v;
          best_index = ih * xg.w + iw;
        }
      }
    }
    y[yg.at(o.n, o.c, o.h, o.w)] = static_cast<T>(best);
    if (idx != nullptr) idx[ig.at(o.n, o.c, o.h, o.w)] = best_index;
  }
}

// acc (Acc, geometry ag) += grad_out scattered at indices.
template <typename T, typename Acc>
__global__ void max_backward_kernel(Acc* acc, Geom ag, const T* gy, Geom gg, const int64_t* idx,
                                    Geom ig) {
  FERRY_FOR_EACH_ELEMENT(e, gg.n * gg.c * gg.h * gg.w) {
    const Pos o = position(e, gg);
    const int64_t i = idx[ig.at(o.n, o.c, o.h, o.w)];
    check_index(i, ag.h * ag.w, "max_pool2d_backward");
    atomic_add(acc + ag.at(o.n, o.c, i / ag.w, i % ag.w),
               static_cast<Acc>(gy[gg.at(o.n, o.c, o.h, o.w)]));
  }
}

template <typename T>
__global__ void avg_forward_kernel(const T* x, Geom xg, T* y, Geom yg, Params p) {
  using Acc = acc_t<T>;
  FERRY_FOR_EACH_ELEMENT(e, yg.n * yg.c * yg.h * yg.w) {
    const Pos o = position(e, yg);
    const pool::AvgWindow wh = pool::avg_window(o.h, xg.h, p.kh, p.sh, p.ph);
    const pool::AvgWindow ww = pool::avg_window(o.w, xg.w, p.kw, p.sw, p.pw);
    Acc sum = 0;
    for (int64_t ih = wh.begin; ih < wh.end; ++ih) {
      for (int64_t iw = ww.begin; iw < ww.end; ++iw) {
        sum += static_cast<Acc>(x[xg.at(o.n, o.c, ih, iw)]);
      }
    }
    const bool empty = wh.begin >= wh.end || ww.begin >= ww.end;
    const int64_t divisor = pool::avg_divisor(wh, ww, p.count_include_pad, p.divisor_override);
    y[yg.at(o.n, o.c, o.h, o.w)] = static_cast<T>(empty ? Acc(0) : sum / static_cast<Acc>(divisor));
  }
}

// One thread per grad_input element: the shares of every window holding it.
template <typename T>
__global__ void avg_backward_kernel(T* gx, Geom xg, const T* gy, Geom yg, Params p) {
  using Acc = acc_t<T>;
  FERRY_FOR_EACH_ELEMENT(e, xg.n * xg.c * xg.h * xg.w) {
    const Pos i = position(e, xg);
    const pool::OutputRange rh = pool::avg_outputs_of(i.h, p.kh, p.sh, p.ph, yg.h);
    const pool::OutputRange rw = pool::avg_outputs_of(i.w, p.kw, p.sw, p.pw, yg.w);
    Acc acc = 0;
    for (int64_t oh = rh.begin; oh < rh.end; ++oh) {
      const pool::AvgWindow wh = pool::avg_window(oh, xg.h, p.kh, p.sh, p.ph);
      if (i.h < wh.begin || i.h >= wh.end) continue;
      for (int64_t ow = rw.begin; ow < rw.end; ++ow) {
        const pool::AvgWindow ww = pool::avg_window(ow, xg.w, p.kw, p.sw, p.pw);
        if (i.w < ww.begin || i.w >= ww.end) continue;
        const int64_t divisor = pool::avg_divisor(wh, ww, p.count_include_pad, p.divisor_override);
        acc += static_cast<Acc>(gy[yg.at(i.n, i.c, oh, ow)]) / static_cast<Acc>(divisor);
      }
    }
    gx[xg.at(i.n, i.c, i.h, i.w)] = static_cast<T>(acc);
  }
}

template <typename T>
__global__ void adaptive_forward_kernel(const T* x, Geom xg, T* y, Geom yg) {
  using Acc = acc_t<T>;
  FERRY_FOR_EACH_ELEMENT(e, yg.n * yg.c * yg.h * yg.w) {
    const Pos o = position(e, yg);
    const int64_t h0 = pool::adaptive_begin(o.h, yg.h, xg.h),
                  h1 = pool::adaptive_end(o.h, yg.h, xg.h);
    const int64_t w0 = pool::adaptive_begin(o.w, yg.w, xg.w),
                  w1 = pool::adaptive_end(o.w, yg.w, xg.w);
    Acc sum = 0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<Acc>(x[xg.at(o.n, o.c, ih, iw)]);
    }
    y[yg.at(o.n, o.c, o.h, o.w)] = static_cast<T>(sum / static_cast<Acc>((h1 - h0) * (w1 - w0)));
  }
}

template <typename T>
__global__ void adaptive_backward_kernel(T* gx, Geom xg, const T* gy, Geom yg) {
  using Acc = acc_t<T>;
  FERRY_FOR_EACH_ELEMENT(e, xg.n * xg.c * xg.h * xg.w) {
    const Pos i = position(e, xg);
    const pool::OutputRange rh = pool::adaptive_outputs_of(i.h, xg.h, yg.h);
    const pool::OutputRange rw = pool::adaptive_outputs_of(i.w, xg.w, yg.w);
    Acc acc = 0;
    for (int64_t oh = rh.begin; oh < pool::min64(rh.end, yg.h); ++oh) {
      const int64_t h0 = pool::adaptive_begin(oh, yg.h, xg.h),
                    h1 = pool::adaptive_end(oh, yg.h, xg.h);
      if (i.h < h0 || i.h >= h1) continue;
      for (int64_t ow = rw.begin; ow < pool::min64(rw.end, yg.w); ++ow) {
        const int64_t w0 = pool::adaptive_begin(ow, yg.w, xg.w);
        const int64_t w1 = pool::adaptive_end(ow, yg.w, xg.w);
        if (i.w < w0 || i.w >= w1) continue;
        acc +=
            static_cast<Acc>(gy[yg.at(i.n, i.c, oh, ow)]) / static_cast<Acc>((h1 - h0) * (w1 - w0));
      }
    }
    gx[xg.at(i.n, i.c, i.h, i.w)] = static_cast<T>(acc);
  }
}

#undef FERRY_FOR_EACH_ELEMENT

// ---- host side -------------------------------------------------------------------------------

// [C, H, W] as [1, C, H, W]; 4-d as it is.
Tensor as_4d(const Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }

template <typename Fn>
void visit_float(ScalarType t, Fn&& fn) {
  switch (t) {
    case kFloat64:
      return fn(double{});
    case kFloat32:
      return fn(float{});
    case kBFloat16:
      return fn(BFloat16{});
    default:
      return fn(Half{});
  }
}

// Prints as "[a, b]" (streamed: GCC 12's -Wrestrict misfires on std::string concatenation in
// nvcc's host pass, GCC bug 105651).
struct Pair {
  const std::array<int64_t, 2>& v;
  friend std::ostream& operator<<(std::ostream& out, const Pair& p) {
    return out << '[' << p.v[0] << ", " << p.v[1] << ']';
  }
};
Pair pair_str(const std::array<int64_t, 2>& v) { return Pair{v}; }

void check_params(const char* op, const Pool2dParams& p, bool is_max) {
  for (int i = 0; i < 2; ++i) {
    FERRY_CHECK_AS(
        ShapeError, p.kernel[i] >= 1 && p.stride[i] >= 1 && p.padding[i] >= 0 && p.dilation[i] >= 1,
        op, ": expected kernel >= 1, stride >= 1, padding >= 0 and dilation >= 1, but got kernel ",
        pair_str(p.kernel), ", stride ", pair_str(p.stride), ", padding ", pair_str(p.padding),
        ", dilation ", pair_str(p.dilation));
    const int64_t span = is_max ? (p.kernel[i] - 1) * p.dilation[i] + 1 : p.kernel[i];
    FERRY_CHECK_AS(ShapeError, 2 * p.padding[i] <= span, op,
                   ": expected padding at most half the (dilated) kernel, but got padding ",
                   pair_str(p.padding), " for kernel ", pair_str(p.kernel));
  }
  FERRY_CHECK_AS(ShapeError, !p.divisor_override || *p.divisor_override != 0, op,
                 ": expected a non-zero divisor_override");
}

// Checks the input (rank 3 or 4) and its float dtype, and that `out` has the pooled shape and
// the input's dtype.
void check_pooled(const char* op, const Tensor& input, const char* input_name, const Tensor& out,
                  const char* out_name, const Pool2dParams& p, bool is_max) {
  FERRY_CHECK_AS(ShapeError, input.dim() == 3 || input.dim() == 4, op, ": expected ", input_name,
                 " of rank 3 ([C, H, W]) or 4 ([N, C, H, W]), but got ", shape_str(input));
  check_nn_float(input, op, input_name);
  const int64_t h = input.size(-2), w = input.size(-1);
  const int64_t oh = pool::output_size(h, p.kernel[0], p.stride[0], p.padding[0],
                                       is_max ? p.dilation[0] : 1, p.ceil_mode);
  const int64_t ow = pool::output_size(w, p.kernel[1], p.stride[1], p.padding[1],
                                       is_max ? p.dilation[1] : 1, p.ceil_mode);
  FERRY_CHECK_AS(ShapeError, oh >= 1 && ow >= 1, op, ": ", input_name, " ", shape_str(input),
                 " is too small for kernel ", pair_str(p.kernel), " (output size ", oh, " x ", ow,
                 ")");
  DimVector expected(input.sizes());
  expected[expected.size() - 2] = oh;
  expected[expected.size() - 1] = ow;
  check_shape(out, expected, op, out_name);
  check_dtype(out, input.dtype(), op, out_name);
}

// grad_input (rank 3 or 4) and grad_out share their leading dims and dtype.
void check_backward(const char* op, const Tensor& grad_input, const Tensor& grad_out) {
  FERRY_CHECK_AS(ShapeError, grad_input.dim() == 3 || grad_input.dim() == 4, op,
                 ": expected grad_input of rank 3 or 4, but got ", shape_str(grad_input));
  FERRY_CHECK_AS(ShapeError,
                 grad_out.dim() == grad_input.dim() &&
                     grad_out.sizes()
                         .slice(0, grad_out.sizes().size() - 2)
                         .equals(grad_input.sizes().slice(0, grad_input.sizes().size() - 2)),
                 op, ": expected grad_out to share grad_input's leading dims (",
                 shape_str(grad_input), "), but got ", shape_str(grad_out));
  check_nn_float(grad_out, op, "grad_out");
  check_dtype(grad_input, grad_out.dtype(), op, "grad_input (grad_out's dtype)");
  check_output(grad_input, op, "grad_input");
}

void cuda_max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& input,
                             const Pool2dParams& p) {
  constexpr const char* kOp = "max_pool2d_forward";
  const int device =
      operands_device(kOp, {{&out, "out"}, {&indices, "indices"}, {&input, "input"}});
  check_params(kOp, p, true);
  check_pooled(kOp, input, "input", out, "out", p, true);
  check_output(out, kOp, "out");
  if (indices.defined()) {
    check_shape(indices, out.sizes(), kOp, "indices (out's shape)");
    check_dtype(indices, kInt64, kOp, "indices");
    check_output(indices, kOp, "indices");
  }
  if (out.numel() == 0) return;
  BelowAutograd below;
  const Tensor x = as_4d(input.is_neg() ? input.resolve_neg() : input), y = as_4d(out);
  const Tensor idx = indices.defined() ? as_4d(indices) : Tensor();
  const LaunchScope scope(device);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_forward_kernel<T><<<blocks_for(y.numel()), kThreads, 0, scope.stream()>>>(
        static_cast<const T*>(x.const_data_ptr()), geom(x), static_cast<T*>(y.data_ptr()), geom(y),
        idx.defined() ? static_cast<int64_t*>(idx.data_ptr()) : nullptr,
        idx.defined() ? geom(idx) : geom(y), params(p));
    check_launch(scope.device(), "max_pool2d kernel");
  });
}

void cuda_max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out,
                              const Tensor& indices) {
  constexpr const char* kOp = "max_pool2d_backward";
  const int device = operands_device(
      kOp, {{&grad_input, "grad_input"}, {&grad_out, "grad_out"}, {&indices, "indices"}});
  check_backward(kOp, grad_input, grad_out);
  check_shape(indices, grad_out.sizes(), kOp, "indices (grad_out's shape)");
  check_dtype(indices, kInt64, kOp, "indices");
  if (grad_input.numel() == 0) return;
  BelowAutograd below;
  const Tensor gx = as_4d(grad_input);
  const Tensor gy = as_4d(grad_out.is_neg() ? grad_out.resolve_neg() : grad_out);
  const Tensor idx = as_4d(indices);
  const LaunchScope scope(device);
  // Float and double accumulate in place; float16/bfloat16 in a float32 temporary.
  const bool in_place = gx.dtype() == kFloat32 || gx.dtype() == kFloat64;
  const Tensor acc = in_place ? gx : device_empty(gx.sizes(), kFloat32, device);
  Tensor(acc).zero_();
  if (gy.numel() > 0) {
    visit_float(gx.dtype(), [&](auto tag) {
      using T = decltype(tag);
      using Acc = acc_t<T>;
      max_backward_kernel<T, Acc><<<blocks_for(gy.numel()), kThreads, 0, scope.stream()>>>(
          static_cast<Acc*>(acc.data_ptr()), geom(acc), static_cast<const T*>(gy.const_data_ptr()),
          geom(gy), static_cast<const int64_t*>(idx.const_data_ptr()), geom(idx));
      check_launch(scope.device(), "max_pool2d_backward kernel");
    });
  }
  if (!in_place) Tensor(gx).copy_(acc);
}

void cuda_avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  constexpr const char* kOp = "avg_pool2d_forward";
  const int device = operands_device(kOp, {{&out, "out"}, {&input, "input"}});
  check_params(kOp, p, false);
  check_pooled(kOp, input, "input", out, "out", p, false);
  check_output(out, kOp, "out");
  if (out.numel() == 0) return;
  BelowAutograd below;
  const Tensor x = as_4d(input.is_neg() ? input.resolve_neg() : input), y = as_4d(out);
  const LaunchScope scope(device);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_forward_kernel<T><<<blocks_for(y.numel()), kThreads, 0, scope.stream()>>>(
        static_cast<const T*>(x.const_data_ptr()), geom(x), static_cast<T*>(y.data_ptr()), geom(y),
        params(p));
    check_launch(scope.device(), "avg_pool2d kernel");
  });
}

void cuda_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out,
                              const Pool2dParams& p) {
  constexpr const char* kOp = "avg_pool2d_backward";
  const int device = operands_device(kOp, {{&grad_input, "grad_input"}, {&grad_out, "grad_out"}});
  check_params(kOp, p, false);
  check_backward(kOp, grad_input, grad_out);
  check_pooled(kOp, grad_input, "grad_input", grad_out, "grad_out", p, false);
  if (grad_input.numel() == 0) return;
  BelowAutograd below;
  const Tensor gx = as_4d(grad_input);
  const Tensor gy = as_4d(grad_out.is_neg() ? grad_out.resolve_neg() : grad_out);
  const LaunchScope scope(device);
  visit_float(gx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_backward_kernel<T><<<blocks_for(gx.numel()), kThreads, 0, scope.stream()>>>(
        static_cast<T*>(gx.data_ptr()), geom(gx), static_cast<const T*>(gy.const_data_ptr()),
        geom(gy), params(p));
    check_launch(scope.device(), "avg_pool2d_backward kernel");
  });
}

// input [.., H, W] and out [.., oH, oW] share their leading dims and dtype.
void check_adaptive(const char* op, const Tensor& input, const char* input_name, const Tensor& out,
                    const char* out_name) {
  FERRY_CHECK_AS(ShapeError, input.dim() == 3 || input.dim() == 4, op, ": expected ", input_name,
                 " of rank 3 ([C, H, W]) or 4 ([N, C, H, W]), but got ", shape_str(input));
  FERRY_CHECK_AS(
      ShapeError,
      out.dim() == input.dim() && out.sizes()
                                      .slice(0, out.sizes().size() - 2)
                                      .equals(input.sizes().slice(0, input.sizes().size() - 2)),
      op, ": expected ", out_name, " to share ", input_name, "'s leading dims (", shape_str(input),
      "), but got ", shape_str(out));
  FERRY_CHECK_AS(ShapeError, out.size(-2) >= 1 && out.size(-1) >= 1, op, ": expected ", out_name,
                 " of at least 1 x 1 spatial positions, but got ", shape_str(out));
  check_nn_float(input, op, input_name);
  check_dtype(out, input.dtype(), op, out_name);
}

void cuda_adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& input) {
  constexpr const char* kOp = "adaptive_avg_pool2d_forward";
  const int device = operands_device(kOp, {{&out, "out"}, {&input, "input"}});
  check_adaptive(kOp, input, "input", out, "out");
  check_output(out, kOp, "out");
  if (out.numel() == 0) return;
  FERRY_CHECK_AS(ShapeError, input.size(-2) >= 1 && input.size(-1) >= 1, kOp,
                 ": expected a non-empty input plane, but got ", shape_str(input));
  BelowAutograd below;
  const Tensor x = as_4d(input.is_neg() ? input.resolve_neg() : input), y = as_4d(out);
  const LaunchScope scope(device);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adaptive_forward_kernel<T><<<blocks_for(y.numel()), kThreads, 0, scope.stream()>>>(
        static_cast<const T*>(x.const_data_ptr()), geom(x), static_cast<T*>(y.data_ptr()), geom(y));
    check_launch(scope.device(), "adaptive_avg_pool2d kernel");
  });
}

void cuda_adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  constexpr const char* kOp = "adaptive_avg_pool2d_backward";
  const int device = operands_device(kOp, {{&grad_input, "grad_input"}, {&grad_out, "grad_out"}});
  check_adaptive(kOp, grad_input, "grad_input", grad_out, "grad_out");
  check_output(grad_input, kOp, "grad_input");
  if (grad_input.numel() == 0) return;
  BelowAutograd below;
  const Tensor gx = as_4d(grad_input);
  const Tensor gy = as_4d(grad_out.is_neg() ? grad_out.resolve_neg() : grad_out);
  const LaunchScope scope(device);
  visit_float(gx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adaptive_backward_kernel<T><<<blocks_for(gx.numel()), kThreads, 0, scope.stream()>>>(
        static_cast<T*>(gx.data_ptr()), geom(gx), static_cast<const T*>(gy.const_data_ptr()),
        geom(gy));
    check_launch(scope.device(), "adaptive_avg_pool2d_backward kernel");
  });
}

}  // namespace

FERRY_REGISTER_DISPATCH(max_pool2d_forward_stub, DeviceType::CUDA, &cuda_max_pool2d_forward);
FERRY_REGISTER_DISPATCH(max_pool2d_backward_stub, DeviceType::CUDA, &cuda_max_pool2d_backward);
FERRY_REGISTER_DISPATCH(avg_pool2d_forward_stub, DeviceType::CUDA, &cuda_avg_pool2d_forward);
FERRY_REGISTER_DISPATCH(avg_pool2d_backward_stub, DeviceType::CUDA, &cuda_avg_pool2d_backward);
FERRY_REGISTER_DISPATCH(adaptive_avg_pool2d_forward_stub, DeviceType::CUDA,
                        &cuda_adaptive_avg_pool2d_forward);
FERRY_REGISTER_DISPATCH(adaptive_avg_pool2d_backward_stub, DeviceType::CUDA,
                        &cuda_adaptive_avg_pool2d_backward);

}  // namespace ferry::cuda
