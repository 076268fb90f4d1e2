// The CUDA batch normalization kernels (training and inference forward, backward) on inputs of
// any rank >= 2 seen as [N, C, S] (the spatial dims merged; staged through a dense copy when
// their strides do not merge), NCHW or channels-last. Per-channel statistics are Welford partials
// (welford.h, host-tested) of blocks that split each channel's N * S elements, combined per
// channel in split order: deterministic. Accumulation in float (double for float64); invstd and
// the running statistics (the variance unbiased, n / (n - 1)) in double, as the CPU kernels.
// cuDNN's batch norm is not used: its legacy API is deprecated in cuDNN 9, needs eps >= 1e-5 and
// float32 affine parameters, and ferry would need these kernels for the rest anyway.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/device_reduce.cuh"
#include "ferry/backends/cuda/nn_shapes.h"
#include "ferry/backends/cuda/welford.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cuda {
namespace {

// [N, C, S] sizes and element strides.
struct Ncs {
  int64_t n, c, s;
  int64_t sn, sc, ss;
  __device__ int64_t at(int64_t in, int64_t ic, int64_t is) const {
    return in * sn + ic * sc + is * ss;
  }
};

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename Acc>
struct Sums {
  Acc dy;
  Acc dy_xhat;
};

// Grid (C, splits): partial statistics of channel blockIdx.x over elements
// [split * per_split, (split + 1) * per_split) of its N * S (n slower than s).
template <typename T, typename Acc>
__global__ void stats_kernel(const T* x, Ncs g, int64_t per_split, Welford<Acc>* partial) {
  const int64_t c = blockIdx.x, count = g.n * g.s;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * per_split;
  const int64_t end = begin + per_split < count ? begin + per_split : count;
  Welford<Acc> w;
  for (int64_t l = begin + threadIdx.x; l < end; l += blockDim.x) {
    const int64_t n = l / g.s;
    w.add(static_cast<Acc>(x[g.at(n, c, l - n * g.s)]));
  }
  Welford<Acc>* values = shared_values<Welford<Acc>>();
  values[threadIdx.x] = w;
  block_combine(values, static_cast<int>(blockDim.x), 0, static_cast<int>(threadIdx.x),
                [](const Welford<Acc>& a, const Welford<Acc>& b) { return welford_combine(a, b); });
  if (threadIdx.x == 0) partial[c * gridDim.y + blockIdx.y] = values[0];
}

// Vectors of the per-channel kernels ([C], dense, Acc; null when not given).
template <typename Acc>
struct ChannelVectors {
  const Acc* weight;
  const Acc* bias;
  Acc* save_mean;
  Acc* save_invstd;
  Acc* running_mean;
  Acc* running_var;
  Acc* scale;  // out: weight * invstd
  Acc* shift;  // out: bias - mean * scale
};

// One thread per channel: the batch statistics from the splits, the running statistics, and
// the affine map y = x * scale + shift.
template <typename Acc>
__global__ void finish_training_kernel(const Welford<Acc>* partial, int splits, int64_t channels,
                                       double eps, double momentum, ChannelVectors<Acc> v) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  Welford<Acc> w = partial[c * splits];
  for (int s = 1; s < splits; ++s) w = welford_combine(w, partial[c * splits + s]);
  const double mean = static_cast<double>(w.mean), var = static_cast<double>(w.variance());
  const double invstd = 1.0 / ::sqrt(var + eps);
  v.save_mean[c] = static_cast<Acc>(mean);
  v.save_invstd[c] = static_cast<Acc>(invstd);
  const double n = static_cast<double>(w.count);
  if (v.running_mean != nullptr) {
    v.running_mean[c] =
        static_cast<Acc>((1 - momentum) * static_cast<double>(v.running_mean[c]) + momentum * mean);
  }
  if (v.running_var != nullptr) {
    v.running_var[c] = static_cast<Acc>((1 - momentum) * static_cast<double>(v.running_var[c]) +
                                        momentum * var * n / (n - 1));
  }
  const double scale = (v.weight ? static_cast<double>(v.weight[c]) : 1.0) * invstd;
  v.scale[c] = static_cast<Acc>(scale);
  v.shift[c] = static_cast<Acc>((v.bias ? static_cast<double>(v.bias[c]) : 0.0) - mean * scale);
}

