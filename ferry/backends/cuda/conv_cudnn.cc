// The CUDA 2-d convolutions (forward, backward data, backward filter) on cuDNN's convolution API
// (deprecated in cuDNN 9 but present; the graph API would need no other change here). Operands
// are laid out as PyTorch's cuDNN path does: channels-last when the input (or grad_out) or the
// weight is, else NCHW; operands dense in that layout are used in place, others are staged.
// Groups and dilation are cuDNN's. float32 computes in float32 on FMA kernels (TF32 only with
// FERRY_CUDA_ALLOW_TF32=1), float16/bfloat16 in float32 on tensor cores, float64 in float64.
// Algorithms come from cuDNN's heuristics (no timing runs), cached per shape; their workspaces
// come from the caching allocator. Batches whose tensors exceed cuDNN's 32-bit sizes are split.
// The bias is added afterwards (float16/bfloat16 outputs thus round twice), grad_bias is a sum
// over grad_out by ferry's reduction kernel.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <tuple>
#include <vector>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/cudnn_support.h"
#include "ferry/backends/cuda/nn_shapes.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cuda {
namespace {

struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
};

// Prints as "[a, b]" in error messages.
struct Two {
  const std::array<int64_t, 2>& v;
  friend std::ostream& operator<<(std::ostream& out, const Two& t) {
    return out << '[' << t.v[0] << ", " << t.v[1] << ']';
  }
};

// The checks every convolution kernel shares (the CPU kernels' messages); returns the shape.
ConvShape check_conv(const char* op, const Tensor& input, const char* input_name,
                     const Tensor& weight, const char* weight_name, const Conv2dParams& p) {
  FERRY_CHECK_AS(ShapeError, input.dim() == 4, op, ": expected ", input_name,
                 " of rank 4, but got shape ", shape_str(input));
  FERRY_CHECK_AS(ShapeError, weight.dim() == 4, op, ": expected ", weight_name,
                 " of rank 4, but got shape ", shape_str(weight));
  for (int i = 0; i < 2; ++i) {
    FERRY_CHECK_AS(ShapeError, p.stride[i] >= 1 && p.dilation[i] >= 1 && p.padding[i] >= 0, op,
                   ": expected stride >= 1, dilation >= 1 and padding >= 0, but got stride ",
                   Two{p.stride}, ", padding ", Two{p.padding}, ", dilation ", Two{p.dilation});
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
                 " of shape [O, C / groups, kH, kW] = [", s.o, ", ", s.c / p.groups,
                 ", kH, kW] for ", input_name, " of shape ", shape_str(input), " and groups ",
                 p.groups, ", but got ", shape_str(weight));
  FERRY_CHECK_AS(ShapeError, s.kh >= 1 && s.kw >= 1, op,
                 ": expected a kernel of at least 1 x 1, but ", weight_name, " has shape ",
                 shape_str(weight));
  s.oh = conv_output_size(s.h, s.kh, p.stride[0], p.padding[0], p.dilation[0]);
  s.ow = conv_output_size(s.w, s.kw, p.stride[1], p.padding[1], p.dilation[1]);
  FERRY_CHECK_AS(ShapeError, s.oh >= 1 && s.ow >= 1, op, ": the padded input (", shape_str(input),
                 " with padding ", Two{p.padding}, ") is smaller than the dilated kernel (",
                 shape_str(weight), ", dilation ", Two{p.dilation}, ")");
  return s;
}

void check_same_float(const char* op, const Tensor& ref, const char* ref_name,
                      std::initializer_list<std::pair<const Tensor*, const char*>> others) {
  check_nn_float(ref, op, ref_name);
  for (const auto& [t, name] : others) {
    if (t->defined()) check_dtype(*t, ref.dtype(), op, name);
  }
}

