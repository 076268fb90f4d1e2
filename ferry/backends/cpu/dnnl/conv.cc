// cpu::conv2d_forward / _backward_input / _backward_weight on oneDNN's convolution primitives
// for float32 and bfloat16 (float16 where the CPU has it, else float32 temporaries), portable
// loops for float64. Activations dense in NCHW or channels-last (NHWC) strides go to oneDNN in
// that layout (a forward convolution larger than 1 x 1 that would fall back to im2col there runs
// on oneDNN's blocked layouts instead: Note [Blocked forward convolution]); other strides are
// staged into the dense layout their strides resemble. Weights stay in the caller's layout
// unless only oneDNN's reference kernel would take it (or the blocked path runs): then they are
// reordered into the layout oneDNN picks (cached with the primitive), per call.
#include <string>
#include <tuple>
#include <utility>

#include "ferry/backends/cpu/dnnl/dnnl_runtime.h"
#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"

namespace ferry::cpu {
namespace {

using Status = onednn::CachedPrimitive::Status;

struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
};

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d) {
  const int64_t span = in + 2 * pad - d * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

std::string describe_params(const Conv2dParams& p) {
  return "stride " + nn::shape_str(p.stride) + ", padding " + nn::shape_str(p.padding) +
         ", dilation " + nn::shape_str(p.dilation) + ", groups " + std::to_string(p.groups);
}

// Checks what every convolution kernel shares and returns the shape. `input_sizes` are the
// logical [N, C, H, W] (of input or grad_input).
ConvShape check_conv(const char* op, const Tensor& input, const char* input_name,
                     const Tensor& weight, const char* weight_name, const Conv2dParams& p) {
  nn::check_rank(input, 4, op, input_name);
  nn::check_rank(weight, 4, op, weight_name);
  for (int i = 0; i < 2; ++i) {
    FERRY_CHECK_AS(ShapeError, p.stride[i] >= 1 && p.dilation[i] >= 1 && p.padding[i] >= 0, op,
                   ": expected stride >= 1, dilation >= 1 and padding >= 0, but got ",
                   describe_params(p));
  }
  FERRY_CHECK_AS(ShapeError, p.groups >= 1, op, ": expected groups >= 1, but got ", p.groups);
  ConvShape s{input.size(0),
              input.size(1),
              input.size(2),
              input.size(3),
              weight.size(0),
              weight.size(2),
              weight.size(3),
              0,
              0};
  FERRY_CHECK_AS(ShapeError, s.c % p.groups == 0 && s.o % p.groups == 0, op,
                 ": expected the input channels (", s.c, ") and the output channels (", s.o,
                 ") to be divisible by groups (", p.groups, ")");
  FERRY_CHECK_AS(ShapeError, weight.size(1) == s.c / p.groups, op, ": expected ", weight_name,
                 " of shape [O, C / groups, kH, kW] = [", s.o, ", ", s.c / p.groups, ", kH, kW]",
                 " for ", input_name, " of shape ", nn::shape_str(input), " and groups ", p.groups,
                 ", but got ", nn::shape_str(weight));
  FERRY_CHECK_AS(ShapeError, s.kh >= 1 && s.kw >= 1, op,
                 ": expected a kernel of at least 1 x 1, but ", weight_name, " has shape ",
                 nn::shape_str(weight));
  s.oh = conv_out_size(s.h, s.kh, p.stride[0], p.padding[0], p.dilation[0]);
  s.ow = conv_out_size(s.w, s.kw, p.stride[1], p.padding[1], p.dilation[1]);
  FERRY_CHECK_AS(ShapeError, s.oh >= 1 && s.ow >= 1, op, ": the padded input (",
                 nn::shape_str(input), " with padding ", nn::shape_str(p.padding),
                 ") is smaller than the dilated kernel (", nn::shape_str(weight), ", dilation ",
                 nn::shape_str(p.dilation), ")");
  return s;
}

void check_same_dtype(const char* op, const Tensor& ref,
                      std::initializer_list<std::pair<const Tensor*, const char*>> others) {
  FERRY_CHECK_AS(DTypeError, ref.is_floating_point(), op,
                 ": expected a float dtype (float32, bfloat16, float16, float64), but got ",
                 ref.dtype());
  for (const auto& [t, name] : others) {
    if (t->defined()) nn::check_dtype(*t, ref.dtype(), op, name);
  }
}

std::string describe(const Tensor& input, const Tensor& weight, const Tensor& out,
                     const Conv2dParams& p) {
  return "input " + nn::shape_str(input) + " strides " + nn::shape_str(input.strides()) +
         ", weight " + nn::shape_str(weight) + " strides " + nn::shape_str(weight.strides()) +
         ", out " + nn::shape_str(out) + " strides " + nn::shape_str(out.strides()) + ", " +
         describe_params(p) + ", dtype " + std::string(scalar_type_name(input.dtype()));
}

// An activation as oneDNN takes it: dense NCHW or NHWC, else a dense copy in the layout its
// strides resemble.
Tensor activation_in(const Tensor& t) {
  const MemoryFormat f = nn::layout_of(t);
  return nn::is_dense_in(t, f) ? t : nn::dense_copy(t, t.dtype(), f);
}
nn::OutputStage activation_out(const Tensor& t) {
  const MemoryFormat f = nn::layout_of(t);
  return nn::OutputStage(t, nn::is_dense_in(t, f), t.dtype(), f, false);
}
Tensor vector_in(const Tensor& t) {
  return !t.defined() || t.stride(0) == 1 || t.size(0) <= 1 ? t : nn::dense_copy(t, t.dtype());
}

// The user's weight [O, C/g, kH, kW] as oneDNN's grouped weights [g, O/g, C/g, kH, kW].
dnnl::memory::desc weights_desc(const Tensor& w, int64_t groups) {
  if (groups == 1) return onednn::desc_of(w, "conv2d");
  const DimVector s = onednn::layout_strides(w);
  const int64_t og = w.size(0) / groups;
  return onednn::desc_of(w, {groups, og, w.size(1), w.size(2), w.size(3)},
                         {og * s[0], s[0], s[1], s[2], s[3]}, "conv2d");
}
dnnl::memory::desc any_like(const dnnl::memory::desc& md) {
  return {md.dims(), md.data_type(), dnnl::memory::format_tag::any};
}

struct ConvConfig {
  dnnl::memory::dims strides, dilates, padding;
  explicit ConvConfig(const Conv2dParams& p)
      : strides{p.stride[0], p.stride[1]},
        dilates{p.dilation[0] - 1, p.dilation[1] - 1},
        padding{p.padding[0], p.padding[1]} {}
};

onednn::CacheKey conv_key(int64_t kind, const Conv2dParams& p,
                          std::initializer_list<const Tensor*> operands) {
  onednn::CacheKey key(kind);
  for (const Tensor* t : operands) key.add(*t);
  key.add(p.stride).add(p.padding).add(p.dilation).add(p.groups);
  return key;
}

// A primitive plus, when the weights are not in the layout it wants, the reorder between the
// user's weights and that layout (user -> primitive for forward and backward-data, primitive ->
// user for backward-weights).
struct ConvEntry : onednn::CachedPrimitive {
  bool reorder_weights = false;
  dnnl::memory::desc weights_md;  // what the primitive reads or writes
  dnnl::primitive weights_reorder;
  size_t reorder_scratchpad_bytes = 0;
  // Forward only: activations in oneDNN's blocked layout (see blocked_forward_pays), reordered
  // from the caller's input and back into the caller's output.
  bool reorder_src = false, reorder_dst = false;
  dnnl::memory::desc src_md, dst_md;  // what the primitive reads and writes
  dnnl::primitive src_reorder, dst_reorder;
  size_t src_reorder_scratchpad_bytes = 0, dst_reorder_scratchpad_bytes = 0;
};

void attach_weights_reorder(ConvEntry& e, const dnnl::memory::desc& user_md,
                            const dnnl::memory::desc& wanted, bool to_user) {
  e.weights_md = wanted;
  e.reorder_weights = wanted != user_md;
  if (!e.reorder_weights) return;
  const auto& eng = onednn::engine();
  const dnnl::reorder::primitive_desc pd =
      to_user ? dnnl::reorder::primitive_desc(eng, wanted, eng, user_md, onednn::default_attr())
              : dnnl::reorder::primitive_desc(eng, user_md, eng, wanted, onednn::default_attr());
  e.weights_reorder = dnnl::reorder(pd);
  e.reorder_scratchpad_bytes = pd.scratchpad_desc().get_size();
}

void run_reorder(const dnnl::primitive& reorder, size_t scratchpad_bytes, const dnnl::memory& from,
                 const dnnl::memory& to) {
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  onednn::execute(reorder, args, scratchpad_bytes);
}
void run_reorder(const ConvEntry& e, const dnnl::memory& from, const dnnl::memory& to) {
  run_reorder(e.weights_reorder, e.reorder_scratchpad_bytes, from, to);
}

// A reorder between two layouts of one tensor, and its scratchpad size.
std::pair<dnnl::primitive, size_t> make_reorder(const dnnl::memory::desc& from,
                                                const dnnl::memory::desc& to) {
  const auto& eng = onednn::engine();
  const dnnl::reorder::primitive_desc pd(eng, from, eng, to, onednn::default_attr());
  return {dnnl::reorder(pd), pd.scratchpad_desc().get_size()};
}

// Builds with the user's weight layout first; when that only reaches the reference kernel, with
// the weight layout left to oneDNN (`any`). make_pd(weights_md) returns the primitive
// descriptor; it may throw dnnl::error.
template <typename Pd, typename Prim, typename MakePd>
std::shared_ptr<onednn::CachedPrimitive> build_conv(const dnnl::memory::desc& user_weights,
                                                    bool weights_are_output, ScalarType dtype,
                                                    MakePd&& make_pd) {
  auto e = std::make_shared<ConvEntry>();
  try {
    Pd pd = make_pd(user_weights);
    if (onednn::is_reference_impl(pd)) {
      Pd any_pd = make_pd(any_like(user_weights));
      if (!onednn::is_reference_impl(any_pd)) pd = any_pd;
    }
    const dnnl::memory::desc wanted =
        weights_are_output ? pd.diff_weights_desc() : pd.weights_desc();
    attach_weights_reorder(*e, user_weights, wanted, weights_are_output);
    e->impl = pd.impl_info_str();
    e->primitive = Prim(pd);
    e->scratchpad_bytes = pd.scratchpad_desc().get_size();
  } catch (const dnnl::error& err) {
    if (err.status == dnnl_unimplemented && dtype == kFloat16) {
      e->status = Status::kDtypeUnsupported;
      return e;
    }
    throw;
  }
  return e;
}

dnnl::convolution_forward::primitive_desc forward_pd(const dnnl::memory::desc& src,
                                                     const dnnl::memory::desc& weights,
                                                     const dnnl::memory::desc& bias,
                                                     const dnnl::memory::desc& dst,
                                                     const ConvConfig& c) {
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                             dnnl::algorithm::convolution_direct, src, weights,
                                             bias, dst, c.strides, c.dilates, c.padding, c.padding);
  return {desc, onednn::default_attr(), onednn::engine()};
}

