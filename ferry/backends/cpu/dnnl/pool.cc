// cpu:: max/avg/adaptive-avg pool2d forward and backward. oneDNN's pooling_v2 (float32,
// bfloat16; float16 where the CPU has it, else float32 temporaries) runs what it expresses
// exactly: max pooling without indices, average pooling whose divisor oneDNN computes as PyTorch
// does, adaptive pooling with even windows. The portable loops (pool_reference.cc) run the rest
// with PyTorch's semantics: argmax indices, max backward (a scatter by indices), ceil-mode
// divisors with count_include_pad, divisor_override, uneven adaptive windows, and float64.
#include <string>

#include "ferry/backends/cpu/dnnl/dnnl_runtime.h"
#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"

namespace ferry::cpu {
namespace {

using Status = onednn::CachedPrimitive::Status;

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// [C, H, W] as [1, C, H, W]; 4-d as it is.
Tensor as_4d(const Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }

void check_pool_params(const char* op, const Pool2dParams& p, bool is_max) {
  for (int i = 0; i < 2; ++i) {
    FERRY_CHECK_AS(
        ShapeError, p.kernel[i] >= 1 && p.stride[i] >= 1 && p.padding[i] >= 0 && p.dilation[i] >= 1,
        op, ": expected kernel >= 1, stride >= 1, padding >= 0 and dilation >= 1, but got ",
        "kernel ", nn::shape_str(p.kernel), ", stride ", nn::shape_str(p.stride), ", padding ",
        nn::shape_str(p.padding), ", dilation ", nn::shape_str(p.dilation));
    const int64_t span = is_max ? (p.kernel[i] - 1) * p.dilation[i] + 1 : p.kernel[i];
    FERRY_CHECK_AS(ShapeError, 2 * p.padding[i] <= span, op,
                   ": expected padding at most half the (dilated) kernel, but got padding ",
                   nn::shape_str(p.padding), " for kernel ", nn::shape_str(p.kernel));
  }
  if (p.divisor_override) {
    FERRY_CHECK_AS(ShapeError, *p.divisor_override != 0, op,
                   ": expected a non-zero divisor_override");
  }
}

// The input of rank 3 or 4 and the output size; checks `out` (rank and shape) against them.
struct PoolShape {
  int64_t n, c, h, w, oh, ow;
};
PoolShape check_pool_io(const char* op, const Tensor& input, const char* input_name,
                        const Tensor& out, const char* out_name, const Pool2dParams& p,
                        bool is_max) {
  FERRY_CHECK_AS(ShapeError, input.dim() == 3 || input.dim() == 4, op, ": expected ", input_name,
                 " of rank 3 ([C, H, W]) or 4 ([N, C, H, W]), but got ", nn::shape_str(input));
  const Tensor x = as_4d(input);
  const int64_t dh = is_max ? p.dilation[0] : 1, dw = is_max ? p.dilation[1] : 1;
  PoolShape s{x.size(0),
              x.size(1),
              x.size(2),
              x.size(3),
              pool_output_size(x.size(2), p.kernel[0], p.stride[0], p.padding[0], dh, p.ceil_mode),
              pool_output_size(x.size(3), p.kernel[1], p.stride[1], p.padding[1], dw, p.ceil_mode)};
  FERRY_CHECK_AS(ShapeError, s.oh >= 1 && s.ow >= 1, op, ": ", input_name, " ",
                 nn::shape_str(input), " is too small for kernel ", nn::shape_str(p.kernel),
                 " (output size ", s.oh, " x ", s.ow, ")");
  DimVector expected(input.sizes());
  expected[expected.size() - 2] = s.oh;
  expected[expected.size() - 1] = s.ow;
  nn::check_shape(out, expected, op, out_name, input.dim() == 3 ? "[C, oH, oW]" : "[N, C, oH, oW]");
  return s;
}

void check_float_dtypes(const char* op, const Tensor& ref, const char* ref_name,
                        const Tensor& other, const char* other_name) {
  FERRY_CHECK_AS(
      DTypeError,
      ref.is_floating_point() && ref.dtype() != kFloat8_e4m3fn && ref.dtype() != kFloat8_e5m2, op,
      ": expected ", ref_name, " of a float dtype (float32, bfloat16, float16, ",
      "float64), but got ", ref.dtype());
  nn::check_dtype(other, ref.dtype(), op, other_name);
}

// ---- oneDNN pooling -------------------------------------------------------------------------

struct OnednnPool {
  dnnl::algorithm algorithm;
  std::array<int64_t, 2> kernel, stride, dilation, pad_l, pad_r;
};

// The right padding oneDNN needs for `out` outputs (PyTorch's ceil mode may reach past the
// symmetric padding); never negative.
int64_t right_padding(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad_l) {
  return std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in - pad_l);
}

Tensor pool_activation_in(const Tensor& t) {
  const MemoryFormat f = nn::layout_of(t);
  return nn::is_dense_in(t, f) ? t : nn::dense_copy(t, t.dtype(), f);
}
nn::OutputStage pool_activation_out(const Tensor& t, ScalarType dtype) {
  const MemoryFormat f = nn::layout_of(t);
  return nn::OutputStage(t, dtype == t.dtype() && nn::is_dense_in(t, f), dtype, f, false);
}

std::string describe(const Tensor& src, const Tensor& dst, const OnednnPool& c) {
  return "src " + nn::shape_str(src) + " strides " + nn::shape_str(src.strides()) + ", dst " +
         nn::shape_str(dst) + " strides " + nn::shape_str(dst.strides()) + ", kernel " +
         nn::shape_str(c.kernel) + ", stride " + nn::shape_str(c.stride) + ", padding " +
         nn::shape_str(c.pad_l) + " / " + nn::shape_str(c.pad_r) + ", dtype " +
         std::string(scalar_type_name(src.dtype()));
}

// Forward (src -> dst) or backward (diff_dst -> diff_src) pooling on 4-d tensors of one dtype.
// `big` is the input-sized tensor (src or diff_src), `small` the output-sized one. Returns false
// when oneDNN has no kernel for the dtype.
bool pool_onednn(bool backward, const Tensor& big, const Tensor& small, const OnednnPool& c) {
  const char* name = backward ? "pooling_v2_backward" : "pooling_v2_forward";
  const Tensor in = backward ? pool_activation_in(small) : pool_activation_in(big);
  nn::OutputStage out = pool_activation_out(backward ? big : small, big.dtype());
  const Tensor& big_used = backward ? out.get() : in;
  const Tensor& small_used = backward ? in : out.get();
  const auto big_md = onednn::desc_of(big_used, name), small_md = onednn::desc_of(small_used, name);
  const dnnl::memory::dims kernel = onednn::dims_of(c.kernel), stride = onednn::dims_of(c.stride);
  const dnnl::memory::dims dil{c.dilation[0] - 1, c.dilation[1] - 1};
  const dnnl::memory::dims pad_l = onednn::dims_of(c.pad_l), pad_r = onednn::dims_of(c.pad_r);

  onednn::TeamScope team;
  onednn::CacheKey key(backward ? onednn::kPoolBackward : onednn::kPoolForward);
  key.add(static_cast<int64_t>(c.algorithm)).add(big_used).add(small_used);
  key.add(c.kernel).add(c.stride).add(c.dilation).add(c.pad_l).add(c.pad_r);
  auto entry = onednn::find_or_build(key, team, [&] {
    auto e = std::make_shared<onednn::CachedPrimitive>();
    try {
      const dnnl::pooling_v2_forward::desc fwd(
          backward ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
          c.algorithm, big_md, small_md, stride, kernel, dil, pad_l, pad_r);
      const dnnl::pooling_v2_forward::primitive_desc fwd_pd(fwd, onednn::default_attr(),
                                                            onednn::engine());
      if (backward) {
        const dnnl::pooling_v2_backward::desc bwd(c.algorithm, big_md, small_md, stride, kernel,
                                                  dil, pad_l, pad_r);
        const dnnl::pooling_v2_backward::primitive_desc pd(bwd, onednn::default_attr(),
                                                           onednn::engine(), fwd_pd);
        e->primitive = dnnl::pooling_v2_backward(pd);
        e->scratchpad_bytes = pd.scratchpad_desc().get_size();
        e->impl = pd.impl_info_str();
      } else {
        e->primitive = dnnl::pooling_v2_forward(fwd_pd);
        e->scratchpad_bytes = fwd_pd.scratchpad_desc().get_size();
        e->impl = fwd_pd.impl_info_str();
      }
    } catch (const dnnl::error& err) {
      if (err.status == dnnl_unimplemented && big.dtype() == kFloat16) {
        e->status = Status::kDtypeUnsupported;
        return e;
      }
      onednn::rethrow(err, name, describe(big, small, c));
    }
    return e;
  });
  if (entry->status == Status::kDtypeUnsupported) return false;
  std::unordered_map<int, dnnl::memory> args;
  if (backward) {
    args = {{DNNL_ARG_DIFF_DST, onednn::memory_of(small_md, in)},
            {DNNL_ARG_DIFF_SRC, onednn::memory_of(big_md, out.get())}};
  } else {
    args = {{DNNL_ARG_SRC, onednn::memory_of(big_md, in)},
            {DNNL_ARG_DST, onednn::memory_of(small_md, out.get())}};
  }
  try {
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, name, describe(big, small, c));
  }
  out.finish();
  return true;
}

