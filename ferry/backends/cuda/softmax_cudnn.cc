// The CUDA softmax and log_softmax, forward and backward, on cuDNN's cudnnSoftmaxForward /
// cudnnSoftmaxBackward (CUDNN_SOFTMAX_ACCURATE, which subtracts the maximum, or CUDNN_SOFTMAX_LOG,
// over channels): a tensor is seen as [outer, axis, inner] (the dims before and after `dim`
// merged; staged through a dense copy when their strides do not merge) and described to cuDNN as
// [outer, axis, inner, 1] with its own strides, so any layout whose dims merge is used in place.
// Batches of `outer` larger than cuDNN's 32-bit sizes are split. A dtype cuDNN rejects for
// softmax (bfloat16 on some versions) is computed through float32 temporaries.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/cudnn_support.h"
#include "ferry/backends/cuda/nn_shapes.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cuda {
namespace {

// [outer, axis, inner] sizes and element strides.
struct Lanes {
  int64_t outer, axis, inner;
  int64_t so, sa, si;
};

std::optional<Lanes> lanes_of(const Tensor& t, int64_t dim) {
  if (t.is_neg()) return std::nullopt;
  const auto outer = merge_dims(t.sizes(), t.strides(), 0, dim);
  const auto inner = merge_dims(t.sizes(), t.strides(), dim + 1, t.dim());
  if (!outer || !inner) return std::nullopt;
  Lanes l{outer->size, t.size(dim), inner->size, outer->stride, t.stride(dim), inner->stride};
  // A size-1 dim's stride is free: give it the dense one. Broadcast (stride-0) dims are staged.
  if (l.inner == 1) l.si = 1;
  if (l.axis == 1) l.sa = l.inner * l.si;
  if (l.outer == 1) l.so = l.axis * l.sa;
  if (l.so <= 0 || l.sa <= 0 || l.si <= 0) return std::nullopt;
  // cuDNN takes 32-bit strides within one outer slice.
  if (!fits_int(l.sa) || !fits_int(l.si)) return std::nullopt;
  return l;
}

// An input as [outer, axis, inner], staged densely when needed.
struct InputLanes {
  Tensor tensor;
  Lanes lanes;
};
// The lanes of a dense tensor (which always merge); raises when cuDNN cannot take its strides.
Lanes dense_lanes(const Tensor& dense, int64_t dim) {
  const std::optional<Lanes> l = lanes_of(dense, dim);
  FERRY_CHECK_AS(NotImplementedError, l.has_value(),
                 "softmax: cuDNN takes 32-bit strides, but the dims after dim ", dim, " of ",
                 shape_str(dense), " hold more than 2^31 - 1 elements");
  return *l;
}

InputLanes input_lanes(const Tensor& t, int64_t dim, ScalarType dtype) {
  if (t.dtype() == dtype) {
    if (auto l = lanes_of(t, dim)) return {t, *l};
  }
  const Tensor dense = dense_as(t, dtype);
  return {dense, dense_lanes(dense, dim)};
}

struct OutputLanes {
  OutputStage stage;
  Tensor tensor;
  Lanes lanes;
};
OutputLanes output_lanes(const Tensor& t, int64_t dim, ScalarType dtype) {
  if (t.dtype() == dtype) {
    if (auto l = lanes_of(t, dim)) return {OutputStage(), t, *l};
  }
  OutputLanes o{OutputStage(t, dtype, MemoryFormat::Contiguous, false), Tensor(), Lanes{}};
  o.tensor = o.stage.get();
  o.lanes = dense_lanes(o.tensor, dim);
  return o;
}

void describe(const TensorDescriptor& d, const Lanes& l, int64_t outer, ScalarType dtype,
              int device) {
  // The outer stride only matters between slices; a single slice gets a dense one.
  const int64_t so = outer > 1 ? l.so : std::max(l.axis * l.sa, l.inner * l.si);
  check_cudnn(cudnnSetTensor4dDescriptorEx(d.get(), cudnn_dtype(dtype), static_cast<int>(outer),
                                           static_cast<int>(l.axis), static_cast<int>(l.inner), 1,
                                           static_cast<int>(so), static_cast<int>(l.sa),
                                           static_cast<int>(l.si), 1),
              device, "cudnnSetTensor4dDescriptorEx");
}

// Slices of `outer` per call: the elements of one call fit 32 bits, and so does the outer
// stride when there is more than one slice.
int64_t slices_per_call(const Lanes& l, std::initializer_list<const Lanes*> all, const char* op) {
  int64_t per = samples_per_call(l.outer, {l.axis * l.inner});
  FERRY_CHECK_AS(NotImplementedError, per > 0, op,
                 ": cuDNN takes at most 2^31 - 1 elements per softmax slice, but got ",
                 l.axis * l.inner);
  for (const Lanes* x : all) {
    if (!fits_int(x->so * std::max<int64_t>(per - 1, 0))) per = 1;
  }
  return per;
}

bool rejected_dtype(cudnnStatus_t status) {
  return status == CUDNN_STATUS_NOT_SUPPORTED || status == CUDNN_STATUS_BAD_PARAM;
}

// Runs softmax forward in `dtype`; false when cuDNN rejects the dtype (nothing written).
bool forward(const Tensor& out, const Tensor& input, int64_t dim, bool log, ScalarType dtype,
             const LaunchScope& scope) {
  const int device = scope.device();
  const InputLanes x = input_lanes(input, dim, dtype);
  OutputLanes y = output_lanes(out, dim, dtype);
  const int64_t per = slices_per_call(x.lanes, {&x.lanes, &y.lanes}, "softmax");
  const cudnnHandle_t h = cudnn_handle(scope);
  const Scaling one = scaling(1.0), zero = scaling(0.0);
  const auto esize = static_cast<int64_t>(element_size(dtype));
  for (int64_t first = 0; first < x.lanes.outer; first += per) {
    const int64_t n = std::min(per, x.lanes.outer - first);
    TensorDescriptor xd(device), yd(device);
    describe(xd, x.lanes, n, dtype, device);
    describe(yd, y.lanes, n, dtype, device);
    const cudnnStatus_t status = cudnnSoftmaxForward(
        h, log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
        one.get(dtype), xd.get(),
        static_cast<const char*>(x.tensor.const_data_ptr()) + first * x.lanes.so * esize,
        zero.get(dtype), yd.get(),
        static_cast<char*>(y.tensor.data_ptr()) + first * y.lanes.so * esize);
    if (first == 0 && dtype != kFloat32 && dtype != kFloat64 && rejected_dtype(status))
      return false;
    check_cudnn(status, device, "cudnnSoftmaxForward");
  }
  y.stage.finish();
  return true;
}

bool backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& output, int64_t dim,
              bool log, ScalarType dtype, const LaunchScope& scope) {
  const int device = scope.device();
  const InputLanes yv = input_lanes(output, dim, dtype);
  const InputLanes dy = input_lanes(grad_out, dim, dtype);
  OutputLanes dx = output_lanes(grad_input, dim, dtype);
  const int64_t per =
      slices_per_call(yv.lanes, {&yv.lanes, &dy.lanes, &dx.lanes}, "softmax_backward");
  const cudnnHandle_t h = cudnn_handle(scope);
  const Scaling one = scaling(1.0), zero = scaling(0.0);
  const auto esize = static_cast<int64_t>(element_size(dtype));
  for (int64_t first = 0; first < yv.lanes.outer; first += per) {
    const int64_t n = std::min(per, yv.lanes.outer - first);
    TensorDescriptor yd(device), dyd(device), dxd(device);
    describe(yd, yv.lanes, n, dtype, device);
    describe(dyd, dy.lanes, n, dtype, device);
    describe(dxd, dx.lanes, n, dtype, device);
    const cudnnStatus_t status = cudnnSoftmaxBackward(
        h, log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
        one.get(dtype), yd.get(),
        static_cast<const char*>(yv.tensor.const_data_ptr()) + first * yv.lanes.so * esize,
        dyd.get(),
        static_cast<const char*>(dy.tensor.const_data_ptr()) + first * dy.lanes.so * esize,
        zero.get(dtype), dxd.get(),
        static_cast<char*>(dx.tensor.data_ptr()) + first * dx.lanes.so * esize);
    if (first == 0 && dtype != kFloat32 && dtype != kFloat64 && rejected_dtype(status))
      return false;
    check_cudnn(status, device, "cudnnSoftmaxBackward");
  }
  dx.stage.finish();
  return true;
}

