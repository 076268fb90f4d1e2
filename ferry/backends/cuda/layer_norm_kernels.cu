// The CUDA layer normalization kernels on inputs seen as [R, D] (leading dims merged into rows,
// normalized dims into one; staged through a dense copy when their strides do not merge). One
// block per row computes two-pass statistics (the mean, then the mean squared deviation) and
// writes the row; the backward pass computes grad_input per row, and grad_weight/grad_bias as
// column sums over row splits combined in split order (deterministic). Accumulation in float
// (double for float64); rstd = 1 / sqrt(var + eps) in double, as the CPU kernels.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/device_reduce.cuh"
#include "ferry/backends/cuda/nn_shapes.h"
#include "ferry/backends/cuda/reduce_plan.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cuda {
namespace {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A [R, D] matrix's element strides.
struct Rows {
  int64_t rows, cols, sr, sc;
};

template <typename T, typename Acc>
__global__ void forward_kernel(const T* x, Rows xg, T* y, Rows yg, const Acc* w, const Acc* b,
                               Acc* mean, Acc* rstd, double eps) {
  Acc* scratch = shared_values<Acc>();
  const Acc cols = static_cast<Acc>(xg.cols);
  for (int64_t r = blockIdx.x; r < xg.rows; r += gridDim.x) {
    const T* xr = x + r * xg.sr;
    Acc sum = 0;
    for (int64_t d = threadIdx.x; d < xg.cols; d += blockDim.x)
      sum += static_cast<Acc>(xr[d * xg.sc]);
    const Acc mu = block_sum(sum, scratch) / cols;
    Acc sq = 0;
    for (int64_t d = threadIdx.x; d < xg.cols; d += blockDim.x) {
      const Acc v = static_cast<Acc>(xr[d * xg.sc]) - mu;
      sq += v * v;
    }
    const Acc var = block_sum(sq, scratch) / cols;
    const Acc inv = static_cast<Acc>(1.0 / ::sqrt(static_cast<double>(var) + eps));
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = inv;
    }
    T* yr = y + r * yg.sr;
    for (int64_t d = threadIdx.x; d < xg.cols; d += blockDim.x) {
      const Acc v = (static_cast<Acc>(xr[d * xg.sc]) - mu) * inv;
      yr[d * yg.sc] = static_cast<T>(v * (w ? w[d] : Acc(1)) + (b ? b[d] : Acc(0)));
    }
  }
}

template <typename T, typename Acc>
__global__ void backward_input_kernel(const T* x, Rows xg, const T* dy, Rows dg, T* dx, Rows og,
                                      const Acc* w, const Acc* mean, const Acc* rstd) {
  Acc* scratch = shared_values<Acc>();
  const Acc inv_d = Acc(1) / static_cast<Acc>(xg.cols);
  for (int64_t r = blockIdx.x; r < xg.rows; r += gridDim.x) {
    const T* xr = x + r * xg.sr;
    const T* gr = dy + r * dg.sr;
    const Acc mu = mean[r], inv = rstd[r];
    Acc a = 0, b = 0;
    for (int64_t d = threadIdx.x; d < xg.cols; d += blockDim.x) {
      const Acc gw = static_cast<Acc>(gr[d * dg.sc]) * (w ? w[d] : Acc(1));
      a += gw;
      b += gw * (static_cast<Acc>(xr[d * xg.sc]) - mu) * inv;
    }
    a = block_sum(a, scratch);
    b = block_sum(b, scratch);
    T* out = dx + r * og.sr;
    for (int64_t d = threadIdx.x; d < xg.cols; d += blockDim.x) {
      const Acc xhat = (static_cast<Acc>(xr[d * xg.sc]) - mu) * inv;
      const Acc gw = static_cast<Acc>(gr[d * dg.sc]) * (w ? w[d] : Acc(1));
      out[d * og.sc] = static_cast<T>(inv * (gw - a * inv_d - xhat * b * inv_d));
    }
  }
}

template <typename Acc>
struct Pair {
  Acc w, b;
};

constexpr int kColumns = 32;  // columns per block of the parameter-gradient kernel
constexpr int kRowLanes = 8;  // row lanes per column