template <typename Acc>
__global__ void finish_inference_kernel(const Acc* running_mean, const Acc* running_var,
                                        int64_t channels, double eps, ChannelVectors<Acc> v) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const double invstd = 1.0 / ::sqrt(static_cast<double>(running_var[c]) + eps);
  const double scale = (v.weight ? static_cast<double>(v.weight[c]) : 1.0) * invstd;
  v.scale[c] = static_cast<Acc>(scale);
  v.shift[c] = static_cast<Acc>((v.bias ? static_cast<double>(v.bias[c]) : 0.0) -
                                static_cast<double>(running_mean[c]) * scale);
}

// y = x * scale[c] + shift[c], one thread per element.
template <typename T, typename Acc>
__global__ void apply_kernel(const T* x, Ncs xg, T* y, Ncs yg, const Acc* scale, const Acc* shift) {
  const int64_t total = xg.n * xg.c * xg.s;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t s = e % xg.s, rest = e / xg.s, c = rest % xg.c, n = rest / xg.c;
    y[yg.at(n, c, s)] = static_cast<T>(static_cast<Acc>(x[xg.at(n, c, s)]) * scale[c] + shift[c]);
  }
}

// Grid (C, splits): partial sums of dy and dy * (x - mean) * invstd.
template <typename T, typename Acc>
__global__ void backward_sums_kernel(const T* x, Ncs xg, const T* dy, Ncs dg, const Acc* mean,
                                     const Acc* invstd, int64_t per_split, Sums<Acc>* partial) {
  const int64_t c = blockIdx.x, count = xg.n * xg.s;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * per_split;
  const int64_t end = begin + per_split < count ? begin + per_split : count;
  const Acc mu = mean[c], inv = invstd[c];
  Sums<Acc> sums{0, 0};
  for (int64_t l = begin + threadIdx.x; l < end; l += blockDim.x) {
    const int64_t n = l / xg.s, s = l - n * xg.s;
    const Acc g = static_cast<Acc>(dy[dg.at(n, c, s)]);
    sums.dy += g;
    sums.dy_xhat += g * (static_cast<Acc>(x[xg.at(n, c, s)]) - mu) * inv;
  }
  Sums<Acc>* values = shared_values<Sums<Acc>>();
  values[threadIdx.x] = sums;
  block_combine(values, static_cast<int>(blockDim.x), 0, static_cast<int>(threadIdx.x),
                [](const Sums<Acc>& a, const Sums<Acc>& b) {
                  return Sums<Acc>{a.dy + b.dy, a.dy_xhat + b.dy_xhat};
                });
  if (threadIdx.x == 0) partial[c * gridDim.y + blockIdx.y] = values[0];
}

// dx = a * dy + b + k * (x - mean), per channel.
template <typename Acc>
struct Coefficients {
  Acc a, b, k;
};

template <typename Acc>
__global__ void backward_finish_kernel(const Sums<Acc>* partial, int splits, int64_t channels,
                                       int64_t count, const Acc* weight, const Acc* invstd,
                                       bool training, Acc* grad_weight, Acc* grad_bias,
                                       Coefficients<Acc>* coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  Sums<Acc> s{0, 0};
  if (partial != nullptr) {
    for (int i = 0; i < splits; ++i) {
      s.dy += partial[c * splits + i].dy;
      s.dy_xhat += partial[c * splits + i].dy_xhat;
    }
  }
  if (grad_weight != nullptr) grad_weight[c] = s.dy_xhat;
  if (grad_bias != nullptr) grad_bias[c] = s.dy;
  const Acc inv = invstd[c];
  const Acc a = (weight ? weight[c] : Acc(1)) * inv;
  const Acc inv_count = Acc(1) / static_cast<Acc>(count);
  coef[c] = training ? Coefficients<Acc>{a, -a * s.dy * inv_count, -a * inv * s.dy_xhat * inv_count}
                     : Coefficients<Acc>{a, Acc(0), Acc(0)};
}