// Note [Blocked forward convolution]: with the caller's plain layouts (NCHW, or NHWC where
// oneDNN has no direct kernel for the shape) oneDNN 2.6 falls back to im2col + GEMM ("gemm:jit")
// or its reference kernel. For kernels larger than 1 x 1 its direct kernels on channels-last
// (brgconv, AVX-512) or blocked (nChw16c) layouts are faster by more than reordering the input
// and output costs (ResNet-50's 3 x 3 64-channel layer at batch 8 on one Zen 5 core: 15.3 ms
// through im2col, 9.6 ms channels-last, 10.7 ms blocked, plus the reorders; measured with
// `ferry bench-ops`); a 1 x 1 convolution on NCHW is one GEMM per image with no im2col, and
// stays on it.
bool blocked_forward_pays(const std::string& impl, const Tensor& w) {
  const bool fallback = impl.find("gemm") != std::string::npos || impl.rfind("ref", 0) == 0 ||
                        impl.find("_ref") != std::string::npos;
  return fallback && w.size(2) * w.size(3) > 1;
}

// Note [Activation reorders]: the blocked path's reorders of the activations (NCHW to
// channels-last or nChw16c and back) go through ferry's copy engine (onednn::copy_into_memory),
// not oneDNN's reorder primitive. oneDNN 2.6's reorder ("jit:uni") took 10.0 ms for the
// ResNet stem's 8 x 64 x 112 x 112 float32 output from channels-last to NCHW on one core of an
// Intel Xeon VM (51 MB moved, 5 GB/s), and its nChw16c to NCHW reorder ("jit:blk") 6.3 ms;
// the copy engine moves such permutations at about memcpy's speed (docs/kernels.md).