// Grid (column blocks, splits), block (kColumns, kRowLanes): partial sums over rows
// [split * per_split, (split + 1) * per_split) of dy * xhat and dy per column.
template <typename T, typename Acc>
__global__ void param_sums_kernel(const T* x, Rows xg, const T* dy, Rows dg, const Acc* mean,
                                  const Acc* rstd, int64_t per_split, Pair<Acc>* partial) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * per_split;
  const int64_t end = begin + per_split < xg.rows ? begin + per_split : xg.rows;
  Pair<Acc> p{0, 0};
  if (col < xg.cols) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) {
      const Acc g = static_cast<Acc>(dy[r * dg.sr + col * dg.sc]);
      p.w += g * (static_cast<Acc>(x[r * xg.sr + col * xg.sc]) - mean[r]) * rstd[r];
      p.b += g;
    }
  }
  Pair<Acc>* values = shared_values<Pair<Acc>>();
  values[threadIdx.x * kRowLanes + threadIdx.y] = p;
  block_combine(values, kRowLanes, static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y),
                [](const Pair<Acc>& u, const Pair<Acc>& v) {
                  return Pair<Acc>{u.w + v.w, u.b + v.b};
                });
  if (threadIdx.y == 0 && col < xg.cols) {
    partial[static_cast<int64_t>(blockIdx.y) * xg.cols + col] = values[threadIdx.x * kRowLanes];
  }
}

template <typename Acc>
__global__ void param_finish_kernel(const Pair<Acc>* partial, int splits, int64_t cols,
                                    Acc* grad_weight, Acc* grad_bias) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  Pair<Acc> s = partial[col];
  for (int i = 1; i < splits; ++i) {
    s.w += partial[i * cols + col].w;
    s.b += partial[i * cols + col].b;
  }
  if (grad_weight != nullptr) grad_weight[col] = s.w;
  if (grad_bias != nullptr) grad_bias[col] = s.b;
}

// ---- host side -------------------------------------------------------------------------------

// t as [R, D] split after dim `split`, or undefined when the dims do not merge.
Tensor rows_view(const Tensor& t, int64_t split) {
  if (t.is_neg()) return Tensor();
  const auto rows = merge_dims(t.sizes(), t.strides(), 0, split);
  const auto cols = merge_dims(t.sizes(), t.strides(), split, t.dim());
  if (!rows || !cols) return Tensor();
  return t.as_strided({rows->size, cols->size}, {rows->stride, cols->stride}, t.storage_offset());
}
Tensor input_rows(const Tensor& t, int64_t split) {
  const Tensor v = rows_view(t, split);
  return v.defined() ? v : rows_view(dense_as(t, t.dtype()), split);
}
struct OutputRows {
  OutputStage stage;
  Tensor view;
};
OutputRows output_rows(const Tensor& t, int64_t split) {
  if (Tensor v = rows_view(t, split); v.defined()) return {OutputStage(), v};
  OutputRows o{OutputStage(t, t.dtype(), MemoryFormat::Contiguous, false), Tensor()};
  o.view = rows_view(o.stage.get(), split);
  return o;
}
Rows rows_of(const Tensor& v) { return {v.size(0), v.size(1), v.stride(0), v.stride(1)}; }

template <typename Acc>
const Acc* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const Acc*>(t.const_data_ptr()) : nullptr;
}
template <typename Acc>
Acc* mut_ptr(const Tensor& t) {
  return t.defined() ? static_cast<Acc*>(t.data_ptr()) : nullptr;
}

// Threads per row block: a power of two in [32, 256], about the row length.
int row_threads(int64_t cols) { return std::max(32, pow2_at_most(cols, kThreads)); }
unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(rows, 1), kMaxBlocks * 16));
}

struct LnShape {
  int64_t split, rows, cols;
  ScalarType stat;
};

