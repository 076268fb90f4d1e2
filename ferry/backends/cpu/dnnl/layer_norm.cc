// cpu::layer_norm_forward / _backward on oneDNN's layer normalization for float32 and bfloat16
// (float16 through float32 temporaries where oneDNN has no kernel), portable loops for float64.
// The input is seen as [R, D] (leading dims merged into rows, normalized dims into one); rows
// with unit-stride elements go to oneDNN as they are, other strides are staged. oneDNN reports
// the variance; rstd = 1 / sqrt(var + eps) is computed here, and the backward pass hands oneDNN
// var = 1 / rstd^2 with eps = 0.
#include <cmath>
#include <string>

#include "ferry/backends/cpu/dnnl/dnnl_runtime.h"
#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"

namespace ferry::cpu {
namespace {

using Status = onednn::CachedPrimitive::Status;
using Flags = dnnl::normalization_flags;

// t as [R, D] split after dim `split`, or undefined when the dims do not merge.
Tensor rows_view(const Tensor& t, int64_t split) {
  const auto rows = nn::merge_dims(t, 0, split), cols = nn::merge_dims(t, split, t.dim());
  if (!rows || !cols) return Tensor();
  return t.as_strided({rows->size, cols->size}, {rows->stride, cols->stride});
}
// Any-shape tensor as a 1-d view, or undefined.
Tensor flat_view(const Tensor& t) {
  if (!t.defined()) return t;
  const auto all = nn::merge_dims(t, 0, t.dim());
  if (!all) return Tensor();
  return t.as_strided({all->size}, {all->stride});
}
Tensor flat_in(const Tensor& t) {
  if (!t.defined()) return t;
  const Tensor v = flat_view(t);
  return v.defined() ? v : flat_view(nn::dense_copy(t, t.dtype()));
}
struct Staged {
  nn::OutputStage stage;
  Tensor view;
};
Staged staged_rows(const Tensor& t, int64_t split) {
  const Tensor v = rows_view(t, split);
  if (v.defined()) return {nn::OutputStage(t, Tensor()), v};
  const Tensor staged = nn::host_empty(t.sizes(), t.dtype());
  return {nn::OutputStage(t, staged), rows_view(staged, split)};
}
Staged staged_flat(const Tensor& t) {
  const Tensor v = flat_view(t);
  if (v.defined()) return {nn::OutputStage(t, Tensor()), v};
  const Tensor staged = nn::host_empty(t.sizes(), t.dtype());
  return {nn::OutputStage(t, staged), flat_view(staged)};
}

// Rows oneDNN's optimized kernel takes: unit-stride elements, rows not overlapping.
bool rows_dense(const Tensor& v) {
  return !v.is_neg() && !v.is_conj() && (v.size(1) == 1 || v.stride(1) == 1) &&
         (v.size(0) == 1 || v.stride(0) >= v.size(1));
}
dnnl::memory::desc rows_desc(const Tensor& v) {
  const int64_t row_stride = v.size(0) == 1 ? v.size(1) : v.stride(0);
  return onednn::desc_of(v, {v.size(0), v.size(1)}, {row_stride, 1}, "layer_norm");
}
bool same_rows(const Tensor& a, const Tensor& b) { return rows_desc(a) == rows_desc(b); }
// A contiguous [R, D] copy of v in dtype.
Tensor rows_copy(const Tensor& v, ScalarType dtype) { return nn::dense_copy(v, dtype); }

std::string describe(const Tensor& x) {
  return "input " + nn::shape_str(x) + " strides " + nn::shape_str(x.strides()) + ", dtype " +
         std::string(scalar_type_name(x.dtype()));
}

// One oneDNN forward (training: writes mean and the biased variance, float32 [R]).
bool forward_onednn(const Tensor& out2, const Tensor& x2, const Tensor& scale, const Tensor& shift,
                    const Tensor& mean, const Tensor& var, double eps) {
  const ScalarType dtype = x2.dtype();
  Tensor x = rows_dense(x2) ? x2 : rows_copy(x2, dtype);
  const bool out_in_place = out2.dtype() == dtype && rows_dense(out2) && same_rows(out2, x);
  if (!out_in_place && !x.is_contiguous()) x = rows_copy(x2, dtype);
  nn::OutputStage y(out2, out_in_place ? Tensor() : nn::host_empty(out2.sizes(), dtype));
  const auto md = rows_desc(x);
  Flags flags = Flags::none;
  if (scale.defined()) flags |= Flags::use_scale;
  if (shift.defined()) flags |= Flags::use_shift;

  onednn::TeamScope team;
  onednn::CacheKey key(onednn::kLayerNormForward);
  key.add(x).add(static_cast<int64_t>(flags)).add_double(eps);
  auto entry = onednn::find_or_build(key, team, [&] {
    auto e = std::make_shared<onednn::CachedPrimitive>();
    try {
      const dnnl::memory::desc stat_md({x.size(0)}, dnnl::memory::data_type::f32, {1});
      const dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_training, md,
                                                         stat_md, static_cast<float>(eps), flags);
      const dnnl::layer_normalization_forward::primitive_desc pd(desc, onednn::default_attr(),
                                                                 onednn::engine());
      e->primitive = dnnl::layer_normalization_forward(pd);
      e->scratchpad_bytes = pd.scratchpad_desc().get_size();
      e->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      if (err.status == dnnl_unimplemented && dtype == kFloat16) {
        e->status = Status::kDtypeUnsupported;
        return e;
      }
      onednn::rethrow(err, "layer_normalization_forward", describe(x2));
    }
    return e;
  });
  if (entry->status == Status::kDtypeUnsupported) return false;
  const dnnl::memory::desc stat_md({x.size(0)}, dnnl::memory::data_type::f32, {1});
  const dnnl::memory::desc vec_md({x.size(1)}, dnnl::memory::data_type::f32, {1});
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, onednn::memory_of(md, x)},
                                             {DNNL_ARG_DST, onednn::memory_of(md, y.get())},
                                             {DNNL_ARG_MEAN, onednn::memory_of(stat_md, mean)},
                                             {DNNL_ARG_VARIANCE, onednn::memory_of(stat_md, var)}};
  if (scale.defined()) args.emplace(DNNL_ARG_SCALE, onednn::memory_of(vec_md, scale));
  if (shift.defined()) args.emplace(DNNL_ARG_SHIFT, onednn::memory_of(vec_md, shift));
  try {
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "layer_normalization_forward", describe(x2));
  }
  y.finish();
  return true;
}