// Rebuilds e's forward primitive with activations and weights in the layouts oneDNN prefers,
// with the reorders from and to the caller's layouts, when oneDNN then picks a direct kernel;
// leaves e as it is otherwise.
void try_blocked_forward(ConvEntry& e, const dnnl::memory::desc& x_md,
                         const dnnl::memory::desc& w_md, const dnnl::memory::desc& b_md,
                         const dnnl::memory::desc& y_md, const ConvConfig& config) {
  // First whatever layouts oneDNN prefers, if that keeps the caller's input layout (its direct
  // kernels for few input channels read NCHW as it is, and write nChw16c): no input reorder.
  // Else channels-last activations (oneDNN's brgconv kernels, the fastest on AVX-512 CPUs),
  // then whatever layouts oneDNN prefers.
  const auto nhwc = [](const dnnl::memory::desc& md) {
    return dnnl::memory::desc(md.dims(), md.data_type(), dnnl::memory::format_tag::nhwc);
  };
  dnnl::convolution_forward::primitive_desc pd;
  std::string impl;
  bool found = false;
  for (int attempt = 0; attempt < 3 && !found; ++attempt) {
    const bool cl = attempt == 1;
    if (cl && x_md == nhwc(x_md)) continue;  // the caller's layout already is channels-last
    try {
      pd = forward_pd(cl ? nhwc(x_md) : any_like(x_md), any_like(w_md), b_md,
                      cl ? nhwc(y_md) : any_like(y_md), config);
    } catch (const dnnl::error&) {
      continue;  // no such kernel for this problem
    }
    impl = pd.impl_info_str();
    found = impl.find("gemm") == std::string::npos && !onednn::is_reference_impl(pd) &&
            (attempt != 0 || pd.src_desc() == x_md);
  }
  if (!found) return;  // the plain-layout primitive stays
  attach_weights_reorder(e, w_md, pd.weights_desc(), false);
  e.src_md = pd.src_desc();
  e.dst_md = pd.dst_desc();
  e.reorder_src = e.src_md != x_md;
  e.reorder_dst = e.dst_md != y_md;
  if (e.reorder_src) {
    std::tie(e.src_reorder, e.src_reorder_scratchpad_bytes) = make_reorder(x_md, e.src_md);
  }
  if (e.reorder_dst) {
    std::tie(e.dst_reorder, e.dst_reorder_scratchpad_bytes) = make_reorder(e.dst_md, y_md);
  }
  e.impl = impl;
  e.primitive = dnnl::convolution_forward(pd);
  e.scratchpad_bytes = pd.scratchpad_desc().get_size();
}