LnShape check_ln(const char* op, const Tensor& input, int64_t normalized_ndim) {
  check_nn_float(input, op, "input");
  FERRY_CHECK_AS(ShapeError, normalized_ndim >= 1 && normalized_ndim <= input.dim(), op,
                 ": expected normalized_ndim in [1, ", input.dim(), "] for input ",
                 shape_str(input), ", but got ", normalized_ndim);
  const int64_t split = input.dim() - normalized_ndim;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < input.dim(); ++d) (d < split ? rows : cols) *= input.size(d);
  return {split, rows, cols, is_reduced_floating_point(input.dtype()) ? kFloat32 : input.dtype()};
}

void check_param(const char* op, const Tensor& t, const char* name, const Tensor& input,
                 const LnShape& s, bool is_output) {
  if (!t.defined()) return;
  check_shape(t, input.sizes().slice(static_cast<size_t>(s.split)), op, name);
  FERRY_CHECK_AS(DTypeError, t.dtype() == input.dtype() || t.dtype() == s.stat, op, ": expected ",
                 name, " of dtype ", input.dtype(), ", but got ", t.dtype());
  if (is_output) check_output(t, op, name);
}

void check_stat(const char* op, const Tensor& t, const char* name, const LnShape& s,
                bool is_output) {
  FERRY_CHECK_AS(ShapeError, t.defined() && t.numel() == s.rows, op, ": expected ", name, " with ",
                 s.rows, " elements (one per row), but got shape ", shape_str(t));
  check_dtype(t, s.stat, op, name);
  if (is_output) check_output(t, op, name);
}

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

void cuda_layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                             const Tensor& input, const Tensor& weight, const Tensor& bias,
                             int64_t normalized_ndim, double eps) {
  constexpr const char* kOp = "layer_norm_forward";
  const int device = operands_device(kOp, {{&out, "out"},
                                           {&mean, "mean"},
                                           {&rstd, "rstd"},
                                           {&input, "input"},
                                           {&weight, "weight"},
                                           {&bias, "bias"}});
  const LnShape s = check_ln(kOp, input, normalized_ndim);
  check_shape(out, input.sizes(), kOp, "out (input's shape)");
  check_dtype(out, input.dtype(), kOp, "out (input's dtype)");
  check_output(out, kOp, "out");
  check_stat(kOp, mean, "mean", s, true);
  check_stat(kOp, rstd, "rstd", s, true);
  check_param(kOp, weight, "weight", input, s, false);
  check_param(kOp, bias, "bias", input, s, false);
  if (input.numel() == 0) return;
  BelowAutograd below;
  const LaunchScope scope(device);
  const ScalarType acc = s.stat;
  const Tensor x = input_rows(input, s.split);
  OutputRows y = output_rows(out, s.split);
  OutputStage m(mean, acc, MemoryFormat::Contiguous, false);
  OutputStage r(rstd, acc, MemoryFormat::Contiguous, false);
  const Tensor w = dense_as(weight, acc), b = dense_as(bias, acc);
  const int threads = row_threads(s.cols);
  visit_float(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = acc_t<T>;
    forward_kernel<T, Acc><<<row_blocks(s.rows), threads, threads * sizeof(Acc), scope.stream()>>>(
        static_cast<const T*>(x.const_data_ptr()), rows_of(x), static_cast<T*>(y.view.data_ptr()),
        rows_of(y.view), ptr<Acc>(w), ptr<Acc>(b), mut_ptr<Acc>(m.get()), mut_ptr<Acc>(r.get()),
        eps);
    check_launch(scope.device(), "layer_norm kernel");
  });
  y.stage.finish();
  m.finish();
  r.finish();
}