// One oneDNN backward. dscale/dshift: float32 [D] temporaries or undefined.
bool backward_onednn(const Tensor& dx2, const Tensor& dscale, const Tensor& dshift,
                     const Tensor& dy2, const Tensor& x2, const Tensor& scale, const Tensor& mean,
                     const Tensor& var) {
  const ScalarType dtype = dy2.dtype();
  Tensor dy = rows_dense(dy2) ? dy2 : rows_copy(dy2, dtype);
  const bool dx_in_place = dx2.dtype() == dtype && rows_dense(dx2) && same_rows(dx2, dy);
  if (!dx_in_place && !dy.is_contiguous()) dy = rows_copy(dy2, dtype);
  nn::OutputStage dx(dx2, dx_in_place ? Tensor() : nn::host_empty(dx2.sizes(), dtype));
  const Tensor x = x2.dtype() == dtype && rows_dense(x2) ? x2 : rows_copy(x2, dtype);
  const auto diff_md = rows_desc(dy), data_md = rows_desc(x);
  // oneDNN 2.6 implements backward_data only without a scale: with one, it computes the scale
  // and shift gradients too (into temporaries when they are not wanted).
  const bool full = true;
  const Flags flags = full ? Flags::use_scale | Flags::use_shift : Flags::use_scale;

  onednn::TeamScope team;
  onednn::CacheKey key(onednn::kLayerNormBackward);
  key.add(dy).add(x).add(static_cast<int64_t>(flags));
  auto entry = onednn::find_or_build(key, team, [&] {
    auto e = std::make_shared<onednn::CachedPrimitive>();
    try {
      const dnnl::memory::desc stat_md({x.size(0)}, dnnl::memory::data_type::f32, {1});
      const dnnl::layer_normalization_forward::desc hint_desc(dnnl::prop_kind::forward_training,
                                                              data_md, stat_md, 0.f, flags);
      const dnnl::layer_normalization_forward::primitive_desc hint(hint_desc, onednn::engine());
      const dnnl::layer_normalization_backward::desc desc(
          full ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data, diff_md, data_md,
          stat_md, 0.f, flags);
      const dnnl::layer_normalization_backward::primitive_desc pd(desc, onednn::default_attr(),
                                                                  onednn::engine(), hint);
      e->primitive = dnnl::layer_normalization_backward(pd);
      e->scratchpad_bytes = pd.scratchpad_desc().get_size();
      e->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      if (err.status == dnnl_unimplemented && dtype == kFloat16) {
        e->status = Status::kDtypeUnsupported;
        return e;
      }
      onednn::rethrow(err, "layer_normalization_backward", describe(x2));
    }
    return e;
  });
  if (entry->status == Status::kDtypeUnsupported) return false;
  const dnnl::memory::desc stat_md({x.size(0)}, dnnl::memory::data_type::f32, {1});
  const dnnl::memory::desc vec_md({x.size(1)}, dnnl::memory::data_type::f32, {1});
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, onednn::memory_of(data_md, x)},
      {DNNL_ARG_DIFF_DST, onednn::memory_of(diff_md, dy)},
      {DNNL_ARG_DIFF_SRC, onednn::memory_of(diff_md, dx.get())},
      {DNNL_ARG_MEAN, onednn::memory_of(stat_md, mean)},
      {DNNL_ARG_VARIANCE, onednn::memory_of(stat_md, var)},
      {DNNL_ARG_SCALE, onednn::memory_of(vec_md, scale)}};
  Tensor ds, dsh;
  if (full) {
    ds = dscale.defined() ? dscale : nn::host_empty({x.size(1)}, kFloat32);
    dsh = dshift.defined() ? dshift : nn::host_empty({x.size(1)}, kFloat32);
    args.emplace(DNNL_ARG_DIFF_SCALE, onednn::memory_of(vec_md, ds));
    args.emplace(DNNL_ARG_DIFF_SHIFT, onednn::memory_of(vec_md, dsh));
    // Its value does not enter the gradients, but oneDNN asks for the shift with use_shift.
    args.emplace(DNNL_ARG_SHIFT, onednn::memory_of(vec_md, dsh));
  }
  try {
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "layer_normalization_backward", describe(x2));
  }
  dx.finish();
  return true;
}

