// cpu::batch_norm_forward_training / _forward_inference / _backward on oneDNN's batch
// normalization for float32 and bfloat16 (float16 through float32 temporaries where oneDNN has
// no kernel), portable loops for float64. Inputs of any rank >= 2 are seen as [N, C, S] (the
// spatial dims merged), passed to oneDNN as 4-d NCHW or NHWC (channels-last) when dense so;
// other strides are staged. The statistics bookkeeping (invstd, running statistics with the
// unbiased variance) happens here in float32, since oneDNN reports the biased variance.
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

enum class Layout { kNcs, kNsc };  // [N, C, S] dense as NCHW, or as NHWC

// input as [N, C, S], or undefined when its spatial dims cannot be merged into one.
Tensor ncs_view(const Tensor& t) {
  const auto merged = nn::merge_dims(t, 2, t.dim());
  if (!merged) return Tensor();
  return t.as_strided({t.size(0), t.size(1), merged->size},
                      {t.stride(0), t.stride(1), merged->stride});
}

bool dense_as(const Tensor& v, Layout layout) {
  if (!v.defined() || v.is_neg() || v.is_conj()) return false;
  const int64_t n = v.size(0), c = v.size(1), s = v.size(2);
  const int64_t sn = v.stride(0), sc = v.stride(1), ss = v.stride(2);
  if (layout == Layout::kNcs)
    return (s == 1 || ss == 1) && (c == 1 || sc == s) && (n == 1 || sn == c * s);
  return (c == 1 || sc == 1) && (s == 1 || ss == c) && (n == 1 || sn == s * c);
}

std::array<int64_t, 4> strides_4d(const Tensor& v, Layout layout) {
  const int64_t c = v.size(1), s = v.size(2);
  return layout == Layout::kNcs ? std::array<int64_t, 4>{c * s, s, 1, 1}
                                : std::array<int64_t, 4>{s * c, 1, c, c};
}

dnnl::memory::desc desc_4d(const Tensor& v, Layout layout) {
  return onednn::desc_of(v, {v.size(0), v.size(1), v.size(2), 1}, strides_4d(v, layout),
                         "batch_norm");
}

// A dense [N, C, S] temporary in `layout`.
Tensor ncs_temp(const Tensor& like, ScalarType dtype, Layout layout) {
  const int64_t n = like.size(0), c = like.size(1), s = like.size(2);
  const Tensor t = nn::host_empty(
      {n, c, s, 1}, dtype,
      layout == Layout::kNcs ? MemoryFormat::Contiguous : MemoryFormat::ChannelsLast);
  const auto st = strides_4d(like, layout);
  return t.as_strided({n, c, s}, {st[0], st[1], st[2]});
}

// v as oneDNN takes it in `layout` of `dtype`: v itself, or a staged copy.
Tensor ncs_in(const Tensor& v, Layout layout, ScalarType dtype) {
  if (v.dtype() == dtype && dense_as(v, layout)) return v;
  Tensor t = ncs_temp(v, dtype, layout);
  t.copy_(v);
  return t;
}
nn::OutputStage ncs_out(const Tensor& v, Layout layout, ScalarType dtype) {
  if (v.dtype() == dtype && dense_as(v, layout)) return nn::OutputStage(v, Tensor());
  return nn::OutputStage(v, ncs_temp(v, dtype, layout));
}

Layout pick_layout(const Tensor& v) {
  return dense_as(v, Layout::kNsc) && !dense_as(v, Layout::kNcs) ? Layout::kNsc : Layout::kNcs;
}

// The merged view of an input (staged densely when the dims do not merge) or an output.
Tensor input_ncs(const Tensor& t) {
  Tensor v = ncs_view(t);
  return v.defined() ? v : ncs_view(nn::dense_copy(t, t.dtype()));
}
struct StagedNcs {
  nn::OutputStage stage;
  Tensor view;
};
StagedNcs output_ncs(const Tensor& t) {
  Tensor v = ncs_view(t);
  if (v.defined()) return {nn::OutputStage(t, Tensor()), v};
  Tensor staged = nn::host_empty(t.sizes(), t.dtype());
  return {nn::OutputStage(t, staged), ncs_view(staged)};
}