// PyTorch's cudnn_conv_suggest_memory_format: channels-last when either operand is.
MemoryFormat conv_layout(const Tensor& activation, const Tensor& weight) {
  const bool cl = activation.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                  weight.suggest_memory_format() == MemoryFormat::ChannelsLast;
  return cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

enum class Pass : int { kForward, kBackwardData, kBackwardFilter };

// One algorithm choice: cuDNN's algorithm enum value, its math type and workspace size.
struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

using Key = std::tuple<int, int, int, int, bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, std::array<int64_t, 7>>;

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::map<Key, std::vector<Choice>>& cache() {
  static auto* c = new std::map<Key, std::vector<Choice>>();  // leaked: used until exit
  return *c;
}

// The descriptors of one call over `n` samples.
struct Call {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  explicit Call(int device) : x(device), y(device), w(device), conv(device) {}
};

void describe(Call& call, const ConvShape& s, int64_t n, const Conv2dParams& p, ScalarType dtype,
              MemoryFormat layout, int device) {
  const cudnnDataType_t dt = cudnn_dtype(dtype);
  const bool cl = layout == MemoryFormat::ChannelsLast;
  const auto set4d = [&](const TensorDescriptor& d, int64_t c, int64_t h, int64_t w) {
    // Dense strides of [n, c, h, w] in the layout.
    const int64_t sn = c * h * w;
    const int64_t sc = cl ? 1 : h * w, sh = cl ? w * c : w, sw = cl ? c : 1;
    check_cudnn(cudnnSetTensor4dDescriptorEx(d.get(), dt, static_cast<int>(n), static_cast<int>(c),
                                             static_cast<int>(h), static_cast<int>(w),
                                             static_cast<int>(sn), static_cast<int>(sc),
                                             static_cast<int>(sh), static_cast<int>(sw)),
                device, "cudnnSetTensor4dDescriptorEx");
  };
  set4d(call.x, s.c, s.h, s.w);
  set4d(call.y, s.o, s.oh, s.ow);
  check_cudnn(
      cudnnSetFilter4dDescriptor(call.w.get(), dt, cl ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                 static_cast<int>(s.o), static_cast<int>(s.c / p.groups),
                                 static_cast<int>(s.kh), static_cast<int>(s.kw)),
      device, "cudnnSetFilter4dDescriptor");
  check_cudnn(
      cudnnSetConvolution2dDescriptor(
          call.conv.get(), static_cast<int>(p.padding[0]), static_cast<int>(p.padding[1]),
          static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1]),
          static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1]), CUDNN_CROSS_CORRELATION,
          dtype == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
      device, "cudnnSetConvolution2dDescriptor");
  check_cudnn(cudnnSetConvolutionGroupCount(call.conv.get(), static_cast<int>(p.groups)), device,
              "cudnnSetConvolutionGroupCount");
}

// The math type a dtype asks for: float32 stays off TF32 tensor cores unless allowed.
cudnnMathType_t wanted_math(ScalarType dtype) {
  if (dtype == kFloat32) return tf32_allowed() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  if (dtype == kFloat64) return CUDNN_DEFAULT_MATH;
  return CUDNN_TENSOR_OP_MATH;
}
bool acceptable(ScalarType dtype, cudnnMathType_t math) {
  return dtype != kFloat32 || tf32_allowed() || math == CUDNN_FMA_MATH;
}

template <typename Perf>
std::vector<Choice> choices_of(const Perf* perf, int count, ScalarType dtype) {
  std::vector<Choice> out;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || !acceptable(dtype, perf[i].mathType)) continue;
    out.push_back({static_cast<int>(perf[i].algo), perf[i].mathType, perf[i].memory});
  }
  return out;
}