// pool_onednn, through float32 temporaries when oneDNN has no float16 kernel here.
void pool_onednn_or_f32(bool backward, const Tensor& big, const Tensor& small,
                        const OnednnPool& c) {
  if (pool_onednn(backward, big, small, c)) return;
  const Tensor& in = backward ? small : big;
  const Tensor in32 = nn::dense_copy(in, kFloat32, nn::layout_of(in));
  nn::OutputStage out32 = pool_activation_out(backward ? big : small, kFloat32);
  pool_onednn(backward, backward ? out32.get() : in32, backward ? in32 : out32.get(), c);
  out32.finish();
}

OnednnPool onednn_pool(dnnl::algorithm algorithm, const Pool2dParams& p, const PoolShape& s,
                       bool dilated) {
  OnednnPool c{algorithm, p.kernel, p.stride, {1, 1}, p.padding, {0, 0}};
  if (dilated) c.dilation = p.dilation;
  c.pad_r = {right_padding(s.h, s.oh, p.kernel[0], p.stride[0], c.dilation[0], p.padding[0]),
             right_padding(s.w, s.ow, p.kernel[1], p.stride[1], c.dilation[1], p.padding[1])};
  return c;
}

// Average pooling that oneDNN computes exactly as PyTorch: no divisor_override, and with
// count_include_pad no window reaching past the symmetric padding (oneDNN would count the
// ceil-mode overhang in the divisor, PyTorch does not).
bool avg_on_onednn(const Pool2dParams& p, const OnednnPool& c) {
  if (p.divisor_override) return false;
  return !p.count_include_pad || (c.pad_r[0] <= p.padding[0] && c.pad_r[1] <= p.padding[1]);
}