std::string describe(const Tensor& x, const char* what) {
  return std::string(what) + " input " + nn::shape_str(x) + " strides " +
         nn::shape_str(x.strides()) + ", dtype " + std::string(scalar_type_name(x.dtype()));
}

// One oneDNN forward over [N, C, S] views of one dtype. Training writes the batch mean and the
// biased variance into mean and var (float32 [C], unit stride); inference reads them.
bool forward_onednn(const Tensor& out3, const Tensor& x3, const Tensor& scale, const Tensor& shift,
                    bool training, const Tensor& mean, const Tensor& var, double eps) {
  const Layout layout = pick_layout(x3);
  const Tensor x = ncs_in(x3, layout, x3.dtype());
  nn::OutputStage y = ncs_out(out3, layout, x3.dtype());
  const auto md = desc_4d(x, layout);
  Flags flags = training ? Flags::none : Flags::use_global_stats;
  if (scale.defined()) flags = flags | Flags::use_scale;
  if (shift.defined()) flags = flags | Flags::use_shift;

  onednn::TeamScope team;
  onednn::CacheKey key(onednn::kBatchNormForward);
  key.add(x).add(static_cast<int64_t>(layout)).add(static_cast<int64_t>(flags)).add_double(eps);
  auto entry = onednn::find_or_build(key, team, [&] {
    auto e = std::make_shared<onednn::CachedPrimitive>();
    try {
      const dnnl::batch_normalization_forward::desc desc(
          training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, md,
          static_cast<float>(eps), flags);
      const dnnl::batch_normalization_forward::primitive_desc pd(desc, onednn::default_attr(),
                                                                 onednn::engine());
      e->primitive = dnnl::batch_normalization_forward(pd);
      e->scratchpad_bytes = pd.scratchpad_desc().get_size();
      e->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      if (err.status == dnnl_unimplemented && x3.dtype() == kFloat16) {
        e->status = Status::kDtypeUnsupported;
        return e;
      }
      onednn::rethrow(err, "batch_normalization_forward", describe(x3, "batch norm"));
    }
    return e;
  });
  if (entry->status == Status::kDtypeUnsupported) return false;
  const dnnl::memory::desc stat_md({x.size(1)}, dnnl::memory::data_type::f32, {1});
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, onednn::memory_of(md, x)},
                                             {DNNL_ARG_DST, onednn::memory_of(md, y.get())},
                                             {DNNL_ARG_MEAN, onednn::memory_of(stat_md, mean)},
                                             {DNNL_ARG_VARIANCE, onednn::memory_of(stat_md, var)}};
  if (scale.defined()) args.emplace(DNNL_ARG_SCALE, onednn::memory_of(stat_md, scale));
  if (shift.defined()) args.emplace(DNNL_ARG_SHIFT, onednn::memory_of(stat_md, shift));
  try {
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "batch_normalization_forward", describe(x3, "batch norm"));
  }
  y.finish();
  return true;
}

