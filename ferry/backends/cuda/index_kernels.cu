// The CUDA kernels of row lookups (index_select along dim 0), row scatter-adds (index_add along
// dim 0, with atomics, so rows may repeat) and the negative log likelihood, for any strides.
// Indices are checked on the device, where they are read: an index out of range stops the
// kernel with a device-side assertion, reported ("device-side assert triggered") by the next
// synchronization of the stream, and the CUDA context is unusable afterwards (the CUDA
// convention; the CPU kernels raise IndexError at once instead). The loss reduction runs in one
// block in a fixed order, so it is deterministic; index_add's atomics are not.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/device_reduce.cuh"
#include "ferry/backends/cuda/reduce_plan.h"
#include "ferry/core/convert.h"
#include "ferry/device/compute_kernels.h"
#include "ferry/iter/offset_calculator.h"
#include "ferry/iter/offset_launch.h"

namespace ferry::cuda {
namespace {

// A 1-d index tensor as the kernels read it.
struct IndexView {
  const char* data;
  int64_t stride_bytes;
  bool is_int64;
};

__device__ inline int64_t read_index(const IndexView& v, int64_t i) {
  const char* p = v.data + i * v.stride_bytes;
  return v.is_int64 ? *reinterpret_cast<const int64_t*>(p)
                    : static_cast<int64_t>(*reinterpret_cast<const int32_t*>(p));
}

// Rows of two tensors of one trailing shape: the trailing dims (coalesced, fastest first) and
// each tensor's row stride, in bytes.
struct RowGeometry {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides[2];
  int64_t width = 1;
  int64_t row_stride[2] = {0, 0};
};

RowGeometry row_geometry(const Tensor& a, const Tensor& b, const char* op) {
  RowGeometry g;
  const auto ea = static_cast<int64_t>(a.element_size());
  const auto eb = static_cast<int64_t>(b.element_size());
  for (int64_t d = a.dim() - 1; d >= 1; --d) {
    g.sizes.push_back(a.size(d));
    g.strides[0].push_back(a.stride(d) * ea);
    g.strides[1].push_back(b.stride(d) * eb);
    g.width *= a.size(d);
  }
  coalesce_fastest_first<2>(g.sizes, g.strides);
  FERRY_CHECK_AS(NotImplementedError, static_cast<int>(g.sizes.size()) <= kMaxOffsetDims, op,
                 ": expected at most ", kMaxOffsetDims, " trailing dims after merging, but got ",
                 g.sizes.size());
  g.row_stride[0] = a.stride(0) * ea;
  g.row_stride[1] = b.stride(0) * eb;
  return g;
}

// index as a 1-d tensor on the operands' device, checked for dtype and length.
Tensor flat_index(const Tensor& index, int64_t length, const char* op) {
  FERRY_CHECK_AS(DTypeError, index.dtype() == kInt64 || index.dtype() == kInt32, op,
                 ": expected int64 or int32 indices, but got ", index.dtype());
  FERRY_CHECK_AS(ShapeError, index.numel() == length, op, ": expected ", length,
                 " indices, but got shape ", shape_str(index));
  if (index.dim() == 1) return index;
  BelowAutograd below;
  return index.reshape({-1});
}

IndexView index_view(const Tensor& flat) {
  return {static_cast<const char*>(flat.const_data_ptr()),
          flat.numel() > 1 ? flat.stride(0) * static_cast<int64_t>(flat.element_size()) : 0,
          flat.dtype() == kInt64};
}

template <typename Index>
OffsetCalculator<2, Index> calculator(const RowGeometry& g) {
  const int64_t* s[2] = {g.strides[0].data(), g.strides[1].data()};
  return OffsetCalculator<2, Index>(static_cast<int>(g.sizes.size()), g.sizes.data(), s);
}

bool fits32(const RowGeometry& g, int64_t numel) {
  const int64_t* s[2] = {g.strides[0].data(), g.strides[1].data()};
  return numel < (int64_t{1} << 31) &&
         fits_32bit_indexing<2>(static_cast<int>(g.sizes.size()), g.sizes.data(), s);
}

// ---- index_select --------------------------------------------------------------------------

// out[r, j] = self[index[r], j]; operand 0 of `inner` is out, 1 is self. E moves the bytes.
template <typename E, typename Index>
__global__ void index_select_kernel(OffsetCalculator<2, Index> inner, IntDivider<Index> width,
                                    Index numel, char* out, const char* self, IndexView index,
                                    int64_t out_row, int64_t self_row, int64_t rows) {
  const Index step = static_cast<Index>(blockDim.x) * static_cast<Index>(gridDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    const DivMod<Index> rc = width.divmod(i);
    const int64_t row = read_index(index, static_cast<int64_t>(rc.div));
    check_index(row, rows, "index_select");
    const auto at = inner.get(rc.mod);
    *reinterpret_cast<E*>(out + static_cast<int64_t>(rc.div) * out_row + at.at[0]) =
        *reinterpret_cast<const E*>(self + row * self_row + at.at[1]);
  }
}

template <typename E, typename Index>
void launch_select(const RowGeometry& g, int64_t numel, const Tensor& out, const Tensor& self,
                   const IndexView& index, const LaunchScope& scope) {
  index_select_kernel<E, Index><<<blocks_for(numel), kThreads, 0, scope.stream()>>>(
      calculator<Index>(g), IntDivider<Index>(static_cast<Index>(g.width)),
      static_cast<Index>(numel), static_cast<char*>(out.data_ptr()),
      static_cast<const char*>(self.const_data_ptr()), index, g.row_stride[0], g.row_stride[1],
      self.size(0));
  check_launch(scope.device(), "index_select kernel");
}

void cuda_index_select(const Tensor& out, const Tensor& self, const Tensor& index) {
  constexpr const char* kOp = "index_select";
  const int device = operands_device(kOp, {{&out, "out"}, {&self, "self"}, {&index, "index"}});
  FERRY_CHECK_AS(ShapeError,
                 self.dim() >= 1 && out.dim() == self.dim() && out.size(0) == index.numel(), kOp,
                 ": expected out [", index.numel(), ", ...] for self ", self.sizes(),
                 ", but got out ", out.sizes());
  FERRY_CHECK_AS(ShapeError, out.sizes().slice(1).equals(self.sizes().slice(1)), kOp,
                 ": expected out and self to share their trailing sizes, but got out ", out.sizes(),
                 " and self ", self.sizes());
  check_dtype(out, self.dtype(), kOp, "out (self's dtype)");
  check_output(out, kOp, "out");
  const Tensor flat = flat_index(index, out.size(0), kOp);
  if (out.numel() == 0) return;
  BelowAutograd below;
  const Tensor src = self.is_neg() || self.is_conj() ? self.resolve_neg().resolve_conj() : self;
  const RowGeometry g = row_geometry(out, src, kOp);
  const int64_t numel = out.numel();
  const LaunchScope scope(device);
  const IndexView iv = index_view(flat);
  const auto run = [&]<typename E>() {
    if (fits32(g, numel)) {
      launch_select<E, uint32_t>(g, numel, out, src, iv, scope);
    } else {
      launch_select<E, uint64_t>(g, numel, out, src, iv, scope);
    }
  };
  switch (out.element_size()) {
    case 1:
      return run.operator()<uint8_t>();
    case 2:
      return run.operator()<uint16_t>();
    case 4:
      return run.operator()<uint32_t>();
    case 8:
      return run.operator()<uint64_t>();
    default:
      return run.operator()<ulonglong2>();
  }
}

// ---- index_add -----------------------------------------------------------------------------

// self[index[r], j] += source[r, j]; operand 0 of `inner` is self, 1 is source.
template <typename T, typename Index>
__global__ void index_add_kernel(OffsetCalculator<2, Index> inner, IntDivider<Index> width,
                                 Index numel, char* self, const char* source, IndexView index,
                                 int64_t self_row, int64_t source_row, int64_t rows, bool has_skip,
                                 int64_t skip) {
  const Index step = static_cast<Index>(blockDim.x) * static_cast<Index>(gridDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    const DivMod<Index> rc = width.divmod(i);
    const int64_t row = read_index(index, static_cast<int64_t>(rc.div));
    if (has_skip && row == skip) continue;
    check_index(row, rows, "index_add");
    const auto at = inner.get(rc.mod);
    atomic_add(
        reinterpret_cast<T*>(self + row * self_row + at.at[0]),
        *reinterpret_cast<const T*>(source + static_cast<int64_t>(rc.div) * source_row + at.at[1]));
  }
}

template <typename T, typename Index>
void launch_add(const RowGeometry& g, int64_t numel, const Tensor& self, const Tensor& source,
                const IndexView& index, std::optional<int64_t> skip, const LaunchScope& scope) {
  index_add_kernel<T, Index><<<blocks_for(numel), kThreads, 0, scope.stream()>>>(
      calculator<Index>(g), IntDivider<Index>(static_cast<Index>(g.width)),
      static_cast<Index>(numel), static_cast<char*>(self.data_ptr()),
      static_cast<const char*>(source.const_data_ptr()), index, g.row_stride[0], g.row_stride[1],
      self.size(0), skip.has_value(), skip.value_or(0));
  check_launch(scope.device(), "index_add kernel");
}

void cuda_index_add(const Tensor& self, const Tensor& index, const Tensor& source,
                    std::optional<int64_t> skip_index) {
  constexpr const char* kOp = "index_add";
  const int device =
      operands_device(kOp, {{&self, "self"}, {&index, "index"}, {&source, "source"}});
  FERRY_CHECK_AS(ShapeError,
                 self.dim() >= 1 && source.dim() == self.dim() && source.size(0) == index.numel(),
                 kOp, ": expected source [", index.numel(), ", ...] for self ", self.sizes(),
                 ", but got source ", source.sizes());
  FERRY_CHECK_AS(ShapeError, source.sizes().slice(1).equals(self.sizes().slice(1)), kOp,
                 ": expected self and source to share their trailing sizes, but got self ",
                 self.sizes(), " and source ", source.sizes());
  check_dtype(source, self.dtype(), kOp, "source (self's dtype)");
  FERRY_CHECK_AS(DTypeError, self.dtype() != kBool && !is_complex(self.dtype()), kOp,
                 ": expected a real dtype, but got ", self.dtype());
  check_output(self, kOp, "self");
  const Tensor flat = flat_index(index, source.size(0), kOp);
  if (source.numel() == 0) return;
  BelowAutograd below;
  const Tensor src = source.is_neg() ? source.resolve_neg() : source;
  const RowGeometry g = row_geometry(self, src, kOp);
  const int64_t numel = src.numel();
  const LaunchScope scope(device);
  const IndexView iv = index_view(flat);
  visit_dtype(self.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, std::complex<float>> &&
                  !std::is_same_v<T, std::complex<double>>) {
      if (fits32(g, numel)) {
        launch_add<T, uint32_t>(g, numel, self, src, iv, skip_index, scope);
      } else {
        launch_add<T, uint64_t>(g, numel, self, src, iv, skip_index, scope);
      }
    }
  });
}