// cuDNN's heuristic ranking of the algorithms for `call` (cached per shape).
std::vector<Choice> rank(Pass pass, Call& call, cudnnHandle_t h, const ConvShape& s, int64_t n,
                         const Conv2dParams& p, ScalarType dtype, MemoryFormat layout, int device) {
  const Key key{static_cast<int>(pass),
                device,
                static_cast<int>(dtype),
                static_cast<int>(layout),
                tf32_allowed(),
                n,
                s.c,
                s.h,
                s.w,
                s.o,
                s.kh,
                s.kw,
                {p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1],
                 p.groups}};
  {
    const std::lock_guard<std::mutex> lock(cache_mutex());
    if (auto it = cache().find(key); it != cache().end()) return it->second;
  }
  check_cudnn(cudnnSetConvolutionMathType(call.conv.get(), wanted_math(dtype)), device,
              "cudnnSetConvolutionMathType");
  constexpr int kMax = 16;
  int found = 0;
  std::vector<Choice> out;
  if (pass == Pass::kForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    check_cudnn(
        cudnnGetConvolutionForwardAlgorithm_v7(h, call.x.get(), call.w.get(), call.conv.get(),
                                               call.y.get(), kMax, &found, perf),
        device, "cudnnGetConvolutionForwardAlgorithm_v7");
    out = choices_of(perf, found, dtype);
  } else if (pass == Pass::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    check_cudnn(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, call.w.get(), call.y.get(), call.conv.get(),
                                                    call.x.get(), kMax, &found, perf),
        device, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    out = choices_of(perf, found, dtype);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    check_cudnn(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, call.x.get(), call.y.get(), call.conv.get(), call.w.get(), kMax, &found, perf),
        device, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    out = choices_of(perf, found, dtype);
  }
  FERRY_CHECK_AS(DeviceError, !out.empty(), "cuda:", device,
                 ": cuDNN offers no convolution algorithm for C=", s.c, " H=", s.h, " W=", s.w,
                 " O=", s.o, " kernel ", s.kh, "x", s.kw, ", dtype ", dtype,
                 dtype == kFloat32 ? " without TF32 (FERRY_CUDA_ALLOW_TF32=1 allows it)" : "");
  const std::lock_guard<std::mutex> lock(cache_mutex());
  cache().emplace(key, out);
  return out;
}

// Runs `pass` over samples [first, first + n) with the first algorithm whose workspace can be
// allocated. beta: 0 overwrites the output, 1 accumulates (backward filter over batch splits).
void run_pass(Pass pass, const ConvShape& s, int64_t first, int64_t n, const Conv2dParams& p,
              MemoryFormat layout, const Tensor& x, const Tensor& w, const Tensor& y, double beta,
              const LaunchScope& scope) {
  const int device = scope.device();
  const ScalarType dtype = w.dtype();
  Call call(device);
  describe(call, s, n, p, dtype, layout, device);
  const cudnnHandle_t h = cudnn_handle(scope);
  const std::vector<Choice> ranked = rank(pass, call, h, s, n, p, dtype, layout, device);
  const auto esize = static_cast<int64_t>(element_size(dtype));
  char* xp = static_cast<char*>(x.data_ptr()) + first * x.stride(0) * esize;
  char* yp = static_cast<char*>(y.data_ptr()) + first * y.stride(0) * esize;
  const Scaling one = scaling(1.0), b = scaling(beta);
  for (size_t i = 0; i < ranked.size(); ++i) {
    const Choice& c = ranked[i];
    Tensor workspace;
    if (c.workspace > 0) {
      try {
        workspace = device_empty({static_cast<int64_t>(c.workspace)}, kUInt8, device);
      } catch (const OutOfMemoryError&) {
        if (i + 1 < ranked.size()) continue;  // a cheaper algorithm may do
        throw;
      }
    }
    void* ws = workspace.defined() ? workspace.data_ptr() : nullptr;
    check_cudnn(cudnnSetConvolutionMathType(call.conv.get(), c.math), device,
                "cudnnSetConvolutionMathType");
    switch (pass) {
      case Pass::kForward:
        return check_cudnn(
            cudnnConvolutionForward(h, one.get(dtype), call.x.get(), xp, call.w.get(),
                                    w.const_data_ptr(), call.conv.get(),
                                    static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, c.workspace,
                                    b.get(dtype), call.y.get(), yp),
            device, "cudnnConvolutionForward");
      case Pass::kBackwardData:
        return check_cudnn(
            cudnnConvolutionBackwardData(h, one.get(dtype), call.w.get(), w.const_data_ptr(),
                                         call.y.get(), yp, call.conv.get(),
                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws,
                                         c.workspace, b.get(dtype), call.x.get(), xp),
            device, "cudnnConvolutionBackwardData");
      case Pass::kBackwardFilter:
        return check_cudnn(
            cudnnConvolutionBackwardFilter(h, one.get(dtype), call.x.get(), xp, call.y.get(), yp,
                                           call.conv.get(),
                                           static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws,
                                           c.workspace, b.get(dtype), call.w.get(), w.data_ptr()),
            device, "cudnnConvolutionBackwardFilter");
    }
  }
}