// One oneDNN backward. dx3 defined; dscale/dshift float32 [C] unit-stride temporaries or
// undefined; scale, mean, var float32 [C] unit stride (var with eps folded in: eps is 0 here).
bool backward_onednn(const Tensor& dx3, const Tensor& dscale, const Tensor& dshift,
                     const Tensor& dy3, const Tensor& x3, const Tensor& scale, const Tensor& mean,
                     const Tensor& var, bool training) {
  const Layout diff_layout = pick_layout(dy3);
  const Layout data_layout =
      dense_as(x3, Layout::kNcs) || dense_as(x3, Layout::kNsc) ? pick_layout(x3) : diff_layout;
  const ScalarType dtype = dy3.dtype();
  const Tensor dy = ncs_in(dy3, diff_layout, dtype), x = ncs_in(x3, data_layout, dtype);
  nn::OutputStage dx = ncs_out(dx3, diff_layout, dtype);
  const auto diff_md = desc_4d(dy, diff_layout), data_md = desc_4d(x, data_layout);
  // oneDNN 2.6 implements backward_data only without a scale: with one, it computes the scale
  // and shift gradients too (into temporaries when they are not wanted).
  const bool full = true;
  Flags flags = full ? Flags::use_scale | Flags::use_shift : Flags::use_scale;
  if (!training) flags = flags | Flags::use_global_stats;

  onednn::TeamScope team;
  onednn::CacheKey key(onednn::kBatchNormBackward);
  key.add(dy).add(x).add(static_cast<int64_t>(diff_layout)).add(static_cast<int64_t>(data_layout));
  key.add(static_cast<int64_t>(flags));
  auto entry = onednn::find_or_build(key, team, [&] {
    auto e = std::make_shared<onednn::CachedPrimitive>();
    try {
      const dnnl::batch_normalization_forward::desc hint_desc(dnnl::prop_kind::forward_training,
                                                              data_md, 0.f, flags);
      const dnnl::batch_normalization_forward::primitive_desc hint(hint_desc, onednn::engine());
      const dnnl::batch_normalization_backward::desc desc(
          full ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data, diff_md, data_md, 0.f,
          flags);
      const dnnl::batch_normalization_backward::primitive_desc pd(desc, onednn::default_attr(),
                                                                  onednn::engine(), hint);
      e->primitive = dnnl::batch_normalization_backward(pd);
      e->scratchpad_bytes = pd.scratchpad_desc().get_size();
      e->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      if (err.status == dnnl_unimplemented && dtype == kFloat16) {
        e->status = Status::kDtypeUnsupported;
        return e;
      }
      onednn::rethrow(err, "batch_normalization_backward", describe(x3, "batch norm"));
    }
    return e;
  });
  if (entry->status == Status::kDtypeUnsupported) return false;
  const dnnl::memory::desc stat_md({x.size(1)}, dnnl::memory::data_type::f32, {1});
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, onednn::memory_of(data_md, x)},
      {DNNL_ARG_DIFF_DST, onednn::memory_of(diff_md, dy)},
      {DNNL_ARG_DIFF_SRC, onednn::memory_of(diff_md, dx.get())},
      {DNNL_ARG_MEAN, onednn::memory_of(stat_md, mean)},
      {DNNL_ARG_VARIANCE, onednn::memory_of(stat_md, var)},
      {DNNL_ARG_SCALE, onednn::memory_of(stat_md, scale)}};
  Tensor unused_dscale, unused_dshift;
  if (full) {
    unused_dscale = dscale.defined() ? dscale : nn::host_empty({x.size(1)}, kFloat32);
    unused_dshift = dshift.defined() ? dshift : nn::host_empty({x.size(1)}, kFloat32);
    args.emplace(DNNL_ARG_DIFF_SCALE, onednn::memory_of(stat_md, unused_dscale));
    args.emplace(DNNL_ARG_DIFF_SHIFT, onednn::memory_of(stat_md, unused_dshift));
    // Its value does not enter the gradients, but oneDNN asks for the shift with use_shift.
    args.emplace(DNNL_ARG_SHIFT, onednn::memory_of(stat_md, unused_dshift));
  }
  try {
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "batch_normalization_backward", describe(x3, "batch norm"));
  }
  dx.finish();
  return true;
}

struct BnShape {
  int64_t c, per_channel;
  ScalarType stat_dtype;
};

ScalarType stat_dtype_of(ScalarType t) { return is_reduced_floating_point(t) ? kFloat32 : t; }