// ---- nll_loss ------------------------------------------------------------------------------

// One block: per-element losses (or their sum) and the total weight of the non-ignored targets,
// accumulated in double.
template <typename T>
__global__ void nll_forward_kernel(const T* lp, int64_t s0, int64_t s1, IndexView target,
                                   const T* weight, int64_t weight_stride, int64_t n,
                                   int64_t classes, int64_t ignore, bool per_element, T* out,
                                   int64_t out_stride, T* total_weight) {
  double* scratch = shared_values<double>();
  double sum = 0, wsum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t c = read_index(target, i);
    double loss = 0;
    if (c != ignore) {
      check_index(c, classes, "nll_loss");
      const double wc = weight ? static_cast<double>(weight[c * weight_stride]) : 1.0;
      loss = -wc * static_cast<double>(lp[i * s0 + c * s1]);
      wsum += wc;
    }
    if (per_element) {
      out[i * out_stride] = convert_value<T>(loss);
    } else {
      sum += loss;
    }
  }
  sum = block_sum(sum, scratch);
  wsum = block_sum(wsum, scratch);
  if (threadIdx.x == 0) {
    if (!per_element) *out = convert_value<T>(sum);
    *total_weight = convert_value<T>(wsum);
  }
}

// Every element of grad_input: -w[t] * upstream * scale at its row's target, else 0.
template <typename T>
__global__ void nll_backward_kernel(T* gi, int64_t s0, int64_t s1, const T* grad_out,
                                    int64_t go_stride, IndexView target, const T* weight,
                                    int64_t weight_stride, int64_t n, int64_t classes,
                                    int64_t ignore, bool per_element, double scale) {
  const int64_t total = n * classes;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t i = e / classes, c = e - i * classes;
    const int64_t t = read_index(target, i);
    double g = 0;
    if (t != ignore) {
      if (c == 0) check_index(t, classes, "nll_loss_backward");
      if (c == t) {
        const double wc = weight ? static_cast<double>(weight[t * weight_stride]) : 1.0;
        const double up = static_cast<double>(per_element ? grad_out[i * go_stride] : grad_out[0]);
        g = -wc * up * scale;
      }
    }
    gi[i * s0 + c * s1] = convert_value<T>(g);
  }
}

