// The host-side helpers of the CUDA compute kernels (see cuda_compute.h).
#include "ferry/backends/cuda/cuda_compute.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "ferry/core/size_math.h"
#include "ferry/core/storage.h"
#include "ferry/device/stream.h"
#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/local_dispatch_key_set.h"
#include "ferry/iter/memory_overlap.h"

namespace ferry::cuda {

int operands_device(const char* op, std::initializer_list<Operand> operands) {
  const Operand* first = nullptr;
  for (const Operand& o : operands) {
    if (!o.tensor->defined()) continue;
    FERRY_CHECK_AS(DeviceError, o.tensor->is_cuda(), op, ": expected ", o.name,
                   " on a CUDA device, but it is on ", o.tensor->device());
    if (first == nullptr) {
      first = &o;
      continue;
    }
    FERRY_CHECK_AS(DeviceError, o.tensor->device() == first->tensor->device(), op,
                   ": expected all tensors on one device, but ", first->name, " is on ",
                   first->tensor->device(), " and ", o.name, " on ", o.tensor->device());
  }
  FERRY_CHECK(first != nullptr, op, ": expected a defined operand");
  return first->tensor->device().index();
}

std::string shape_str(IntArrayRef sizes) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << ']';
  return out.str();
}

std::string shape_str(const Tensor& t) { return t.defined() ? shape_str(t.sizes()) : "undefined"; }

void check_shape(const Tensor& t, IntArrayRef expected, const char* op, const char* name) {
  FERRY_CHECK_AS(ShapeError, t.defined() && t.sizes().equals(expected), op, ": expected ", name,
                 " of shape ", shape_str(expected), ", but got ", shape_str(t));
}

void check_dtype(const Tensor& t, ScalarType expected, const char* op, const char* name) {
  FERRY_CHECK_AS(DTypeError, t.dtype() == expected, op, ": expected ", name, " of dtype ", expected,
                 ", but got ", t.dtype());
}

void check_output(const Tensor& t, const char* op, const char* name) {
  FERRY_CHECK_AS(ShapeError, has_internal_overlap(t) != MemOverlap::Yes, op, ": expected ", name,
                 " whose elements have memory of their own, but its strides ",
                 shape_str(t.strides()), " (shape ", shape_str(t), ") make elements share it");
  FERRY_CHECK_AS(NotImplementedError, !t.is_neg() && !t.is_conj(), op, ": expected ", name,
                 " without a lazy negation or conjugation bit (resolve it first)");
}

void check_nn_float(const Tensor& t, const char* op, const char* name) {
  const ScalarType d = t.dtype();
  FERRY_CHECK_AS(DTypeError, d == kFloat32 || d == kBFloat16 || d == kFloat16 || d == kFloat64, op,
                 ": expected ", name, " of dtype float32, bfloat16, float16 or float64, ",
                 "but got ", d);
}

void check_cuda(cudaError_t error, int device, const char* call) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();  // clears it unless it is sticky
  FERRY_FAIL_AS(DeviceError, "cuda:", device, ": ", call, " failed: ", cudaGetErrorString(error),
                " (", cudaGetErrorName(error), ")");
}

void check_launch(int device, const char* what) {
  const cudaError_t error = cudaGetLastError();
  FERRY_CHECK_AS(DeviceError, error == cudaSuccess, "cuda:", device, ": ", what,
                 " launch failed: ", cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
}

BelowAutograd::BelowAutograd() {
  const LocalDispatchKeySet local = local_dispatch_key_set();
  const DispatchKeySet added = DispatchKeySet::autograd() - local.excluded;
  set_local_dispatch_key_set({local.included, local.excluded | added});
  added_ = added.raw();
}

BelowAutograd::~BelowAutograd() {
  const LocalDispatchKeySet local = local_dispatch_key_set();
  set_local_dispatch_key_set(
      {local.included, DispatchKeySet::from_raw(local.excluded.raw() & ~added_)});
}

bool tf32_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("FERRY_CUDA_ALLOW_TF32");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return allowed;
}

LaunchScope::LaunchScope(int device) : device_(device) {
  int current = -1;
  check_cuda(cudaGetDevice(&current), device, "cudaGetDevice");
  if (current != device) {
    check_cuda(cudaSetDevice(device), device, "cudaSetDevice");
    previous_ = current;
  }
  stream_ = static_cast<cudaStream_t>(
      current_stream(Device(DeviceType::CUDA, static_cast<DeviceIndex>(device))).raw());
}

LaunchScope::~LaunchScope() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

int LaunchScope::multiprocessors() const {
  static std::array<std::atomic<int>, 64> cache{};
  const auto i = static_cast<size_t>(device_);
  if (i < cache.size()) {
    if (const int n = cache[i].load(std::memory_order_relaxed); n > 0) return n;
  }
  int n = 0;
  check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device_), device_,
             "cudaDeviceGetAttribute(multiprocessor count)");
  n = n > 0 ? n : 1;
  if (i < cache.size()) cache[i].store(n, std::memory_order_relaxed);
  return n;
}

Tensor device_empty(IntArrayRef sizes, ScalarType dtype, int device, MemoryFormat format) {
  const DimVector strides = format == MemoryFormat::Contiguous
                                ? contiguous_strides(sizes)
                                : strides_for_memory_format(sizes, format);
  const auto itemsize = static_cast<size_t>(element_size(dtype));
  const auto nbytes = static_cast<size_t>(
      checked_storage_nbytes(sizes, strides, 0, itemsize, "CUDA kernel temporary"));
  const Device d(DeviceType::CUDA, static_cast<DeviceIndex>(device));
  Storage storage(nbytes, get_allocator(DeviceType::CUDA), d);
  return make_tensor(std::move(storage), dtype, sizes, strides);
}

bool is_dense_in(const Tensor& t, MemoryFormat format) {
  return t.is_contiguous(format) && !t.is_neg() && !t.is_conj();
}

Tensor dense_as(const Tensor& t, ScalarType dtype, MemoryFormat format) {
  if (!t.defined() || (t.dtype() == dtype && is_dense_in(t, format))) return t;
  BelowAutograd below;
  Tensor out = device_empty(t.sizes(), dtype, t.device().index(), format);
  if (t.numel() > 0) out.copy_(t);
  return out;
}

OutputStage::OutputStage(const Tensor& target, ScalarType dtype, MemoryFormat format,
                         bool keep_values)
    : target_(target) {
  if (!target.defined() || (target.dtype() == dtype && is_dense_in(target, format))) return;
  staged_ = device_empty(target.sizes(), dtype, target.device().index(), format);
  if (keep_values && target.numel() > 0) {
    BelowAutograd below;
    staged_.copy_(target);
  }
}

void OutputStage::finish() {
  if (!staged_.defined()) return;
  BelowAutograd below;
  if (target_.numel() > 0) Tensor(target_).copy_(staged_);
  staged_ = Tensor();
}

}  // namespace ferry::cuda