// ---- the three kernels on oneDNN; false when the dtype has no oneDNN kernel here ----------

bool forward_onednn(const Tensor& out, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, const Conv2dParams& p) {
  const Tensor x = activation_in(input);
  const Tensor w = nn::is_dense_in(weight, nn::layout_of(weight))
                       ? weight
                       : nn::dense_copy(weight, weight.dtype(), nn::layout_of(weight));
  const Tensor b = vector_in(bias);
  nn::OutputStage y = activation_out(out);
  const auto x_md = onednn::desc_of(x, "conv2d"), y_md = onednn::desc_of(y.get(), "conv2d");
  const auto w_md = weights_desc(w, p.groups);
  const auto b_md = b.defined() ? onednn::desc_of(b, "conv2d") : dnnl::memory::desc();
  const ConvConfig config(p);

  onednn::TeamScope team;
  auto entry = onednn::find_or_build_as<ConvEntry>(
      conv_key(onednn::kConvForward, p, {&x, &w, &b, &y.get()}), team, [&] {
        try {
          auto e = build_conv<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward>(
              w_md, false, out.dtype(), [&](const dnnl::memory::desc& wmd) {
                return forward_pd(x_md, wmd, b_md, y_md, config);
              });
          if (e->status == Status::kReady && blocked_forward_pays(e->impl, w)) {
            try_blocked_forward(static_cast<ConvEntry&>(*e), x_md, w_md, b_md, y_md, config);
          }
          return e;
        } catch (const dnnl::error& err) {
          onednn::rethrow(err, "convolution_forward", describe(input, weight, out, p));
        }
      });
  if (entry->status == Status::kDtypeUnsupported) return false;
  try {
    dnnl::memory w_mem = onednn::memory_of(w_md, w);
    if (entry->reorder_weights) {
      dnnl::memory reordered = onednn::scratch_memory(entry->weights_md, 1);
      run_reorder(*entry, w_mem, reordered);
      w_mem = reordered;
    }
    dnnl::memory x_mem = onednn::memory_of(x_md, x);
    if (entry->reorder_src) {  // Note [Activation reorders]
      dnnl::memory reordered = onednn::scratch_memory(entry->src_md, 2);
      if (!onednn::copy_into_memory(x, reordered)) {
        run_reorder(entry->src_reorder, entry->src_reorder_scratchpad_bytes, x_mem, reordered);
      }
      x_mem = reordered;
    }
    const dnnl::memory y_mem = onednn::memory_of(y_md, y.get());
    const dnnl::memory y_used =
        entry->reorder_dst ? onednn::scratch_memory(entry->dst_md, 3) : y_mem;
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, y_used}};
    if (b.defined()) args.emplace(DNNL_ARG_BIAS, onednn::memory_of(b_md, b));
    onednn::execute(*entry, args);
    if (entry->reorder_dst && !onednn::copy_from_memory(y_used, y.get())) {
      run_reorder(entry->dst_reorder, entry->dst_reorder_scratchpad_bytes, y_used, y_mem);
    }
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "convolution_forward", describe(input, weight, out, p));
  }
  y.finish();
  return true;
}