void cuda_layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                              const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                              const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                              int64_t normalized_ndim) {
  constexpr const char* kOp = "layer_norm_backward";
  const int device = operands_device(kOp, {{&grad_input, "grad_input"},
                                           {&grad_weight, "grad_weight"},
                                           {&grad_bias, "grad_bias"},
                                           {&grad_out, "grad_out"},
                                           {&input, "input"},
                                           {&mean, "mean"},
                                           {&rstd, "rstd"},
                                           {&weight, "weight"}});
  const LnShape s = check_ln(kOp, input, normalized_ndim);
  check_shape(grad_out, input.sizes(), kOp, "grad_out (input's shape)");
  check_dtype(grad_out, input.dtype(), kOp, "grad_out (input's dtype)");
  if (grad_input.defined()) {
    check_shape(grad_input, input.sizes(), kOp, "grad_input (input's shape)");
    check_dtype(grad_input, input.dtype(), kOp, "grad_input (input's dtype)");
    check_output(grad_input, kOp, "grad_input");
  }
  check_stat(kOp, mean, "mean", s, false);
  check_stat(kOp, rstd, "rstd", s, false);
  check_param(kOp, weight, "weight", input, s, false);
  check_param(kOp, grad_weight, "grad_weight", input, s, true);
  check_param(kOp, grad_bias, "grad_bias", input, s, true);
  BelowAutograd below;
  if (input.numel() == 0) {
    if (grad_weight.defined()) Tensor(grad_weight).zero_();
    if (grad_bias.defined()) Tensor(grad_bias).zero_();
    return;
  }
  if (!grad_input.defined() && !grad_weight.defined() && !grad_bias.defined()) return;
  const LaunchScope scope(device);
  const ScalarType acc = s.stat;
  const Tensor x = input_rows(input, s.split), dy = input_rows(grad_out, s.split);
  const Tensor m = dense_as(mean, acc), r = dense_as(rstd, acc), w = dense_as(weight, acc);
  visit_float(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = acc_t<T>;
    if (grad_input.defined()) {
      OutputRows dx = output_rows(grad_input, s.split);
      const int threads = row_threads(s.cols);
      backward_input_kernel<T, Acc>
          <<<row_blocks(s.rows), threads, threads * sizeof(Acc), scope.stream()>>>(
              static_cast<const T*>(x.const_data_ptr()), rows_of(x),
              static_cast<const T*>(dy.const_data_ptr()), rows_of(dy),
              static_cast<T*>(dx.view.data_ptr()), rows_of(dx.view), ptr<Acc>(w), ptr<Acc>(m),
              ptr<Acc>(r));
      check_launch(scope.device(), "layer_norm_backward kernel");
      dx.stage.finish();
    }
    if (!grad_weight.defined() && !grad_bias.defined()) return;
    OutputStage gw(grad_weight, acc, MemoryFormat::Contiguous, false);
    OutputStage gb(grad_bias, acc, MemoryFormat::Contiguous, false);
    const int64_t column_blocks = (s.cols + kColumns - 1) / kColumns;
    const int splits =
        splits_for(column_blocks, s.rows, kRowLanes, 4 * int64_t{scope.multiprocessors()});
    const int64_t per_split = (s.rows + splits - 1) / splits;
    const Tensor partial = device_empty({splits * s.cols * static_cast<int64_t>(sizeof(Pair<Acc>))},
                                        kUInt8, scope.device());
    auto* partial_ptr = static_cast<Pair<Acc>*>(partial.data_ptr());
    param_sums_kernel<T, Acc>
        <<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(splits)),
           dim3(kColumns, kRowLanes), kColumns * kRowLanes * sizeof(Pair<Acc>), scope.stream()>>>(
            static_cast<const T*>(x.const_data_ptr()), rows_of(x),
            static_cast<const T*>(dy.const_data_ptr()), rows_of(dy), ptr<Acc>(m), ptr<Acc>(r),
            per_split, partial_ptr);
    check_launch(scope.device(), "layer_norm_backward parameter kernel");
    param_finish_kernel<Acc><<<blocks_for(s.cols), kThreads, 0, scope.stream()>>>(
        partial_ptr, splits, s.cols, mut_ptr<Acc>(gw.get()), mut_ptr<Acc>(gb.get()));
    check_launch(scope.device(), "layer_norm_backward parameter kernel");
    gw.finish();
    gb.finish();
  });
}

}  // namespace

FERRY_REGISTER_DISPATCH(layer_norm_forward_stub, DeviceType::CUDA, &cuda_layer_norm_forward);
FERRY_REGISTER_DISPATCH(layer_norm_backward_stub, DeviceType::CUDA, &cuda_layer_norm_backward);

}  // namespace ferry::cuda