void check_dim(const char* op, const Tensor& t, int64_t dim) {
  FERRY_CHECK_AS(IndexError, dim >= 0 && dim < t.dim(), op, ": expected dim in [0, ", t.dim(),
                 "), but got ", dim);
}

void cuda_softmax_forward(const Tensor& out, const Tensor& input, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  const int device = operands_device(op, {{&out, "out"}, {&input, "input"}});
  check_nn_float(input, op, "input");
  check_shape(out, input.sizes(), op, "out (input's shape)");
  check_dtype(out, input.dtype(), op, "out (input's dtype)");
  check_output(out, op, "out");
  check_dim(op, input, dim);
  if (out.numel() == 0) return;
  BelowAutograd below;
  const LaunchScope scope(device);
  if (forward(out, input, dim, log, input.dtype(), scope)) return;
  forward(out, input, dim, log, kFloat32, scope);  // float32 temporaries, converted back
}

void cuda_softmax_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& output,
                           int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  const int device = operands_device(
      op, {{&grad_input, "grad_input"}, {&grad_out, "grad_out"}, {&output, "output"}});
  check_nn_float(output, op, "output");
  check_shape(grad_out, output.sizes(), op, "grad_out (output's shape)");
  check_shape(grad_input, output.sizes(), op, "grad_input (output's shape)");
  check_dtype(grad_out, output.dtype(), op, "grad_out (output's dtype)");
  check_dtype(grad_input, output.dtype(), op, "grad_input (output's dtype)");
  check_output(grad_input, op, "grad_input");
  check_dim(op, output, dim);
  if (grad_input.numel() == 0) return;
  BelowAutograd below;
  const LaunchScope scope(device);
  if (backward(grad_input, grad_out, output, dim, log, output.dtype(), scope)) return;
  backward(grad_input, grad_out, output, dim, log, kFloat32, scope);
}

}  // namespace

FERRY_REGISTER_DISPATCH(softmax_forward_stub, DeviceType::CUDA, &cuda_softmax_forward);
FERRY_REGISTER_DISPATCH(softmax_backward_stub, DeviceType::CUDA, &cuda_softmax_backward);

}  // namespace ferry::cuda