// Calls fn(first, n) over the batch in pieces cuDNN's 32-bit descriptors can take.
template <typename Fn>
void for_each_batch_piece(const ConvShape& s, const Conv2dParams& p, const char* op, Fn&& fn) {
  const int64_t piece = samples_per_call(s.n, {s.c * s.h * s.w, s.o * s.oh * s.ow});
  FERRY_CHECK_AS(NotImplementedError, piece > 0 && fits_int(s.o * (s.c / p.groups) * s.kh * s.kw),
                 op,
                 ": cuDNN takes tensors of at most 2^31 - 1 elements per sample, but one "
                 "sample has ",
                 s.c * s.h * s.w, " input and ", s.o * s.oh * s.ow, " output elements");
  for (int64_t first = 0; first < s.n; first += piece) fn(first, std::min(piece, s.n - first));
}

void cuda_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight,
                         const Tensor& bias, const Conv2dParams& p) {
  constexpr const char* kOp = "conv2d_forward";
  const int device = operands_device(
      kOp, {{&out, "out"}, {&input, "input"}, {&weight, "weight"}, {&bias, "bias"}});
  const ConvShape s =
      check_conv(kOp, input, "input ([N, C, H, W])", weight, "weight ([O, C / groups, kH, kW])", p);
  check_shape(out, {s.n, s.o, s.oh, s.ow}, kOp, "out ([N, O, oH, oW])");
  if (bias.defined()) check_shape(bias, {s.o}, kOp, "bias ([O])");
  check_same_float(kOp, input, "input",
                   {{&weight, "weight (input's dtype)"},
                    {&bias, "bias (input's dtype)"},
                    {&out, "out (input's dtype)"}});
  check_output(out, kOp, "out");
  if (out.numel() == 0) return;
  BelowAutograd below;
  const LaunchScope scope(device);
  if (s.c == 0) {
    Tensor(out).zero_();
  } else {
    const MemoryFormat layout = conv_layout(input, weight);
    const Tensor x = dense_as(input, input.dtype(), layout);
    const Tensor w = dense_as(weight, weight.dtype(), layout);
    OutputStage y(out, out.dtype(), layout, false);
    for_each_batch_piece(s, p, kOp, [&](int64_t first, int64_t n) {
      run_pass(Pass::kForward, s, first, n, p, layout, x, w, y.get(), 0.0, scope);
    });
    y.finish();
  }
  if (bias.defined()) Tensor(out).add_(bias.reshape({1, s.o, 1, 1}));
}