template <typename T, typename Acc>
__global__ void backward_apply_kernel(const T* x, Ncs xg, const T* dy, Ncs dg, T* dx, Ncs og,
                                      const Acc* mean, const Coefficients<Acc>* coef) {
  const int64_t total = xg.n * xg.c * xg.s;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t s = e % xg.s, rest = e / xg.s, c = rest % xg.c, n = rest / xg.c;
    const Coefficients<Acc> k = coef[c];
    const Acc g = static_cast<Acc>(dy[dg.at(n, c, s)]);
    const Acc xc = static_cast<Acc>(x[xg.at(n, c, s)]) - mean[c];
    dx[og.at(n, c, s)] = static_cast<T>(k.a * g + k.b + k.k * xc);
  }
}

// ---- host side -------------------------------------------------------------------------------

// t as [N, C, S], or undefined when its spatial dims do not merge.
Tensor ncs_view(const Tensor& t) {
  const auto merged = merge_dims(t.sizes(), t.strides(), 2, t.dim());
  if (!merged) return Tensor();
  return t.as_strided({t.size(0), t.size(1), merged->size},
                      {t.stride(0), t.stride(1), merged->stride}, t.storage_offset());
}
Ncs ncs_of(const Tensor& v) {
  return {v.size(0), v.size(1), v.size(2), v.stride(0), v.stride(1), v.stride(2)};
}
Tensor input_ncs(const Tensor& t) {
  const Tensor v = t.is_neg() ? Tensor() : ncs_view(t);
  return v.defined() ? v : ncs_view(dense_as(t, t.dtype()));
}
// An output's [N, C, S] view, through a dense temporary when its dims do not merge.
struct OutputNcs {
  OutputStage stage;
  Tensor view;
};
OutputNcs output_ncs(const Tensor& t) {
  if (Tensor v = ncs_view(t); v.defined()) return {OutputStage(), v};
  OutputNcs o{OutputStage(t, t.dtype(), MemoryFormat::Contiguous, false), Tensor()};
  o.view = ncs_view(o.stage.get());
  return o;
}

ScalarType acc_dtype(ScalarType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

template <typename Acc>
const Acc* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const Acc*>(t.const_data_ptr()) : nullptr;
}
template <typename Acc>
Acc* mut_ptr(const Tensor& t) {
  return t.defined() ? static_cast<Acc*>(t.data_ptr()) : nullptr;
}

struct BnShape {
  int64_t c, count;
  ScalarType stat;
};

BnShape check_bn(const char* op, const Tensor& input) {
  FERRY_CHECK_AS(ShapeError, input.dim() >= 2, op,
                 ": expected input of rank >= 2 ([N, C, ...]), but got ", shape_str(input));
  check_nn_float(input, op, "input");
  const int64_t c = input.size(1);
  return {c, c == 0 ? 0 : input.numel() / c,
          is_reduced_floating_point(input.dtype()) ? kFloat32 : input.dtype()};
}

// A [C] vector of the statistics dtype (affine parameters may also have the input's).
void check_vector(const char* op, const Tensor& t, const char* name, const BnShape& s,
                  ScalarType input_dtype, bool is_output) {
  if (!t.defined()) return;
  check_shape(t, {s.c}, op, name);
  FERRY_CHECK_AS(DTypeError, t.dtype() == s.stat || t.dtype() == input_dtype, op, ": expected ",
                 name, " of dtype ", s.stat, ", but got ", t.dtype());
  if (is_output) check_output(t, op, name);
}