template <typename Fn>
void visit_loss_dtype(ScalarType t, const char* op, Fn&& fn) {
  switch (t) {
    case kFloat64:
      return fn(double{});
    case kFloat32:
      return fn(float{});
    case kBFloat16:
      return fn(BFloat16{});
    case kFloat16:
      return fn(Half{});
    default:
      FERRY_FAIL_AS(DTypeError, op, ": expected floating log-probabilities, but got ", t);
  }
}

void check_loss_operands(const char* op, const Tensor& probs, const char* probs_name,
                         const Tensor& target, const Tensor& weight) {
  FERRY_CHECK_AS(ShapeError, probs.dim() == 1 || probs.dim() == 2, op, ": expected ", probs_name,
                 " of shape [N, C] or [C], but got ", shape_str(probs));
  if (weight.defined()) {
    check_shape(weight, {probs.size(probs.dim() - 1)}, op, "weight ([C])");
    check_dtype(weight, probs.dtype(), op, "weight");
  }
  const int64_t n = probs.dim() == 2 ? probs.size(0) : 1;
  FERRY_CHECK_AS(ShapeError, target.numel() == n, op, ": expected ", n, " targets for ", probs_name,
                 " ", shape_str(probs), ", but got shape ", shape_str(target));
}

void cuda_nll_loss_forward(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs,
                           const Tensor& target, const Tensor& weight, bool per_element,
                           int64_t ignore_index) {
  constexpr const char* kOp = "nll_loss";
  const int device = operands_device(kOp, {{&out, "out"},
                                           {&total_weight, "total_weight"},
                                           {&log_probs, "log_probs"},
                                           {&target, "target"},
                                           {&weight, "weight"}});
  check_loss_operands(kOp, log_probs, "log_probs", target, weight);
  const Tensor lp = log_probs.dim() == 1 ? log_probs.unsqueeze(0) : log_probs;
  const int64_t n = lp.size(0), classes = lp.size(1);
  FERRY_CHECK_AS(ShapeError, per_element ? out.numel() == n : out.numel() == 1, kOp,
                 ": expected out of ", per_element ? n : 1, " elements, but got shape ",
                 shape_str(out));
  FERRY_CHECK_AS(ShapeError, total_weight.numel() == 1, kOp,
                 ": expected a one-element total_weight, but got shape ", shape_str(total_weight));
  check_dtype(out, lp.dtype(), kOp, "out");
  check_dtype(total_weight, lp.dtype(), kOp, "total_weight");
  const Tensor flat = flat_index(target, n, kOp);
  BelowAutograd below;
  const Tensor probs = lp.is_neg() ? lp.resolve_neg() : lp;
  const Tensor w = weight.defined() && weight.is_neg() ? weight.resolve_neg() : weight;
  const LaunchScope scope(device);
  visit_loss_dtype(lp.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    nll_forward_kernel<T><<<1, kThreads, kThreads * sizeof(double), scope.stream()>>>(
        static_cast<const T*>(probs.const_data_ptr()), probs.stride(0), probs.stride(1),
        index_view(flat), w.defined() ? static_cast<const T*>(w.const_data_ptr()) : nullptr,
        w.defined() ? w.stride(0) : 0, n, classes, ignore_index, per_element,
        static_cast<T*>(out.data_ptr()), per_element && out.dim() > 0 ? out.stride(0) : 0,
        static_cast<T*>(total_weight.data_ptr()));
    check_launch(scope.device(), "nll_loss kernel");
  });
}