void cuda_conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out,
                                const Tensor& weight, const Conv2dParams& p) {
  constexpr const char* kOp = "conv2d_backward_input";
  const int device = operands_device(
      kOp, {{&grad_input, "grad_input"}, {&grad_out, "grad_out"}, {&weight, "weight"}});
  const ConvShape s = check_conv(kOp, grad_input, "grad_input ([N, C, H, W])", weight,
                                 "weight ([O, C / groups, kH, kW])", p);
  check_shape(grad_out, {s.n, s.o, s.oh, s.ow}, kOp, "grad_out ([N, O, oH, oW])");
  check_same_float(
      kOp, grad_out, "grad_out",
      {{&weight, "weight (grad_out's dtype)"}, {&grad_input, "grad_input (grad_out's dtype)"}});
  check_output(grad_input, kOp, "grad_input");
  if (grad_input.numel() == 0) return;
  BelowAutograd below;
  const LaunchScope scope(device);
  if (s.o == 0) {
    Tensor(grad_input).zero_();
    return;
  }
  const MemoryFormat layout = conv_layout(grad_out, weight);
  const Tensor dy = dense_as(grad_out, grad_out.dtype(), layout);
  const Tensor w = dense_as(weight, weight.dtype(), layout);
  OutputStage dx(grad_input, grad_input.dtype(), layout, false);
  for_each_batch_piece(s, p, kOp, [&](int64_t first, int64_t n) {
    run_pass(Pass::kBackwardData, s, first, n, p, layout, dx.get(), w, dy, 0.0, scope);
  });
  dx.finish();
}

void cuda_conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias,
                                 const Tensor& input, const Tensor& grad_out,
                                 const Conv2dParams& p) {
  constexpr const char* kOp = "conv2d_backward_weight";
  const int device = operands_device(kOp, {{&grad_weight, "grad_weight"},
                                           {&grad_bias, "grad_bias"},
                                           {&input, "input"},
                                           {&grad_out, "grad_out"}});
  const ConvShape s = check_conv(kOp, input, "input ([N, C, H, W])", grad_weight,
                                 "grad_weight ([O, C / groups, kH, kW])", p);
  check_shape(grad_out, {s.n, s.o, s.oh, s.ow}, kOp, "grad_out ([N, O, oH, oW])");
  if (grad_bias.defined()) {
    check_shape(grad_bias, {s.o}, kOp, "grad_bias ([O])");
    check_output(grad_bias, kOp, "grad_bias");
  }
  check_same_float(kOp, grad_out, "grad_out",
                   {{&input, "input (grad_out's dtype)"},
                    {&grad_weight, "grad_weight (grad_out's dtype)"},
                    {&grad_bias, "grad_bias (grad_out's dtype)"}});
  check_output(grad_weight, kOp, "grad_weight");
  BelowAutograd below;
  const LaunchScope scope(device);
  if (grad_bias.defined() && s.o > 0) {
    reduce_stub(DeviceType::CUDA, grad_bias.reshape({1, s.o, 1, 1}), grad_out,
                std::vector<int64_t>{0, 2, 3}, ReduceKind::Sum);
  }
  if (grad_weight.numel() == 0) return;
  if (s.n == 0 || s.c == 0) {
    Tensor(grad_weight).zero_();
    return;
  }
  const MemoryFormat layout = conv_layout(input, grad_weight);
  const Tensor x = dense_as(input, input.dtype(), layout);
  const Tensor dy = dense_as(grad_out, grad_out.dtype(), layout);
  OutputStage dw(grad_weight, grad_weight.dtype(), layout, false);
  for_each_batch_piece(s, p, kOp, [&](int64_t first, int64_t n) {
    run_pass(Pass::kBackwardFilter, s, first, n, p, layout, x, dw.get(), dy, first == 0 ? 0.0 : 1.0,
             scope);
  });
  dw.finish();
}

}  // namespace

FERRY_REGISTER_DISPATCH(conv2d_forward_stub, DeviceType::CUDA, &cuda_conv2d_forward);
FERRY_REGISTER_DISPATCH(conv2d_backward_input_stub, DeviceType::CUDA, &cuda_conv2d_backward_input);
FERRY_REGISTER_DISPATCH(conv2d_backward_weight_stub, DeviceType::CUDA,
                        &cuda_conv2d_backward_weight);

}  // namespace ferry::cuda