struct LnShape {
  int64_t split, rows, cols;
  ScalarType stat_dtype;
};

LnShape check_ln(const char* op, const Tensor& input, int64_t normalized_ndim) {
  nn::check_operand(input, op, "input");
  FERRY_CHECK_AS(DTypeError,
                 input.dtype() == kFloat32 || input.dtype() == kBFloat16 ||
                     input.dtype() == kFloat16 || input.dtype() == kFloat64,
                 op, ": expected input of dtype float32, bfloat16, float16 or float64, but got ",
                 input.dtype());
  FERRY_CHECK_AS(ShapeError, normalized_ndim >= 1 && normalized_ndim <= input.dim(), op,
                 ": expected normalized_ndim in [1, ", input.dim(), "] for input ",
                 nn::shape_str(input), ", but got ", normalized_ndim);
  const int64_t split = input.dim() - normalized_ndim;
  const auto sizes = input.sizes();
  return {split, nn::product(sizes, 0, static_cast<size_t>(split)),
          nn::product(sizes, static_cast<size_t>(split), sizes.size()),
          is_reduced_floating_point(input.dtype()) ? kFloat32 : input.dtype()};
}

void check_param(const char* op, const Tensor& t, const char* name, const Tensor& input,
                 const LnShape& s, bool is_output) {
  if (!t.defined()) return;
  if (is_output) {
    nn::check_output(t, op, name);
  } else {
    nn::check_operand(t, op, name);
  }
  nn::check_shape(t, input.sizes().slice(static_cast<size_t>(s.split)), op, name,
                  "the normalized shape");
  FERRY_CHECK_AS(DTypeError, t.dtype() == input.dtype() || t.dtype() == s.stat_dtype, op,
                 ": expected ", name, " of dtype ", input.dtype(), ", but got ", t.dtype());
}