bool reference_only(ScalarType dtype) { return dtype == kFloat64; }

}  // namespace

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceil_mode) {
  FERRY_CHECK_AS(ShapeError, kernel >= 1 && stride >= 1 && pad >= 0 && dilation >= 1,
                 "pool_output_size: expected kernel >= 1, stride >= 1, pad >= 0 and dilation >= "
                 "1, but got kernel ",
                 kernel, ", stride ", stride, ", pad ", pad, ", dilation ", dilation);
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = floor_div(span, stride) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& input,
                        const Pool2dParams& p) {
  constexpr const char* kOp = "max_pool2d_forward";
  nn::check_operand(input, kOp, "input");
  nn::check_output(out, kOp, "out");
  check_pool_params(kOp, p, true);
  const PoolShape s = check_pool_io(kOp, input, "input", out, "out", p, true);
  check_float_dtypes(kOp, input, "input", out, "out (input's dtype)");
  if (indices.defined()) {
    nn::check_output(indices, kOp, "indices");
    nn::check_shape(indices, out.sizes(), kOp, "indices (out's shape)");
    nn::check_dtype(indices, kInt64, kOp, "indices");
  }
  if (out.numel() == 0) return;
  // oneDNN's workspace is not PyTorch's index: with indices wanted, the loops compute both.
  if (indices.defined() || reference_only(input.dtype())) {
    return reference::max_pool2d_forward(as_4d(out), indices.defined() ? as_4d(indices) : indices,
                                         as_4d(input), p);
  }
  pool_onednn_or_f32(false, as_4d(input), as_4d(out),
                     onednn_pool(dnnl::algorithm::pooling_max, p, s, true));
}

