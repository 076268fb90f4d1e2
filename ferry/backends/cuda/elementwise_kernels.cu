// The CUDA elementwise kernel (elementwise_stub for DeviceType::CUDA): one kernel family over the
// TensorIterator for every ElementwiseKind, with the arithmetic of elementwise_math.h (shared
// with, and tested on, the host: float16/bfloat16 compute in float and round once on the store).
// Contiguous operands whose pointers are aligned take a vectorised path (packs of 4 elements per
// load and store); everything else walks OffsetCalculator's byte offsets, split into launches and
// given 32-bit indices by for_each_offset_launch (ferry/iter/offset_launch.h), as the copy kernel.
// A dtype the CPU kernel refuses for a kind is refused here, with the CPU's message, before any
// launch.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/elementwise_math.h"
#include "ferry/iter/elementwise_stub.h"
#include "ferry/iter/offset_calculator.h"
#include "ferry/iter/offset_launch.h"

namespace ferry::cuda {
namespace {

constexpr int kPack = 4;

template <typename T>
struct alignas(sizeof(T) * kPack) Pack {
  T v[kPack];
};

template <typename T>
using S = ew::Scalars<ew::compute_t<T>>;

// Every operand dense along one dimension, every pointer aligned to its Pack.
template <typename T, typename Out, int NIn>
__global__ void contiguous_kernel(int64_t n, Out* out, const T* a, const T* b, S<T> s) {
  const int64_t packs = n / kPack;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t p = first; p < packs; p += step) {
    const Pack<T> pa = reinterpret_cast<const Pack<T>*>(a)[p];
    Pack<Out> po;
    if constexpr (NIn == 2) {
      const Pack<T> pb = reinterpret_cast<const Pack<T>*>(b)[p];
      FERRY_PRAGMA_UNROLL
      for (int i = 0; i < kPack; ++i) po.v[i] = ew::apply2<T, Out>(s, pa.v[i], pb.v[i]);
    } else {
      FERRY_PRAGMA_UNROLL
      for (int i = 0; i < kPack; ++i) po.v[i] = ew::apply1<T, Out>(s, pa.v[i]);
    }
    reinterpret_cast<Pack<Out>*>(out)[p] = po;
  }
  for (int64_t i = packs * kPack + first; i < n; i += step) {
    if constexpr (NIn == 2) {
      out[i] = ew::apply2<T, Out>(s, a[i], b[i]);
    } else {
      out[i] = ew::apply1<T, Out>(s, a[i]);
    }
  }
}

// Any strides: operand 0 the output, then the NIn inputs.
template <typename T, typename Out, int NIn, typename Index>
__global__ void strided_kernel(OffsetCalculator<NIn + 1, Index> offsets, Index n, char* out,
                               const char* a, const char* b, S<T> s) {
  const Index step = static_cast<Index>(blockDim.x) * static_cast<Index>(gridDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const auto at = offsets.get(i);
    const T x = *reinterpret_cast<const T*>(a + at.at[1]);
    if constexpr (NIn == 2) {
      *reinterpret_cast<Out*>(out + at.at[0]) =
          ew::apply2<T, Out>(s, x, *reinterpret_cast<const T*>(b + at.at[2]));
    } else {
      *reinterpret_cast<Out*>(out + at.at[0]) = ew::apply1<T, Out>(s, x);
    }
  }
}

// out = cond ? a : b, moving E (an unsigned integer of the element's size).
template <typename E, typename Index>
__global__ void where_kernel(OffsetCalculator<4, Index> offsets, Index n, char* out,
                             const char* cond, const char* a, const char* b) {
  const Index step = static_cast<Index>(blockDim.x) * static_cast<Index>(gridDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const auto at = offsets.get(i);
    const bool take_a = *reinterpret_cast<const uint8_t*>(cond + at.at[1]) != 0;
    *reinterpret_cast<E*>(out + at.at[0]) =
        *reinterpret_cast<const E*>(take_a ? a + at.at[2] : b + at.at[3]);
  }
}

bool aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// Calls launch(offsets calculator, numel, per-operand base pointers) once per launch the
// iterator needs.
template <int NArgs, typename Launch>
void for_each_strided_launch(const TensorIterator& iter, Launch&& launch) {
  const int64_t* strides[NArgs];
  char* base[NArgs];
  for (int arg = 0; arg < NArgs; ++arg) {
    strides[arg] = iter.strides(arg).data();
    base[arg] = static_cast<char*>(iter.data_ptr(arg));
  }
  const int64_t* sizes = iter.shape().data();
  for_each_offset_launch<NArgs>(iter.ndim(), sizes, strides, [&](const OffsetLaunch<NArgs>& l) {
    char* at[NArgs];
    for (int arg = 0; arg < NArgs; ++arg) at[arg] = base[arg] + l.offset[arg];
    if (l.index32) {
      launch(OffsetCalculator<NArgs, uint32_t>(l.ndim, sizes, strides),
             static_cast<uint32_t>(l.numel), at);
    } else {
      launch(OffsetCalculator<NArgs, uint64_t>(l.ndim, sizes, strides),
             static_cast<uint64_t>(l.numel), at);
    }
  });
}

template <typename T, typename Out, int NIn>
void run(const TensorIterator& iter, const S<T>& s, const LaunchScope& scope) {
  const int64_t n = iter.numel();
  char* out = static_cast<char*>(iter.data_ptr(0));
  const char* a = static_cast<const char*>(iter.data_ptr(1));
  const char* b = NIn == 2 ? static_cast<const char*>(iter.data_ptr(2)) : nullptr;
  if (iter.is_contiguous() && aligned(out, alignof(Pack<Out>)) && aligned(a, alignof(Pack<T>)) &&
      (NIn == 1 || aligned(b, alignof(Pack<T>)))) {
    contiguous_kernel<T, Out, NIn>
        <<<blocks_for((n + kPack - 1) / kPack), kThreads, 0, scope.stream()>>>(
            n, reinterpret_cast<Out*>(out), reinterpret_cast<const T*>(a),
            reinterpret_cast<const T*>(b), s);
    check_launch(scope.device(), "elementwise kernel");
    return;
  }
  for_each_strided_launch<NIn + 1>(iter, [&](const auto& offsets, auto numel, char** at) {
    using Index = decltype(numel);
    strided_kernel<T, Out, NIn, Index>
        <<<blocks_for(static_cast<int64_t>(numel)), kThreads, 0, scope.stream()>>>(
            offsets, numel, at[0], at[1], NIn == 2 ? at[2] : nullptr, s);
    check_launch(scope.device(), "elementwise kernel");
  });
}

template <typename E>
void run_where(const TensorIterator& iter, const LaunchScope& scope) {
  for_each_strided_launch<4>(iter, [&](const auto& offsets, auto numel, char** at) {
    using Index = decltype(numel);
    where_kernel<E, Index>
        <<<blocks_for(static_cast<int64_t>(numel)), kThreads, 0, scope.stream()>>>(
            offsets, numel, at[0], at[1], at[2], at[3]);
    check_launch(scope.device(), "where kernel");
  });
}

[[noreturn]] void unsupported(const ElementwiseOp& op, ScalarType t) {
  FERRY_FAIL_AS(DTypeError, "elementwise ", elementwise_kind_name(op.kind),
                ": expected a dtype the operation is defined for, but got ", t);
}

int check_operands(const TensorIterator& iter, const ElementwiseOp& op) {
  for (int i = 0; i < iter.ntensors(); ++i) {
    FERRY_CHECK_AS(DeviceError, iter.device(i).is_cuda(), "elementwise ",
                   elementwise_kind_name(op.kind), ": expected every operand on a CUDA device, ",
                   "but operand ", i, " is on ", iter.device(i));
    FERRY_CHECK_AS(DeviceError, iter.device(i) == iter.device(0), "elementwise ",
                   elementwise_kind_name(op.kind), ": expected every operand on one device, but ",
                   "got ", iter.device(0), " and ", iter.device(i));
  }
  FERRY_CHECK(iter.noutputs() == 1, "elementwise ", elementwise_kind_name(op.kind),
              ": expected one output, but got ", iter.noutputs());
  const int expected_inputs = op.kind == ElementwiseKind::Where ? 3
                              : op.scalar_operand               ? 1
                                                                : elementwise_arity(op.kind);
  FERRY_CHECK(iter.ninputs() == expected_inputs, "elementwise ", elementwise_kind_name(op.kind),
              ": expected ", expected_inputs, " tensor inputs, but got ", iter.ninputs());
  return iter.device(0).index();
}

void where(const TensorIterator& iter, const ElementwiseOp& op, const LaunchScope& scope) {
  const ScalarType t = iter.dtype(2);
  if (!ew::defined_for(op, t)) unsupported(op, t);
  FERRY_CHECK_AS(DTypeError, iter.dtype(1) == kBool, "where: expected a bool condition, but got ",
                 iter.dtype(1));
  FERRY_CHECK_AS(DTypeError, iter.dtype(0) == t && iter.dtype(3) == t,
                 "where: expected the output and both values of one dtype, but got ", iter.dtype(0),
                 ", ", t, " and ", iter.dtype(3));
  switch (element_size(t)) {
    case 1:
      return run_where<uint8_t>(iter, scope);
    case 2:
      return run_where<uint16_t>(iter, scope);
    case 4:
      return run_where<uint32_t>(iter, scope);
    case 8:
      return run_where<uint64_t>(iter, scope);
    default:
      unsupported(op, t);
  }
}

template <typename T>
void run_typed(const TensorIterator& iter, const ElementwiseOp& op, const LaunchScope& scope) {
  using C = ew::compute_t<T>;
  S<T> s;
  s.kind = op.kind;
  s.alpha = op.alpha.to<C>();
  s.scalar = op.scalar.to<C>();
  s.int_exponent = op.scalar.to<int64_t>();
  s.scalar_operand = op.scalar_operand;
  s.scalar_first = op.scalar_first;
  const bool two_inputs = iter.ninputs() == 2;
  if (is_comparison(op.kind)) {
    return two_inputs ? run<T, bool, 2>(iter, s, scope) : run<T, bool, 1>(iter, s, scope);
  }
  return two_inputs ? run<T, T, 2>(iter, s, scope) : run<T, T, 1>(iter, s, scope);
}

void cuda_elementwise(const TensorIterator& iter, const ElementwiseOp& op) {
  if (iter.numel() == 0) return;
  const int device = check_operands(iter, op);
  if (op.kind == ElementwiseKind::Where) {
    const LaunchScope scope(device);
    return where(iter, op, scope);
  }
  const ScalarType t = iter.dtype(1);
  if (!ew::defined_for(op, t)) unsupported(op, t);
  const ScalarType out = is_comparison(op.kind) ? kBool : t;
  FERRY_CHECK_AS(DTypeError, iter.dtype(0) == out, "elementwise ", elementwise_kind_name(op.kind),
                 ": expected a ", out, " output for ", t, " inputs, but got ", iter.dtype(0));
  if (iter.ninputs() == 2) {
    FERRY_CHECK_AS(DTypeError, iter.dtype(2) == t, "elementwise ", elementwise_kind_name(op.kind),
                   ": expected inputs of one dtype, but got ", t, " and ", iter.dtype(2));
  }
  const LaunchScope scope(device);
  switch (t) {
#define FERRY_CUDA_ELEMENTWISE_CASE(cpp, name) \
  case ScalarType::name:                       \
    return run_typed<cpp>(iter, op, scope);
    FERRY_CUDA_ELEMENTWISE_CASE(bool, Bool)
    FERRY_CUDA_ELEMENTWISE_CASE(uint8_t, UInt8)
    FERRY_CUDA_ELEMENTWISE_CASE(int8_t, Int8)
    FERRY_CUDA_ELEMENTWISE_CASE(int16_t, Int16)
    FERRY_CUDA_ELEMENTWISE_CASE(int32_t, Int32)
    FERRY_CUDA_ELEMENTWISE_CASE(int64_t, Int64)
    FERRY_CUDA_ELEMENTWISE_CASE(Half, Float16)
    FERRY_CUDA_ELEMENTWISE_CASE(BFloat16, BFloat16)
    FERRY_CUDA_ELEMENTWISE_CASE(float, Float32)
    FERRY_CUDA_ELEMENTWISE_CASE(double, Float64)
#undef FERRY_CUDA_ELEMENTWISE_CASE
    default:
      unsupported(op, t);
  }
}

}  // namespace

FERRY_REGISTER_DISPATCH(elementwise_stub, DeviceType::CUDA, &cuda_elementwise);

}  // namespace ferry::cuda
