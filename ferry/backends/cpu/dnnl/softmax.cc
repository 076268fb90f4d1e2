// cpu::softmax_forward / _backward (and their log variants) on oneDNN's softmax_v2 for float32
// and bfloat16 (float16 through float32 temporaries where oneDNN has no kernel), portable loops
// for float64. The tensor is seen as [outer, axis, inner] (dims before and after `dim` merged);
// when only oneDNN's reference kernel would take the strides given, they are staged densely.
#include <string>
#include <vector>

#include "ferry/backends/cpu/dnnl/dnnl_runtime.h"
#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"

namespace ferry::cpu {
namespace {

using Status = onednn::CachedPrimitive::Status;

// t as [outer, axis, inner] around `dim`, or undefined when the dims do not merge.
Tensor lanes_view(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return t.as_strided({1, 1, 1}, {1, 1, 1});
  const auto outer = nn::merge_dims(t, 0, dim), inner = nn::merge_dims(t, dim + 1, t.dim());
  if (!outer || !inner) return Tensor();
  return t.as_strided({outer->size, t.size(dim), inner->size},
                      {outer->stride, t.stride(dim), inner->stride});
}
Tensor lanes_in(const Tensor& t, int64_t dim) {
  const Tensor v = lanes_view(t, dim);
  return v.defined() ? v : lanes_view(nn::dense_copy(t, t.dtype()), dim);
}
struct StagedLanes {
  nn::OutputStage stage;
  Tensor view;
};
StagedLanes lanes_out(const Tensor& t, int64_t dim) {
  const Tensor v = lanes_view(t, dim);
  if (v.defined()) return {nn::OutputStage(t, Tensor()), v};
  const Tensor staged = nn::host_empty(t.sizes(), t.dtype());
  return {nn::OutputStage(t, staged), lanes_view(staged, dim)};
}

// [outer, axis] when inner == 1 (oneDNN's vectorized kernel wants the axis last), else the 3-d
// view with axis 1.
dnnl::memory::desc lanes_desc(const Tensor& v) {
  auto stride = [&](int d) { return v.size(d) == 1 ? int64_t{1} : v.stride(d); };
  if (v.size(2) == 1) {
    const int64_t outer_stride = v.size(0) == 1 ? v.size(1) * stride(1) : v.stride(0);
    return onednn::desc_of(v, {v.size(0), v.size(1)}, {outer_stride, stride(1)}, "softmax");
  }
  return onednn::desc_of(v, v.sizes(), v.strides(), "softmax");
}

std::string describe(const Tensor& x, int64_t dim) {
  return "input " + nn::shape_str(x) + " strides " + nn::shape_str(x.strides()) + ", dim " +
         std::to_string(dim) + ", dtype " + std::string(scalar_type_name(x.dtype()));
}

enum class SoftmaxOutcome { kDone, kDtypeUnsupported, kPrefersDense };

bool lanes_dense(const Tensor& v) { return v.is_contiguous() && !v.is_neg() && !v.is_conj(); }
Tensor dense_lanes(const Tensor& v, ScalarType dtype) { return nn::dense_copy(v, dtype); }

// Forward (x -> y) or backward (dy, y -> dx) over [outer, axis, inner] views of one dtype.
SoftmaxOutcome softmax_onednn(bool backward, bool log, const Tensor& result, const Tensor& a,
                              const Tensor& b, bool stage_all, const char* what) {
  const Tensor a_used = stage_all && !lanes_dense(a) ? dense_lanes(a, a.dtype()) : a;
  const Tensor b_used = b.defined() && stage_all && !lanes_dense(b) ? dense_lanes(b, b.dtype()) : b;
  nn::OutputStage r(result, stage_all && !lanes_dense(result)
                                ? nn::host_empty(result.sizes(), result.dtype())
                                : Tensor());
  const auto a_md = lanes_desc(a_used), r_md = lanes_desc(r.get());
  const auto b_md = b.defined() ? lanes_desc(b_used) : dnnl::memory::desc();
  const int axis = 1;
  const dnnl::algorithm alg =
      log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  const char* name = backward ? "softmax_v2_backward" : "softmax_v2_forward";

  onednn::TeamScope team;
  onednn::CacheKey key(backward ? onednn::kSoftmaxBackward : onednn::kSoftmaxForward);
  key.add(a_used).add(b_used).add(r.get()).add(log ? 1 : 0);
  auto entry = onednn::find_or_build(key, team, [&] {
    auto e = std::make_shared<onednn::CachedPrimitive>();
    try {
      dnnl::primitive_desc_base chosen;
      if (backward) {  // a = dy, b = y, result = dx
        const dnnl::softmax_v2_forward::desc hint_desc(dnnl::prop_kind::forward_training, alg, b_md,
                                                       b_md, axis);
        const dnnl::softmax_v2_forward::primitive_desc hint(hint_desc, onednn::engine());
        const dnnl::softmax_v2_backward::desc desc(alg, r_md, a_md, b_md, axis);
        const dnnl::softmax_v2_backward::primitive_desc pd(desc, onednn::default_attr(),
                                                           onednn::engine(), hint);
        e->primitive = dnnl::softmax_v2_backward(pd);
        chosen = pd;
      } else {
        const dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, a_md,
                                                  r_md, axis);
        const dnnl::softmax_v2_forward::primitive_desc pd(desc, onednn::default_attr(),
                                                          onednn::engine());
        e->primitive = dnnl::softmax_v2_forward(pd);
        chosen = pd;
      }
      e->scratchpad_bytes = chosen.scratchpad_desc().get_size();
      e->impl = chosen.impl_info_str();
      const bool all_dense =
          lanes_dense(a_used) && lanes_dense(r.get()) && (!b.defined() || lanes_dense(b_used));
      // A strided layout that reaches only the reference kernel is staged; a dense one that
      // does (a softmax over a non-last dim) stays: staging would not change the kernel.
      if (onednn::is_reference_impl(chosen) && !all_dense) {
        e->status = Status::kPrefersDense;
      }
    } catch (const dnnl::error& err) {
      if (err.status == dnnl_unimplemented && a.dtype() == kFloat16) {
        e->status = Status::kDtypeUnsupported;
        return e;
      }
      onednn::rethrow(err, name, what);
    }
    return e;
  });
  if (entry->status == Status::kDtypeUnsupported) return SoftmaxOutcome::kDtypeUnsupported;
  if (entry->status == Status::kPrefersDense) return SoftmaxOutcome::kPrefersDense;
  std::unordered_map<int, dnnl::memory> args;
  if (backward) {
    args = {{DNNL_ARG_DIFF_DST, onednn::memory_of(a_md, a_used)},
            {DNNL_ARG_DST, onednn::memory_of(b_md, b_used)},
            {DNNL_ARG_DIFF_SRC, onednn::memory_of(r_md, r.get())}};
  } else {
    args = {{DNNL_ARG_SRC, onednn::memory_of(a_md, a_used)},
            {DNNL_ARG_DST, onednn::memory_of(r_md, r.get())}};
  }
  try {
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, name, what);
  }
  r.finish();
  return SoftmaxOutcome::kDone;
}