void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  constexpr const char* kOp = "max_pool2d_backward";
  nn::check_output(grad_input, kOp, "grad_input");
  nn::check_operand(grad_out, kOp, "grad_out");
  nn::check_operand(indices, kOp, "indices");
  FERRY_CHECK_AS(ShapeError, grad_input.dim() == 3 || grad_input.dim() == 4, kOp,
                 ": expected grad_input of rank 3 or 4, but got ", nn::shape_str(grad_input));
  FERRY_CHECK_AS(ShapeError,
                 grad_out.dim() == grad_input.dim() &&
                     std::equal(grad_out.sizes().begin(), grad_out.sizes().end() - 2,
                                grad_input.sizes().begin()),
                 kOp, ": expected grad_out to share grad_input's leading dims (",
                 nn::shape_str(grad_input), "), but got ", nn::shape_str(grad_out));
  nn::check_shape(indices, grad_out.sizes(), kOp, "indices (grad_out's shape)");
  nn::check_dtype(indices, kInt64, kOp, "indices");
  check_float_dtypes(kOp, grad_out, "grad_out", grad_input, "grad_input (grad_out's dtype)");
  if (grad_input.numel() == 0) return;
  reference::max_pool2d_backward(as_4d(grad_input), as_4d(grad_out), as_4d(indices));
}

void avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  constexpr const char* kOp = "avg_pool2d_forward";
  nn::check_operand(input, kOp, "input");
  nn::check_output(out, kOp, "out");
  check_pool_params(kOp, p, false);
  const PoolShape s = check_pool_io(kOp, input, "input", out, "out", p, false);
  check_float_dtypes(kOp, input, "input", out, "out (input's dtype)");
  if (out.numel() == 0) return;
  const OnednnPool c =
      onednn_pool(p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                      : dnnl::algorithm::pooling_avg_exclude_padding,
                  p, s, false);
  if (reference_only(input.dtype()) || !avg_on_onednn(p, c)) {
    return reference::avg_pool2d_forward(as_4d(out), as_4d(input), p);
  }
  pool_onednn_or_f32(false, as_4d(input), as_4d(out), c);
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p) {
  constexpr const char* kOp = "avg_pool2d_backward";
  nn::check_output(grad_input, kOp, "grad_input");
  nn::check_operand(grad_out, kOp, "grad_out");
  check_pool_params(kOp, p, false);
  const PoolShape s = check_pool_io(kOp, grad_input, "grad_input", grad_out, "grad_out", p, false);
  check_float_dtypes(kOp, grad_out, "grad_out", grad_input, "grad_input (grad_out's dtype)");
  if (grad_input.numel() == 0) return;
  const OnednnPool c =
      onednn_pool(p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                      : dnnl::algorithm::pooling_avg_exclude_padding,
                  p, s, false);
  if (reference_only(grad_out.dtype()) || !avg_on_onednn(p, c) || grad_out.numel() == 0) {
    return reference::avg_pool2d_backward(as_4d(grad_input), as_4d(grad_out), p);
  }
  pool_onednn_or_f32(true, as_4d(grad_input), as_4d(grad_out), c);
}