void cuda_nll_loss_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& target,
                            const Tensor& weight, bool per_element, int64_t ignore_index,
                            double scale) {
  constexpr const char* kOp = "nll_loss_backward";
  const int device = operands_device(kOp, {{&grad_input, "grad_input"},
                                           {&grad_out, "grad_out"},
                                           {&target, "target"},
                                           {&weight, "weight"}});
  check_loss_operands(kOp, grad_input, "grad_input", target, weight);
  const Tensor gi = grad_input.dim() == 1 ? grad_input.unsqueeze(0) : grad_input;
  const int64_t n = gi.size(0), classes = gi.size(1);
  FERRY_CHECK_AS(ShapeError, per_element ? grad_out.numel() == n : grad_out.numel() == 1, kOp,
                 ": expected grad_out of ", per_element ? n : 1, " elements, but got shape ",
                 shape_str(grad_out));
  check_dtype(grad_out, gi.dtype(), kOp, "grad_out");
  check_output(gi, kOp, "grad_input");
  const Tensor flat = flat_index(target, n, kOp);
  if (gi.numel() == 0) return;
  BelowAutograd below;
  const Tensor go = grad_out.is_neg() ? grad_out.resolve_neg() : grad_out;
  const Tensor w = weight.defined() && weight.is_neg() ? weight.resolve_neg() : weight;
  const LaunchScope scope(device);
  visit_loss_dtype(gi.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    nll_backward_kernel<T><<<blocks_for(n * classes), kThreads, 0, scope.stream()>>>(
        static_cast<T*>(gi.data_ptr()), gi.stride(0), gi.stride(1),
        static_cast<const T*>(go.const_data_ptr()), per_element && go.dim() > 0 ? go.stride(0) : 0,
        index_view(flat), w.defined() ? static_cast<const T*>(w.const_data_ptr()) : nullptr,
        w.defined() ? w.stride(0) : 0, n, classes, ignore_index, per_element, scale);
    check_launch(scope.device(), "nll_loss_backward kernel");
  });
}

}  // namespace

FERRY_REGISTER_DISPATCH(index_select_stub, DeviceType::CUDA, &cuda_index_select);
FERRY_REGISTER_DISPATCH(index_add_stub, DeviceType::CUDA, &cuda_index_add);
FERRY_REGISTER_DISPATCH(nll_loss_forward_stub, DeviceType::CUDA, &cuda_nll_loss_forward);
FERRY_REGISTER_DISPATCH(nll_loss_backward_stub, DeviceType::CUDA, &cuda_nll_loss_backward);

}  // namespace ferry::cuda