BnShape check_bn(const char* op, const Tensor& input, const char* input_name) {
  nn::check_operand(input, op, input_name);
  FERRY_CHECK_AS(ShapeError, input.dim() >= 2, op, ": expected ", input_name,
                 " of rank >= 2 ([N, C, ...]), but got ", nn::shape_str(input));
  FERRY_CHECK_AS(DTypeError,
                 input.dtype() == kFloat32 || input.dtype() == kBFloat16 ||
                     input.dtype() == kFloat16 || input.dtype() == kFloat64,
                 op, ": expected ", input_name,
                 " of dtype float32, bfloat16, float16 or float64, but got ", input.dtype());
  const int64_t c = input.size(1);
  return {c, c == 0 ? 0 : input.numel() / c, stat_dtype_of(input.dtype())};
}

// A [C] vector: its shape, and its dtype (the statistics dtype; affine parameters may also have
// the input's dtype).
void check_channel_vector(const char* op, const Tensor& t, const char* name, const BnShape& s,
                          ScalarType input_dtype, bool is_output) {
  if (!t.defined()) return;
  if (is_output) {
    nn::check_output(t, op, name);
  } else {
    nn::check_operand(t, op, name);
  }
  nn::check_shape(t, {s.c}, op, name, "[C]");
  FERRY_CHECK_AS(DTypeError, t.dtype() == s.stat_dtype || t.dtype() == input_dtype, op,
                 ": expected ", name, " of dtype ", s.stat_dtype, ", but got ", t.dtype());
}

// Reads a [C] vector as doubles (any dtype, any stride).
std::vector<double> read_vector(const Tensor& t) {
  const Tensor f = nn::dense_copy(t, kFloat64);
  const double* p = static_cast<const double*>(f.const_data_ptr());
  return std::vector<double>(p, p + f.numel());
}
// Writes doubles into a [C] vector of any dtype and stride.
void write_vector(const Tensor& t, const std::vector<double>& values) {
  const Tensor f = nn::host_empty({static_cast<int64_t>(values.size())}, kFloat64);
  std::copy(values.begin(), values.end(), static_cast<double*>(f.data_ptr()));
  Tensor(t).copy_(f);
}

}  // namespace

void batch_norm_forward_training(const Tensor& out, const Tensor& save_mean,
                                 const Tensor& save_invstd, const Tensor& input,
                                 const Tensor& weight, const Tensor& bias,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 double momentum, double eps) {
  constexpr const char* kOp = "batch_norm_forward_training";
  const BnShape s = check_bn(kOp, input, "input");
  nn::check_output(out, kOp, "out");
  nn::check_shape(out, input.sizes(), kOp, "out (input's shape)");
  nn::check_dtype(out, input.dtype(), kOp, "out (input's dtype)");
  nn::check_operand(save_mean, kOp, "save_mean");
  nn::check_operand(save_invstd, kOp, "save_invstd");
  check_channel_vector(kOp, save_mean, "save_mean", s, s.stat_dtype, true);
  check_channel_vector(kOp, save_invstd, "save_invstd", s, s.stat_dtype, true);
  check_channel_vector(kOp, running_mean, "running_mean", s, s.stat_dtype, true);
  check_channel_vector(kOp, running_var, "running_var", s, s.stat_dtype, true);
  check_channel_vector(kOp, weight, "weight", s, input.dtype(), false);
  check_channel_vector(kOp, bias, "bias", s, input.dtype(), false);
  FERRY_CHECK_AS(ShapeError, s.per_channel > 1, kOp,
                 ": expected more than 1 value per channel when training, but got input ",
                 nn::shape_str(input));
  const Tensor x3 = input_ncs(input);
  StagedNcs y = output_ncs(out);
  if (input.dtype() == kFloat64) {
    reference::batch_norm_forward(y.view, save_mean, save_invstd, x3, weight, bias, running_mean,
                                  running_var, true, momentum, eps);
    return y.stage.finish();
  }
  const Tensor mean = nn::host_empty({s.c}, kFloat32), var = nn::host_empty({s.c}, kFloat32);
  const Tensor scale = weight.defined() ? nn::f32_vector(weight) : Tensor();
  const Tensor shift = bias.defined() ? nn::f32_vector(bias) : Tensor();
  if (!forward_onednn(y.view, x3, scale, shift, true, mean, var, eps)) {
    nn::OutputStage y32 = ncs_out(y.view, pick_layout(x3), kFloat32);
    forward_onednn(y32.get(), ncs_in(x3, pick_layout(x3), kFloat32), scale, shift, true, mean, var,
                   eps);
    y32.finish();
  }
  y.stage.finish();
  // invstd and the running statistics (unbiased variance), as PyTorch.
  const float* m = static_cast<const float*>(mean.const_data_ptr());
  const float* v = static_cast<const float*>(var.const_data_ptr());
  std::vector<double> mean_d(m, m + s.c), invstd(static_cast<size_t>(s.c));
  for (int64_t c = 0; c < s.c; ++c) invstd[c] = 1.0 / std::sqrt(static_cast<double>(v[c]) + eps);
  write_vector(save_mean, mean_d);
  write_vector(save_invstd, invstd);
  const double unbias = static_cast<double>(s.per_channel) / static_cast<double>(s.per_channel - 1);
  if (running_mean.defined()) {
    std::vector<double> r = read_vector(running_mean);
    for (int64_t c = 0; c < s.c; ++c) r[c] = (1 - momentum) * r[c] + momentum * mean_d[c];
    write_vector(running_mean, r);
  }
  if (running_var.defined()) {
    std::vector<double> r = read_vector(running_var);
    for (int64_t c = 0; c < s.c; ++c) r[c] = (1 - momentum) * r[c] + momentum * v[c] * unbias;
    write_vector(running_var, r);
  }
}