namespace {

// Adaptive windows are even (an ordinary pooling) when the output size divides the input's.
std::optional<Pool2dParams> even_adaptive(int64_t h, int64_t w, int64_t oh, int64_t ow) {
  if (oh == 0 || ow == 0 || h % oh != 0 || w % ow != 0) return std::nullopt;
  Pool2dParams p;
  p.kernel = {h / oh, w / ow};
  p.stride = p.kernel;
  return p;
}

void check_adaptive(const char* op, const Tensor& big, const char* big_name, const Tensor& small,
                    const char* small_name) {
  FERRY_CHECK_AS(ShapeError, big.dim() == 3 || big.dim() == 4, op, ": expected ", big_name,
                 " of rank 3 or 4, but got ", nn::shape_str(big));
  FERRY_CHECK_AS(
      ShapeError,
      small.dim() == big.dim() &&
          std::equal(small.sizes().begin(), small.sizes().end() - 2, big.sizes().begin()),
      op, ": expected ", small_name, " to share ", big_name, "'s leading dims (",
      nn::shape_str(big), "), but got ", nn::shape_str(small));
  FERRY_CHECK_AS(ShapeError, big.size(-2) > 0 && big.size(-1) > 0, op, ": expected ", big_name,
                 " with non-empty spatial dims, but got ", nn::shape_str(big));
}

}  // namespace

void adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& input) {
  constexpr const char* kOp = "adaptive_avg_pool2d_forward";
  nn::check_operand(input, kOp, "input");
  nn::check_output(out, kOp, "out");
  check_adaptive(kOp, input, "input", out, "out");
  check_float_dtypes(kOp, input, "input", out, "out (input's dtype)");
  if (out.numel() == 0) return;
  const Tensor x = as_4d(input), y = as_4d(out);
  const auto even = even_adaptive(x.size(2), x.size(3), y.size(2), y.size(3));
  if (reference_only(input.dtype()) || !even) return reference::adaptive_avg_pool2d_forward(y, x);
  const PoolShape s{x.size(0), x.size(1), x.size(2), x.size(3), y.size(2), y.size(3)};
  pool_onednn_or_f32(false, x, y,
                     onednn_pool(dnnl::algorithm::pooling_avg_include_padding, *even, s, false));
}

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  constexpr const char* kOp = "adaptive_avg_pool2d_backward";
  nn::check_output(grad_input, kOp, "grad_input");
  nn::check_operand(grad_out, kOp, "grad_out");
  check_adaptive(kOp, grad_input, "grad_input", grad_out, "grad_out");
  check_float_dtypes(kOp, grad_out, "grad_out", grad_input, "grad_input (grad_out's dtype)");
  if (grad_input.numel() == 0) return;
  const Tensor dx = as_4d(grad_input), dy = as_4d(grad_out);
  const auto even = even_adaptive(dx.size(2), dx.size(3), dy.size(2), dy.size(3));
  if (reference_only(grad_out.dtype()) || !even || dy.numel() == 0) {
    return reference::adaptive_avg_pool2d_backward(dx, dy);
  }
  const PoolShape s{dx.size(0), dx.size(1), dx.size(2), dx.size(3), dy.size(2), dy.size(3)};
  pool_onednn_or_f32(true, dx, dy,
                     onednn_pool(dnnl::algorithm::pooling_avg_include_padding, *even, s, false));
}

}  // namespace ferry::cpu