bool backward_input_onednn(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p) {
  const Tensor dy = activation_in(grad_out);
  const Tensor w = nn::is_dense_in(weight, nn::layout_of(weight))
                       ? weight
                       : nn::dense_copy(weight, weight.dtype(), nn::layout_of(weight));
  nn::OutputStage dx = activation_out(grad_input);
  const auto dy_md = onednn::desc_of(dy, "conv2d"), dx_md = onednn::desc_of(dx.get(), "conv2d");
  const auto w_md = weights_desc(w, p.groups);
  const ConvConfig config(p);

  onednn::TeamScope team;
  auto entry = onednn::find_or_build_as<ConvEntry>(
      conv_key(onednn::kConvBackwardData, p, {&dy, &w, &dx.get()}), team, [&] {
        try {
          return build_conv<dnnl::convolution_backward_data::primitive_desc,
                            dnnl::convolution_backward_data>(
              w_md, false, grad_out.dtype(), [&](const dnnl::memory::desc& wmd) {
                const auto hint = forward_pd(dx_md, wmd, dnnl::memory::desc(), dy_md, config);
                const dnnl::convolution_backward_data::desc desc(
                    dnnl::algorithm::convolution_direct, dx_md, wmd, dy_md, config.strides,
                    config.dilates, config.padding, config.padding);
                return dnnl::convolution_backward_data::primitive_desc(desc, onednn::default_attr(),
                                                                       onednn::engine(), hint);
              });
        } catch (const dnnl::error& err) {
          onednn::rethrow(err, "convolution_backward_data",
                          describe(grad_input, weight, grad_out, p));
        }
      });
  if (entry->status == Status::kDtypeUnsupported) return false;
  try {
    dnnl::memory w_mem = onednn::memory_of(w_md, w);
    if (entry->reorder_weights) {
      dnnl::memory reordered = onednn::scratch_memory(entry->weights_md, 1);
      run_reorder(*entry, w_mem, reordered);
      w_mem = reordered;
    }
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_DIFF_DST, onednn::memory_of(dy_md, dy)},
        {DNNL_ARG_WEIGHTS, w_mem},
        {DNNL_ARG_DIFF_SRC, onednn::memory_of(dx_md, dx.get())}};
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "convolution_backward_data", describe(grad_input, weight, grad_out, p));
  }
  dx.finish();
  return true;
}