void batch_norm_forward_inference(const Tensor& out, const Tensor& input, const Tensor& weight,
                                  const Tensor& bias, const Tensor& running_mean,
                                  const Tensor& running_var, double eps) {
  constexpr const char* kOp = "batch_norm_forward_inference";
  const BnShape s = check_bn(kOp, input, "input");
  nn::check_output(out, kOp, "out");
  nn::check_shape(out, input.sizes(), kOp, "out (input's shape)");
  nn::check_dtype(out, input.dtype(), kOp, "out (input's dtype)");
  nn::check_operand(running_mean, kOp, "running_mean");
  nn::check_operand(running_var, kOp, "running_var");
  check_channel_vector(kOp, running_mean, "running_mean", s, s.stat_dtype, false);
  check_channel_vector(kOp, running_var, "running_var", s, s.stat_dtype, false);
  check_channel_vector(kOp, weight, "weight", s, input.dtype(), false);
  check_channel_vector(kOp, bias, "bias", s, input.dtype(), false);
  if (input.numel() == 0) return;
  const Tensor x3 = input_ncs(input);
  StagedNcs y = output_ncs(out);
  if (input.dtype() == kFloat64) {
    reference::batch_norm_forward(y.view, Tensor(), Tensor(), x3, weight, bias, running_mean,
                                  running_var, false, 0.0, eps);
    return y.stage.finish();
  }
  const Tensor mean = nn::f32_vector(running_mean), var = nn::f32_vector(running_var);
  const Tensor scale = weight.defined() ? nn::f32_vector(weight) : Tensor();
  const Tensor shift = bias.defined() ? nn::f32_vector(bias) : Tensor();
  if (!forward_onednn(y.view, x3, scale, shift, false, mean, var, eps)) {
    nn::OutputStage y32 = ncs_out(y.view, pick_layout(x3), kFloat32);
    forward_onednn(y32.get(), ncs_in(x3, pick_layout(x3), kFloat32), scale, shift, false, mean, var,
                   eps);
    y32.finish();
  }
  y.stage.finish();
}