void check_stat(const char* op, const Tensor& t, const char* name, const LnShape& s,
                bool is_output) {
  if (is_output) {
    nn::check_output(t, op, name);
  } else {
    nn::check_operand(t, op, name);
  }
  FERRY_CHECK_AS(ShapeError, t.numel() == s.rows, op, ": expected ", name, " with ", s.rows,
                 " elements (one per row), but got shape ", nn::shape_str(t));
  nn::check_dtype(t, s.stat_dtype, op, name);
}

// A float32 [n] tensor with `value` everywhere.
Tensor f32_filled(int64_t n, float value) {
  Tensor t = nn::host_empty({n}, kFloat32);
  std::fill_n(static_cast<float*>(t.data_ptr()), n, value);
  return t;
}

}  // namespace

void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                        const Tensor& input, const Tensor& weight, const Tensor& bias,
                        int64_t normalized_ndim, double eps) {
  constexpr const char* kOp = "layer_norm_forward";
  const LnShape s = check_ln(kOp, input, normalized_ndim);
  nn::check_output(out, kOp, "out");
  nn::check_shape(out, input.sizes(), kOp, "out (input's shape)");
  nn::check_dtype(out, input.dtype(), kOp, "out (input's dtype)");
  check_stat(kOp, mean, "mean", s, true);
  check_stat(kOp, rstd, "rstd", s, true);
  check_param(kOp, weight, "weight", input, s, false);
  check_param(kOp, bias, "bias", input, s, false);
  if (input.numel() == 0) return;
  Tensor x2 = rows_view(input, s.split);
  if (!x2.defined()) x2 = rows_view(nn::dense_copy(input, input.dtype()), s.split);
  Staged y = staged_rows(out, s.split);
  Staged m = staged_flat(mean), r = staged_flat(rstd);
  const Tensor w = flat_in(weight), b = flat_in(bias);
  if (input.dtype() == kFloat64) {
    reference::layer_norm_forward(y.view, m.view, r.view, x2, w, b, eps);
  } else if (s.cols == 1) {
    // oneDNN 2.6 gets one-element rows wrong (bfloat16 mean and output); the loops are exact and
    // there is nothing to vectorize.
    const Tensor y64 = nn::host_empty(y.view.sizes(), kFloat64);
    const Tensor m64 = nn::host_empty({s.rows}, kFloat64), r64 = nn::host_empty({s.rows}, kFloat64);
    reference::layer_norm_forward(y64, m64, r64, nn::dense_copy(x2, kFloat64),
                                  w.defined() ? nn::dense_copy(w, kFloat64) : w,
                                  b.defined() ? nn::dense_copy(b, kFloat64) : b, eps);
    Tensor(y.view).copy_(y64);
    Tensor(m.view).copy_(m64);
    Tensor(r.view).copy_(r64);
  } else {
    const Tensor mean32 = nn::host_empty({s.rows}, kFloat32),
                 var32 = nn::host_empty({s.rows}, kFloat32);
    const Tensor scale = w.defined() ? nn::f32_vector(w) : Tensor();
    const Tensor shift = b.defined() ? nn::f32_vector(b) : Tensor();
    if (!forward_onednn(y.view, x2, scale, shift, mean32, var32, eps)) {
      nn::OutputStage y32(y.view, nn::host_empty(y.view.sizes(), kFloat32));
      forward_onednn(y32.get(), nn::dense_copy(x2, kFloat32), scale, shift, mean32, var32, eps);
      y32.finish();
    }
    float* v = static_cast<float*>(var32.data_ptr());
    for (int64_t i = 0; i < s.rows; ++i) {
      v[i] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(v[i]) + eps));
    }
    Tensor(m.view).copy_(mean32);
    Tensor(r.view).copy_(var32);
  }
  y.stage.finish();
  m.stage.finish();
  r.stage.finish();
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                         int64_t normalized_ndim) {
  constexpr const char* kOp = "layer_norm_backward";
  const LnShape s = check_ln(kOp, input, normalized_ndim);
  nn::check_operand(grad_out, kOp, "grad_out");
  nn::check_shape(grad_out, input.sizes(), kOp, "grad_out (input's shape)");
  nn::check_dtype(grad_out, input.dtype(), kOp, "grad_out (input's dtype)");
  if (grad_input.defined()) {
    nn::check_output(grad_input, kOp, "grad_input");
    nn::check_shape(grad_input, input.sizes(), kOp, "grad_input (input's shape)");
    nn::check_dtype(grad_input, input.dtype(), kOp, "grad_input (input's dtype)");
  }
  check_stat(kOp, mean, "mean", s, false);
  check_stat(kOp, rstd, "rstd", s, false);
  check_param(kOp, weight, "weight", input, s, false);
  check_param(kOp, grad_weight, "grad_weight", input, s, true);
  check_param(kOp, grad_bias, "grad_bias", input, s, true);
  if (input.numel() == 0) {
    if (grad_weight.defined()) Tensor(grad_weight).zero_();
    if (grad_bias.defined()) Tensor(grad_bias).zero_();
    return;
  }
  if (!grad_input.defined() && !grad_weight.defined() && !grad_bias.defined()) return;
  Tensor x2 = rows_view(input, s.split), dy2 = rows_view(grad_out, s.split);
  if (!x2.defined()) x2 = rows_view(nn::dense_copy(input, input.dtype()), s.split);
  if (!dy2.defined()) dy2 = rows_view(nn::dense_copy(grad_out, grad_out.dtype()), s.split);
  Staged dx = grad_input.defined() ? staged_rows(grad_input, s.split)
                                   : Staged{nn::OutputStage(Tensor(), Tensor()),
                                            nn::host_empty({s.rows, s.cols}, input.dtype())};
  Staged dw = grad_weight.defined() ? staged_flat(grad_weight)
                                    : Staged{nn::OutputStage(Tensor(), Tensor()), Tensor()};
  Staged db = grad_bias.defined() ? staged_flat(grad_bias)
                                  : Staged{nn::OutputStage(Tensor(), Tensor()), Tensor()};
  const Tensor m = flat_in(mean), r = flat_in(rstd), w = flat_in(weight);
  if (input.dtype() == kFloat64) {
    reference::layer_norm_backward(grad_input.defined() ? dx.view : Tensor(), dw.view, db.view, dy2,
                                   x2, m, r, w);
  } else if (s.cols == 1) {  // as in the forward: the loops, in float64
    const auto f64 = [](const Tensor& t) { return t.defined() ? nn::dense_copy(t, kFloat64) : t; };
    const Tensor dx64 = nn::host_empty({s.rows, 1}, kFloat64);
    const Tensor dw64 = dw.view.defined() ? nn::host_empty({1}, kFloat64) : Tensor();
    const Tensor db64 = db.view.defined() ? nn::host_empty({1}, kFloat64) : Tensor();
    reference::layer_norm_backward(dx64, dw64, db64, f64(dy2), f64(x2), f64(m), f64(r), f64(w));
    Tensor(dx.view).copy_(dx64);
    if (dw64.defined()) Tensor(dw.view).copy_(dw64);
    if (db64.defined()) Tensor(db.view).copy_(db64);
  } else {
    const Tensor mean32 = nn::f32_vector(m);
    Tensor var32 = nn::dense_copy(r, kFloat32);
    float* v = static_cast<float*>(var32.data_ptr());
    for (int64_t i = 0; i < s.rows; ++i) v[i] = 1.0f / (v[i] * v[i]);
    const Tensor scale = w.defined() ? nn::f32_vector(w) : f32_filled(s.cols, 1.0f);
    const Tensor dscale = grad_weight.defined() ? nn::host_empty({s.cols}, kFloat32) : Tensor();
    const Tensor dshift = grad_bias.defined() ? nn::host_empty({s.cols}, kFloat32) : Tensor();
    if (!backward_onednn(dx.view, dscale, dshift, dy2, x2, scale, mean32, var32)) {
      nn::OutputStage dx32(dx.view, nn::host_empty(dx.view.sizes(), kFloat32));
      backward_onednn(dx32.get(), dscale, dshift, nn::dense_copy(dy2, kFloat32),
                      nn::dense_copy(x2, kFloat32), scale, mean32, var32);
      dx32.finish();
    }
    if (grad_weight.defined()) Tensor(dw.view).copy_(dscale);
    if (grad_bias.defined()) Tensor(db.view).copy_(dshift);
  }
  if (grad_input.defined()) dx.stage.finish();
  dw.stage.finish();
  db.stage.finish();
}

}  // namespace ferry::cpu