bool backward_weight_onednn(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& input,
                            const Tensor& grad_out, const Conv2dParams& p) {
  const Tensor x = activation_in(input);
  const Tensor dy = activation_in(grad_out);
  const MemoryFormat wf = nn::layout_of(grad_weight);
  nn::OutputStage dw(grad_weight, nn::is_dense_in(grad_weight, wf), grad_weight.dtype(), wf, false);
  nn::OutputStage db(
      grad_bias, !grad_bias.defined() || grad_bias.stride(0) == 1 || grad_bias.size(0) <= 1,
      grad_bias.defined() ? grad_bias.dtype() : grad_out.dtype(), MemoryFormat::Contiguous, false);
  const auto x_md = onednn::desc_of(x, "conv2d"), dy_md = onednn::desc_of(dy, "conv2d");
  const auto dw_md = weights_desc(dw.get(), p.groups);
  const auto db_md =
      grad_bias.defined() ? onednn::desc_of(db.get(), "conv2d") : dnnl::memory::desc();
  const ConvConfig config(p);
  const Tensor no_bias;

  onednn::TeamScope team;
  auto entry = onednn::find_or_build_as<ConvEntry>(
      conv_key(onednn::kConvBackwardWeights, p,
               {&x, &dy, &dw.get(), grad_bias.defined() ? &db.get() : &no_bias}),
      team, [&] {
        try {
          return build_conv<dnnl::convolution_backward_weights::primitive_desc,
                            dnnl::convolution_backward_weights>(
              dw_md, true, grad_out.dtype(), [&](const dnnl::memory::desc& wmd) {
                const auto hint = forward_pd(x_md, wmd, db_md, dy_md, config);
                const dnnl::convolution_backward_weights::desc desc(
                    dnnl::algorithm::convolution_direct, x_md, wmd, db_md, dy_md, config.strides,
                    config.dilates, config.padding, config.padding);
                return dnnl::convolution_backward_weights::primitive_desc(
                    desc, onednn::default_attr(), onednn::engine(), hint);
              });
        } catch (const dnnl::error& err) {
          onednn::rethrow(err, "convolution_backward_weights",
                          describe(input, grad_weight, grad_out, p));
        }
      });
  if (entry->status == Status::kDtypeUnsupported) return false;
  try {
    const dnnl::memory user_w = onednn::memory_of(dw_md, dw.get());
    const dnnl::memory w_mem =
        entry->reorder_weights ? onednn::scratch_memory(entry->weights_md, 1) : user_w;
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, onednn::memory_of(x_md, x)},
                                               {DNNL_ARG_DIFF_DST, onednn::memory_of(dy_md, dy)},
                                               {DNNL_ARG_DIFF_WEIGHTS, w_mem}};
    if (grad_bias.defined()) args.emplace(DNNL_ARG_DIFF_BIAS, onednn::memory_of(db_md, db.get()));
    onednn::execute(*entry, args);
    if (entry->reorder_weights) run_reorder(*entry, w_mem, user_w);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "convolution_backward_weights", describe(input, grad_weight, grad_out, p));
  }
  dw.finish();
  db.finish();
  return true;
}

// Float32 copies in the operands' own layouts, for float16 without oneDNN float16 kernels.
Tensor as_f32(const Tensor& t) {
  return t.defined() ? nn::dense_copy(t, kFloat32, nn::layout_of(t)) : t;
}
nn::OutputStage f32_out(const Tensor& t) {
  return nn::OutputStage(t, !t.defined(), kFloat32,
                         t.defined() ? nn::layout_of(t) : MemoryFormat::Contiguous, false);
}

}  // namespace

void conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, const Conv2dParams& p) {
  constexpr const char* kOp = "conv2d_forward";
  nn::check_operand(input, kOp, "input");
  nn::check_operand(weight, kOp, "weight");
  nn::check_output(out, kOp, "out");
  const ConvShape s =
      check_conv(kOp, input, "input ([N, C, H, W])", weight, "weight ([O, C / groups, kH, kW])", p);
  nn::check_shape(out, {s.n, s.o, s.oh, s.ow}, kOp, "out", "[N, O, oH, oW]");
  if (bias.defined()) {
    nn::check_operand(bias, kOp, "bias");
    nn::check_shape(bias, {s.o}, kOp, "bias", "[O]");
  }
  check_same_dtype(kOp, input,
                   {{&weight, "weight (input's dtype)"},
                    {&bias, "bias (input's dtype)"},
                    {&out, "out (input's dtype)"}});
  if (out.numel() == 0) return;
  if (s.c == 0) return reference::conv2d_forward(out, input, weight, bias, p);
  if (input.dtype() == kFloat64) {
    return reference::conv2d_forward_f64_gemm(out, input, weight, bias, p);
  }
  if (forward_onednn(out, input, weight, bias, p)) return;
  nn::OutputStage y = f32_out(out);
  forward_onednn(y.get(), as_f32(input), as_f32(weight), as_f32(bias), p);
  y.finish();
}

void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p) {
  constexpr const char* kOp = "conv2d_backward_input";
  nn::check_output(grad_input, kOp, "grad_input");
  nn::check_operand(grad_out, kOp, "grad_out");
  nn::check_operand(weight, kOp, "weight");
  const ConvShape s = check_conv(kOp, grad_input, "grad_input ([N, C, H, W])", weight,
                                 "weight ([O, C / groups, kH, kW])", p);
  nn::check_shape(grad_out, {s.n, s.o, s.oh, s.ow}, kOp, "grad_out", "[N, O, oH, oW]");
  check_same_dtype(
      kOp, grad_out,
      {{&weight, "weight (grad_out's dtype)"}, {&grad_input, "grad_input (grad_out's dtype)"}});
  if (grad_input.numel() == 0) return;
  if (s.o == 0 || s.n == 0) {
    return reference::conv2d_backward_input(grad_input, grad_out, weight, p);
  }
  if (grad_out.dtype() == kFloat64) {
    return reference::conv2d_backward_input_f64_gemm(grad_input, grad_out, weight, p);
  }
  if (backward_input_onednn(grad_input, grad_out, weight, p)) return;
  nn::OutputStage dx = f32_out(grad_input);
  backward_input_onednn(dx.get(), as_f32(grad_out), as_f32(weight), p);
  dx.finish();
}

void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& input,
                            const Tensor& grad_out, const Conv2dParams& p) {
  constexpr const char* kOp = "conv2d_backward_weight";
  nn::check_output(grad_weight, kOp, "grad_weight");
  nn::check_operand(input, kOp, "input");
  nn::check_operand(grad_out, kOp, "grad_out");
  const ConvShape s = check_conv(kOp, input, "input ([N, C, H, W])", grad_weight,
                                 "grad_weight ([O, C / groups, kH, kW])", p);
  nn::check_shape(grad_out, {s.n, s.o, s.oh, s.ow}, kOp, "grad_out", "[N, O, oH, oW]");
  if (grad_bias.defined()) {
    nn::check_output(grad_bias, kOp, "grad_bias");
    nn::check_shape(grad_bias, {s.o}, kOp, "grad_bias", "[O]");
  }
  check_same_dtype(kOp, grad_out,
                   {{&input, "input (grad_out's dtype)"},
                    {&grad_weight, "grad_weight (grad_out's dtype)"},
                    {&grad_bias, "grad_bias (grad_out's dtype)"}});
  if (s.n == 0 || s.c == 0 || s.o == 0) {
    return reference::conv2d_backward_weight(grad_weight, grad_bias, input, grad_out, p);
  }
  if (grad_out.dtype() == kFloat64) {
    return reference::conv2d_backward_weight_f64_gemm(grad_weight, grad_bias, input, grad_out, p);
  }
  if (backward_weight_onednn(grad_weight, grad_bias, input, grad_out, p)) return;
  nn::OutputStage dw = f32_out(grad_weight), db = f32_out(grad_bias);
  backward_weight_onednn(dw.get(), grad_bias.defined() ? db.get() : Tensor(), as_f32(input),
                         as_f32(grad_out), p);
  dw.finish();
  db.finish();
}

}  // namespace ferry::cpu