void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                         const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                         bool training) {
  constexpr const char* kOp = "batch_norm_backward";
  const BnShape s = check_bn(kOp, input, "input");
  nn::check_operand(grad_out, kOp, "grad_out");
  nn::check_shape(grad_out, input.sizes(), kOp, "grad_out (input's shape)");
  nn::check_dtype(grad_out, input.dtype(), kOp, "grad_out (input's dtype)");
  if (grad_input.defined()) {
    nn::check_output(grad_input, kOp, "grad_input");
    nn::check_shape(grad_input, input.sizes(), kOp, "grad_input (input's shape)");
    nn::check_dtype(grad_input, input.dtype(), kOp, "grad_input (input's dtype)");
  }
  nn::check_operand(mean, kOp, "mean");
  nn::check_operand(invstd, kOp, "invstd");
  check_channel_vector(kOp, mean, "mean", s, s.stat_dtype, false);
  check_channel_vector(kOp, invstd, "invstd", s, s.stat_dtype, false);
  check_channel_vector(kOp, weight, "weight", s, input.dtype(), false);
  check_channel_vector(kOp, grad_weight, "grad_weight", s, input.dtype(), true);
  check_channel_vector(kOp, grad_bias, "grad_bias", s, input.dtype(), true);
  if (input.numel() == 0) {
    if (grad_weight.defined()) Tensor(grad_weight).zero_();
    if (grad_bias.defined()) Tensor(grad_bias).zero_();
    return;
  }
  if (!grad_input.defined() && !grad_weight.defined() && !grad_bias.defined()) return;
  const Tensor x3 = input_ncs(input), dy3 = input_ncs(grad_out);
  if (input.dtype() == kFloat64) {
    StagedNcs dx = grad_input.defined() ? output_ncs(grad_input)
                                        : StagedNcs{nn::OutputStage(Tensor(), Tensor()), Tensor()};
    reference::batch_norm_backward(dx.view, grad_weight, grad_bias, dy3, x3, weight, mean, invstd,
                                   training);
    if (grad_input.defined()) dx.stage.finish();
    return;
  }
  // oneDNN takes the variance; with eps = 0, var = 1 / invstd^2 gives back invstd exactly enough.
  std::vector<double> var_d = read_vector(invstd);
  for (double& v : var_d) v = 1.0 / (v * v);
  const Tensor var = nn::host_empty({s.c}, kFloat32);
  write_vector(var, var_d);
  const Tensor mean32 = nn::f32_vector(mean);
  const Tensor scale = weight.defined() ? nn::f32_vector(weight) : nn::host_empty({s.c}, kFloat32);
  if (!weight.defined()) write_vector(scale, std::vector<double>(static_cast<size_t>(s.c), 1.0));
  const Tensor dscale = grad_weight.defined() ? nn::host_empty({s.c}, kFloat32) : Tensor();
  const Tensor dshift = grad_bias.defined() ? nn::host_empty({s.c}, kFloat32) : Tensor();
  StagedNcs dx = grad_input.defined() ? output_ncs(grad_input)
                                      : StagedNcs{nn::OutputStage(Tensor(), Tensor()),
                                                  ncs_temp(dy3, input.dtype(), pick_layout(dy3))};
  if (!backward_onednn(dx.view, dscale, dshift, dy3, x3, scale, mean32, var, training)) {
    nn::OutputStage dx32 = ncs_out(dx.view, pick_layout(dy3), kFloat32);
    backward_onednn(dx32.get(), dscale, dshift, ncs_in(dy3, pick_layout(dy3), kFloat32),
                    ncs_in(x3, pick_layout(dy3), kFloat32), scale, mean32, var, training);
    dx32.finish();
  }
  if (grad_input.defined()) dx.stage.finish();
  if (grad_weight.defined()) Tensor(grad_weight).copy_(dscale);
  if (grad_bias.defined()) Tensor(grad_bias).copy_(dshift);
}

}  // namespace ferry::cpu