template <typename T>
void forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
             bool training, const Tensor& save_mean, const Tensor& save_invstd,
             const Tensor& running_mean, const Tensor& running_var, double momentum, double eps,
             const LaunchScope& scope) {
  using Acc = acc_t<T>;
  const ScalarType acc = acc_dtype(input.dtype());
  const Tensor x = input_ncs(input);
  OutputNcs y = output_ncs(out);
  const Ncs g = ncs_of(x);
  const Tensor w = dense_as(weight, acc), b = dense_as(bias, acc);
  const Tensor affine = device_empty({2, g.c}, acc, scope.device());
  ChannelVectors<Acc> v{ptr<Acc>(w),
                        ptr<Acc>(b),
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr,
                        mut_ptr<Acc>(affine),
                        mut_ptr<Acc>(affine) + g.c};
  const unsigned channel_blocks = static_cast<unsigned>((g.c + kThreads - 1) / kThreads);
  if (training) {
    OutputStage sm(save_mean, acc, MemoryFormat::Contiguous, false);
    OutputStage si(save_invstd, acc, MemoryFormat::Contiguous, false);
    OutputStage rm(running_mean, acc, MemoryFormat::Contiguous, true);
    OutputStage rv(running_var, acc, MemoryFormat::Contiguous, true);
    v.save_mean = mut_ptr<Acc>(sm.get());
    v.save_invstd = mut_ptr<Acc>(si.get());
    v.running_mean = mut_ptr<Acc>(rm.get());
    v.running_var = mut_ptr<Acc>(rv.get());
    const int64_t count = g.n * g.s;
    const int splits = splits_for(g.c, count, kThreads, 4 * int64_t{scope.multiprocessors()});
    const int64_t per_split = (count + splits - 1) / splits;
    const Tensor partial = device_empty({g.c * splits * static_cast<int64_t>(sizeof(Welford<Acc>))},
                                        kUInt8, scope.device());
    auto* partial_ptr = static_cast<Welford<Acc>*>(partial.data_ptr());
    stats_kernel<T, Acc><<<dim3(static_cast<unsigned>(g.c), static_cast<unsigned>(splits)),
                           kThreads, kThreads * sizeof(Welford<Acc>), scope.stream()>>>(
        static_cast<const T*>(x.const_data_ptr()), g, per_split, partial_ptr);
    check_launch(scope.device(), "batch_norm statistics kernel");
    finish_training_kernel<Acc><<<channel_blocks, kThreads, 0, scope.stream()>>>(
        partial_ptr, splits, g.c, eps, momentum, v);
    check_launch(scope.device(), "batch_norm statistics kernel");
    sm.finish();
    si.finish();
    rm.finish();
    rv.finish();
  } else {
    const Tensor rm = dense_as(running_mean, acc), rv = dense_as(running_var, acc);
    finish_inference_kernel<Acc>
        <<<channel_blocks, kThreads, 0, scope.stream()>>>(ptr<Acc>(rm), ptr<Acc>(rv), g.c, eps, v);
    check_launch(scope.device(), "batch_norm statistics kernel");
  }
  apply_kernel<T, Acc><<<blocks_for(x.numel()), kThreads, 0, scope.stream()>>>(
      static_cast<const T*>(x.const_data_ptr()), g, static_cast<T*>(y.view.data_ptr()),
      ncs_of(y.view), v.scale, v.shift);
  check_launch(scope.device(), "batch_norm kernel");
  y.stage.finish();
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

void cuda_batch_norm_forward_training(const Tensor& out, const Tensor& save_mean,
                                      const Tensor& save_invstd, const Tensor& input,
                                      const Tensor& weight, const Tensor& bias,
                                      const Tensor& running_mean, const Tensor& running_var,
                                      double momentum, double eps) {
  constexpr const char* kOp = "batch_norm_forward_training";
  const int device = operands_device(kOp, {{&out, "out"},
                                           {&save_mean, "save_mean"},
                                           {&save_invstd, "save_invstd"},
                                           {&input, "input"},
                                           {&weight, "weight"},
                                           {&bias, "bias"},
                                           {&running_mean, "running_mean"},
                                           {&running_var, "running_var"}});
  const BnShape s = check_bn(kOp, input);
  check_shape(out, input.sizes(), kOp, "out (input's shape)");
  check_dtype(out, input.dtype(), kOp, "out (input's dtype)");
  check_output(out, kOp, "out");
  FERRY_CHECK_AS(ShapeError, save_mean.defined() && save_invstd.defined(), kOp,
                 ": expected save_mean and save_invstd to be defined");
  check_vector(kOp, save_mean, "save_mean", s, s.stat, true);
  check_vector(kOp, save_invstd, "save_invstd", s, s.stat, true);
  check_vector(kOp, running_mean, "running_mean", s, s.stat, true);
  check_vector(kOp, running_var, "running_var", s, s.stat, true);
  check_vector(kOp, weight, "weight", s, input.dtype(), false);
  check_vector(kOp, bias, "bias", s, input.dtype(), false);
  FERRY_CHECK_AS(ShapeError, s.count > 1, kOp,
                 ": expected more than 1 value per channel when training, but got input ",
                 shape_str(input));
  BelowAutograd below;
  const LaunchScope scope(device);
  visit_float(input.dtype(), [&](auto tag) {
    forward<decltype(tag)>(out, input, weight, bias, true, save_mean, save_invstd, running_mean,
                           running_var, momentum, eps, scope);
  });
}

void cuda_batch_norm_forward_inference(const Tensor& out, const Tensor& input, const Tensor& weight,
                                       const Tensor& bias, const Tensor& running_mean,
                                       const Tensor& running_var, double eps) {
  constexpr const char* kOp = "batch_norm_forward_inference";
  const int device = operands_device(kOp, {{&out, "out"},
                                           {&input, "input"},
                                           {&weight, "weight"},
                                           {&bias, "bias"},
                                           {&running_mean, "running_mean"},
                                           {&running_var, "running_var"}});
  const BnShape s = check_bn(kOp, input);
  check_shape(out, input.sizes(), kOp, "out (input's shape)");
  check_dtype(out, input.dtype(), kOp, "out (input's dtype)");
  check_output(out, kOp, "out");
  FERRY_CHECK_AS(ShapeError, running_mean.defined() && running_var.defined(), kOp,
                 ": expected running_mean and running_var to be defined");
  check_vector(kOp, running_mean, "running_mean", s, s.stat, false);
  check_vector(kOp, running_var, "running_var", s, s.stat, false);
  check_vector(kOp, weight, "weight", s, input.dtype(), false);
  check_vector(kOp, bias, "bias", s, input.dtype(), false);
  if (input.numel() == 0) return;
  BelowAutograd below;
  const LaunchScope scope(device);
  visit_float(input.dtype(), [&](auto tag) {
    forward<decltype(tag)>(out, input, weight, bias, false, Tensor(), Tensor(), running_mean,
                           running_var, 0.0, eps, scope);
  });
}

template <typename T>
void backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
              const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
              const Tensor& invstd, bool training, const LaunchScope& scope) {
  using Acc = acc_t<T>;
  const ScalarType acc = acc_dtype(input.dtype());
  const Tensor x = input_ncs(input), dy = input_ncs(grad_out);
  const Ncs g = ncs_of(x);
  const Tensor w = dense_as(weight, acc), m = dense_as(mean, acc), inv = dense_as(invstd, acc);
  OutputStage gw(grad_weight, acc, MemoryFormat::Contiguous, false);
  OutputStage gb(grad_bias, acc, MemoryFormat::Contiguous, false);
  const bool need_sums = training || grad_weight.defined() || grad_bias.defined();
  const int64_t count = g.n * g.s;
  const int splits = splits_for(g.c, count, kThreads, 4 * int64_t{scope.multiprocessors()});
  const int64_t per_split = (count + splits - 1) / splits;
  Tensor partial;
  if (need_sums) {
    partial = device_empty({g.c * splits * static_cast<int64_t>(sizeof(Sums<Acc>))}, kUInt8,
                           scope.device());
    backward_sums_kernel<T, Acc><<<dim3(static_cast<unsigned>(g.c), static_cast<unsigned>(splits)),
                                   kThreads, kThreads * sizeof(Sums<Acc>), scope.stream()>>>(
        static_cast<const T*>(x.const_data_ptr()), g, static_cast<const T*>(dy.const_data_ptr()),
        ncs_of(dy), ptr<Acc>(m), ptr<Acc>(inv), per_split,
        static_cast<Sums<Acc>*>(partial.data_ptr()));
    check_launch(scope.device(), "batch_norm_backward reduction kernel");
  }
  const Tensor coef =
      device_empty({g.c * static_cast<int64_t>(sizeof(Coefficients<Acc>))}, kUInt8, scope.device());
  auto* coef_ptr = static_cast<Coefficients<Acc>*>(coef.data_ptr());
  backward_finish_kernel<Acc>
      <<<static_cast<unsigned>((g.c + kThreads - 1) / kThreads), kThreads, 0, scope.stream()>>>(
          partial.defined() ? static_cast<const Sums<Acc>*>(partial.const_data_ptr()) : nullptr,
          splits, g.c, count, ptr<Acc>(w), ptr<Acc>(inv), training, mut_ptr<Acc>(gw.get()),
          mut_ptr<Acc>(gb.get()), coef_ptr);
  check_launch(scope.device(), "batch_norm_backward kernel");
  gw.finish();
  gb.finish();
  if (!grad_input.defined()) return;
  OutputNcs dx = output_ncs(grad_input);
  backward_apply_kernel<T, Acc><<<blocks_for(x.numel()), kThreads, 0, scope.stream()>>>(
      static_cast<const T*>(x.const_data_ptr()), g, static_cast<const T*>(dy.const_data_ptr()),
      ncs_of(dy), static_cast<T*>(dx.view.data_ptr()), ncs_of(dx.view), ptr<Acc>(m), coef_ptr);
  check_launch(scope.device(), "batch_norm_backward kernel");
  dx.stage.finish();
}