void run_softmax(bool backward, bool log, const Tensor& result, const Tensor& a, const Tensor& b,
                 const std::string& what) {
  SoftmaxOutcome o = softmax_onednn(backward, log, result, a, b, false, what.c_str());
  if (o == SoftmaxOutcome::kPrefersDense)
    o = softmax_onednn(backward, log, result, a, b, true, what.c_str());
  if (o != SoftmaxOutcome::kDtypeUnsupported) return;
  nn::OutputStage r32(result, nn::host_empty(result.sizes(), kFloat32));
  softmax_onednn(backward, log, r32.get(), dense_lanes(a, kFloat32),
                 b.defined() ? dense_lanes(b, kFloat32) : b, false, what.c_str());
  r32.finish();
}

// `t` with dim `d` moved last (a view).
Tensor axis_last(const Tensor& t, int64_t d) {
  std::vector<int64_t> order;
  for (int64_t k = 0; k < t.dim(); ++k) {
    if (k != d) order.push_back(k);
  }
  order.push_back(d);
  return t.permute(order);
}

// Whether the softmax axis has elements after it (inner > 1): oneDNN 2.6 then has only its
// reference kernel, 60x slower than PyTorch on [1000, 256] over dim 0, so the axis is moved last
// by the copy engine first (and the result moved back): three passes of memory instead.
bool axis_inside(const Tensor& t, int64_t d) {
  int64_t inner = 1;
  for (int64_t k = d + 1; k < t.dim(); ++k) inner *= t.size(k);
  return inner > 1;
}