void cuda_batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                              const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                              const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                              bool training) {
  constexpr const char* kOp = "batch_norm_backward";
  const int device = operands_device(kOp, {{&grad_input, "grad_input"},
                                           {&grad_weight, "grad_weight"},
                                           {&grad_bias, "grad_bias"},
                                           {&grad_out, "grad_out"},
                                           {&input, "input"},
                                           {&weight, "weight"},
                                           {&mean, "mean"},
                                           {&invstd, "invstd"}});
  const BnShape s = check_bn(kOp, input);
  check_shape(grad_out, input.sizes(), kOp, "grad_out (input's shape)");
  check_dtype(grad_out, input.dtype(), kOp, "grad_out (input's dtype)");
  if (grad_input.defined()) {
    check_shape(grad_input, input.sizes(), kOp, "grad_input (input's shape)");
    check_dtype(grad_input, input.dtype(), kOp, "grad_input (input's dtype)");
    check_output(grad_input, kOp, "grad_input");
  }
  FERRY_CHECK_AS(ShapeError, mean.defined() && invstd.defined(), kOp,
                 ": expected mean and invstd to be defined");
  check_vector(kOp, mean, "mean", s, s.stat, false);
  check_vector(kOp, invstd, "invstd", s, s.stat, false);
  check_vector(kOp, weight, "weight", s, input.dtype(), false);
  check_vector(kOp, grad_weight, "grad_weight", s, input.dtype(), true);
  check_vector(kOp, grad_bias, "grad_bias", s, input.dtype(), true);
  BelowAutograd below;
  if (input.numel() == 0) {
    if (grad_weight.defined()) Tensor(grad_weight).zero_();
    if (grad_bias.defined()) Tensor(grad_bias).zero_();
    return;
  }
  if (!grad_input.defined() && !grad_weight.defined() && !grad_bias.defined()) return;
  const LaunchScope scope(device);
  visit_float(input.dtype(), [&](auto tag) {
    backward<decltype(tag)>(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean,
                            invstd, training, scope);
  });
}

}  // namespace

FERRY_REGISTER_DISPATCH(batch_norm_forward_training_stub, DeviceType::CUDA,
                        &cuda_batch_norm_forward_training);
FERRY_REGISTER_DISPATCH(batch_norm_forward_inference_stub, DeviceType::CUDA,
                        &cuda_batch_norm_forward_inference);
FERRY_REGISTER_DISPATCH(batch_norm_backward_stub, DeviceType::CUDA, &cuda_batch_norm_backward);

}  // namespace ferry::cuda