void check_float(const char* op, const Tensor& t, const char* name) {
  FERRY_CHECK_AS(DTypeError,
                 t.dtype() == kFloat32 || t.dtype() == kBFloat16 || t.dtype() == kFloat16 ||
                     t.dtype() == kFloat64,
                 op, ": expected ", name,
                 " of dtype float32, bfloat16, float16 or float64, but got ", t.dtype());
}

}  // namespace

void softmax_forward(const Tensor& out, const Tensor& input, int64_t dim, bool log) {
  const char* op = log ? "log_softmax_forward" : "softmax_forward";
  nn::check_operand(input, op, "input");
  nn::check_output(out, op, "out");
  check_float(op, input, "input");
  nn::check_shape(out, input.sizes(), op, "out (input's shape)");
  nn::check_dtype(out, input.dtype(), op, "out (input's dtype)");
  const int64_t d = wrap_dim(dim, input.dim(), op);
  if (input.numel() == 0) return;
  if (input.dtype() != kFloat64 && axis_inside(input, d)) {
    const Tensor x_last = nn::dense_copy(axis_last(input, d), input.dtype());
    const Tensor y_last = nn::host_empty(x_last.sizes(), x_last.dtype());
    softmax_forward(y_last, x_last, x_last.dim() - 1, log);
    axis_last(out, d).copy_(y_last);
    return;
  }
  const Tensor x = lanes_in(input, d);
  StagedLanes y = lanes_out(out, d);
  if (input.dtype() == kFloat64) {
    reference::softmax_forward(y.view, x, log);
  } else {
    run_softmax(false, log, y.view, x, Tensor(), describe(input, d));
  }
  y.stage.finish();
}

void softmax_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& output,
                      int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  nn::check_output(grad_input, op, "grad_input");
  nn::check_operand(grad_out, op, "grad_out");
  nn::check_operand(output, op, "output");
  check_float(op, output, "output");
  nn::check_shape(grad_out, output.sizes(), op, "grad_out (output's shape)");
  nn::check_shape(grad_input, output.sizes(), op, "grad_input (output's shape)");
  nn::check_dtype(grad_out, output.dtype(), op, "grad_out (output's dtype)");
  nn::check_dtype(grad_input, output.dtype(), op, "grad_input (output's dtype)");
  const int64_t d = wrap_dim(dim, output.dim(), op);
  if (output.numel() == 0) return;
  if (output.dtype() != kFloat64 && axis_inside(output, d)) {
    const Tensor dy_last = nn::dense_copy(axis_last(grad_out, d), grad_out.dtype());
    const Tensor y_last = nn::dense_copy(axis_last(output, d), output.dtype());
    const Tensor dx_last = nn::host_empty(y_last.sizes(), y_last.dtype());
    softmax_backward(dx_last, dy_last, y_last, y_last.dim() - 1, log);
    axis_last(grad_input, d).copy_(dx_last);
    return;
  }
  const Tensor dy = lanes_in(grad_out, d), y = lanes_in(output, d);
  StagedLanes dx = lanes_out(grad_input, d);
  if (output.dtype() == kFloat64) {
    reference::softmax_backward(dx.view, dy, y, log);
  } else {
    run_softmax(true, log, dx.view, dy, y, describe(output, d));
  }
  dx.stage.finish();
}

}  // namespace ferry::cpu
