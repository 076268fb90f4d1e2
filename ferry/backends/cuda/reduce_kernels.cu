// The CUDA reduction kernel (reduce_stub for DeviceType::CUDA): sum, mean, amax and argmax over
// any dims of any strides, with the CPU kernel's rules (floating inputs accumulate in double,
// integers and bool in int64; NaN wins amax; argmax takes the first maximum and the first NaN).
// The walk and the launch are planned on the host by reduce_plan.h (tested without a GPU): a
// block reduces a few outputs with its threads spread over the reduced index (or over neighbouring
// outputs when those lie closer in memory), and a large reduction is split over several blocks
// per output whose partial values a second kernel combines in split order.
#include <cuda_runtime_api.h>

#include <cstdint>
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

// Every argument of the kernels but the offsets. Trivially copyable.
struct ReduceArgs {
  const char* in;
  char* out;
  void* partial;  // splits x outputs values, when splits > 1
  ScalarType out_dtype;
  ReduceKind kind;
  bool reduce_fastest;
  int lanes_reduce;
  int lanes_out;
  int splits;
  int64_t out_blocks;
  int64_t per_split;
  int64_t outputs;
  int64_t reduced;
};

template <typename V>
__device__ void store_converted(char* p, ScalarType dtype, V v) {
  switch (dtype) {
#define FERRY_CUDA_STORE_CASE(cpp, name)                \
  case ScalarType::name:                                \
    *reinterpret_cast<cpp*>(p) = convert_value<cpp>(v); \
    return;
    FERRY_CUDA_STORE_CASE(bool, Bool)
    FERRY_CUDA_STORE_CASE(uint8_t, UInt8)
    FERRY_CUDA_STORE_CASE(int8_t, Int8)
    FERRY_CUDA_STORE_CASE(int16_t, Int16)
    FERRY_CUDA_STORE_CASE(int32_t, Int32)
    FERRY_CUDA_STORE_CASE(int64_t, Int64)
    FERRY_CUDA_STORE_CASE(Half, Float16)
    FERRY_CUDA_STORE_CASE(BFloat16, BFloat16)
    FERRY_CUDA_STORE_CASE(float, Float32)
    FERRY_CUDA_STORE_CASE(double, Float64)
#undef FERRY_CUDA_STORE_CASE
    default:
      return;  // refused on the host
  }
}

// Writes one output from its combined value.
template <typename V>
__device__ void store_result(char* p, const ReduceArgs& a, V v) {
  if constexpr (std::is_same_v<V, ArgmaxValue<double>> || std::is_same_v<V, ArgmaxValue<int64_t>>) {
    store_converted(p, a.out_dtype, v.index);
  } else {
    if (a.kind == ReduceKind::Mean) {
      store_converted(p, a.out_dtype, static_cast<double>(v) / static_cast<double>(a.reduced));
    } else {
      store_converted(p, a.out_dtype, v);
    }
  }
}

template <typename In, typename Op, typename Index>
__global__ void reduce_kernel(OffsetCalculator<2, Index> kept, OffsetCalculator<1, Index> red,
                              ReduceArgs a) {
  using V = typename Op::Value;
  using Acc = reduce_acc_t<In>;
  V* values = shared_values<V>();
  const int lane_reduce = static_cast<int>(a.reduce_fastest ? threadIdx.x : threadIdx.y);
  const int lane_out = static_cast<int>(a.reduce_fastest ? threadIdx.y : threadIdx.x);
  const int split = static_cast<int>(blockIdx.y);
  for (int64_t block = blockIdx.x; block < a.out_blocks; block += gridDim.x) {
    const ReduceThreadWork w = reduce_thread_work(a.lanes_reduce, a.lanes_out, a.per_split,
                                                  a.reduced, block, split, lane_out, lane_reduce);
    V acc = Op::identity();
    if (w.output < a.outputs) {
      const char* base = a.in + kept.get(static_cast<Index>(w.output)).at[0];
      for (int64_t r = w.begin; r < w.end; r += w.step) {
        const In v = *reinterpret_cast<const In*>(base + red.get(static_cast<Index>(r)).at[0]);
        acc = Op::combine(acc, Op::lift(static_cast<Acc>(v), r));
      }
    }
    values[lane_out * a.lanes_reduce + lane_reduce] = acc;
    block_combine(values, a.lanes_reduce, lane_out, lane_reduce,
                  [](V x, V y) { return Op::combine(x, y); });
    if (lane_reduce == 0 && w.output < a.outputs) {
      const V total = values[lane_out * a.lanes_reduce];
      if (a.splits == 1) {
        store_result(a.out + kept.get(static_cast<Index>(w.output)).at[1], a, total);
      } else {
        static_cast<V*>(a.partial)[static_cast<int64_t>(split) * a.outputs + w.output] = total;
      }
    }
    __syncthreads();
  }
}

// One thread per output: combines its splits' partial values in split order.
template <typename Op, typename Index>
__global__ void combine_splits_kernel(OffsetCalculator<2, Index> kept, ReduceArgs a) {
  using V = typename Op::Value;
  const auto* partial = static_cast<const V*>(a.partial);
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < a.outputs;
       o += step) {
    V acc = partial[o];
    for (int s = 1; s < a.splits; ++s) acc = Op::combine(acc, partial[s * a.outputs + o]);
    store_result(a.out + kept.get(static_cast<Index>(o)).at[1], a, acc);
  }
}

template <int NArgs>
bool fits32(const std::vector<int64_t>& sizes, const std::vector<int64_t> (&strides)[NArgs]) {
  const int64_t* s[NArgs];
  for (int i = 0; i < NArgs; ++i) s[i] = strides[i].data();
  return fits_32bit_indexing<NArgs>(static_cast<int>(sizes.size()), sizes.data(), s);
}

template <int NArgs, typename Index>
OffsetCalculator<NArgs, Index> calculator(const std::vector<int64_t>& sizes,
                                          const std::vector<int64_t> (&strides)[NArgs]) {
  const int64_t* s[NArgs];
  for (int i = 0; i < NArgs; ++i) s[i] = strides[i].data();
  return OffsetCalculator<NArgs, Index>(static_cast<int>(sizes.size()), sizes.data(), s);
}

template <typename In, typename Op, typename Index>
void launch(const ReduceGeometry& g, const ReduceLaunch& l, ReduceArgs args,
            const LaunchScope& scope) {
  using V = typename Op::Value;
  Tensor partial;
  if (l.splits > 1) {
    partial = device_empty({l.splits * g.outputs * static_cast<int64_t>(sizeof(V))}, kUInt8,
                           scope.device());
    args.partial = partial.data_ptr();
  }
  const auto kept = calculator<2, Index>(g.kept_sizes, g.kept_strides);
  const auto red = calculator<1, Index>(g.red_sizes, g.red_strides);
  const dim3 block =
      g.reduce_fastest
          ? dim3(static_cast<unsigned>(l.lanes_reduce), static_cast<unsigned>(l.lanes_out))
          : dim3(static_cast<unsigned>(l.lanes_out), static_cast<unsigned>(l.lanes_reduce));
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(l.out_blocks, kMaxBlocks * 16)),
                  static_cast<unsigned>(l.splits));
  reduce_kernel<In, Op, Index>
      <<<grid, block, kThreads * sizeof(V), scope.stream()>>>(kept, red, args);
  check_launch(scope.device(), "reduce kernel");
  if (l.splits > 1) {
    combine_splits_kernel<Op, Index>
        <<<blocks_for(g.outputs), kThreads, 0, scope.stream()>>>(kept, args);
    check_launch(scope.device(), "reduce kernel (combining splits)");
  }
}

template <typename In, typename Op>
void run(const ReduceGeometry& g, const ReduceArgs& args, const LaunchScope& scope) {
  const ReduceLaunch l = plan_reduce_launch(g.outputs, g.reduced, g.reduce_fastest, kThreads,
                                            4 * static_cast<int64_t>(scope.multiprocessors()));
  ReduceArgs a = args;
  a.lanes_reduce = l.lanes_reduce;
  a.lanes_out = l.lanes_out;
  a.splits = l.splits;
  a.out_blocks = l.out_blocks;
  a.per_split = l.per_split;
  const bool small = g.outputs < (int64_t{1} << 31) && g.reduced < (int64_t{1} << 31);
  if (small && fits32<2>(g.kept_sizes, g.kept_strides) && fits32<1>(g.red_sizes, g.red_strides)) {
    launch<In, Op, uint32_t>(g, l, a, scope);
  } else {
    launch<In, Op, uint64_t>(g, l, a, scope);
  }
}

const char* kind_name(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum:
      return "sum";
    case ReduceKind::Mean:
      return "mean";
    case ReduceKind::Amax:
      return "amax";
    case ReduceKind::Argmax:
      return "argmax";
  }
  return "reduce";
}

bool reducible(ScalarType t) {
  return is_integral(t, /*include_bool=*/true) || t == kFloat16 || t == kBFloat16 ||
         t == kFloat32 || t == kFloat64;
}

void cuda_reduce(const Tensor& out, const Tensor& input, const std::vector<int64_t>& dims,
                 ReduceKind kind) {
  const char* op = kind_name(kind);
  const int device = operands_device(op, {{&out, "out"}, {&input, "input"}});
  FERRY_CHECK_AS(ShapeError, out.dim() == input.dim(), op, ": expected the output (sizes ",
                 out.sizes(), ") to keep the input's rank (sizes ", input.sizes(), ")");
  DimVector expected(input.sizes());
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i];
    FERRY_CHECK_AS(IndexError, d >= 0 && d < input.dim() && (i == 0 || d > dims[i - 1]), op,
                   ": expected sorted, unique dims in [0, ", input.dim(), "), but got ",
                   IntArrayRef(dims));
    expected[static_cast<size_t>(d)] = 1;
  }
  check_shape(out, expected, op, "out (the input's sizes, 1 on the reduced dims)");
  FERRY_CHECK_AS(DTypeError, kind != ReduceKind::Argmax || out.dtype() == kInt64,
                 "argmax: expected an int64 output, but got ", out.dtype());
  FERRY_CHECK_AS(DTypeError, reducible(input.dtype()), op, ": expected a real dtype, but got ",
                 input.dtype());
  FERRY_CHECK_AS(DTypeError, reducible(out.dtype()), op, ": expected a real output dtype, but got ",
                 out.dtype());
  check_output(out, op, "out");
  if (out.numel() == 0) return;
  BelowAutograd below;
  const Tensor in = input.is_neg() ? input.resolve_neg() : input;
  const ReduceGeometry g = plan_reduce_geometry(
      std::vector<int64_t>(in.sizes().begin(), in.sizes().end()),
      std::vector<int64_t>(in.strides().begin(), in.strides().end()),
      std::vector<int64_t>(out.strides().begin(), out.strides().end()), dims,
      static_cast<int64_t>(in.element_size()), static_cast<int64_t>(out.element_size()));
  FERRY_CHECK(g.reduced > 0 || kind == ReduceKind::Sum || kind == ReduceKind::Mean, op,
              ": expected a non-empty reduction for amax/argmax, but the reduced dims of ",
              in.sizes(), " hold no elements");
  const LaunchScope scope(device);
  ReduceArgs args{};
  args.in = static_cast<const char*>(in.const_data_ptr());
  args.out = static_cast<char*>(out.data_ptr());
  args.out_dtype = out.dtype();
  args.kind = kind;
  args.reduce_fastest = g.reduce_fastest;
  args.outputs = g.outputs;
  args.reduced = g.reduced;
  visit_dtype(in.dtype(), [&]<typename In>() {
    if constexpr (std::is_arithmetic_v<In> || std::is_same_v<In, Half> ||
                  std::is_same_v<In, BFloat16>) {
      using Acc = reduce_acc_t<In>;
      switch (kind) {
        case ReduceKind::Sum:
        case ReduceKind::Mean:
          return run<In, ReduceSum<Acc>>(g, args, scope);
        case ReduceKind::Amax:
          return run<In, ReduceMax<Acc>>(g, args, scope);
        case ReduceKind::Argmax:
          return run<In, ReduceArgmax<Acc>>(g, args, scope);
      }
    }
  });
}

}  // namespace

FERRY_REGISTER_DISPATCH(reduce_stub, DeviceType::CUDA, &cuda_reduce);

}  // namespace ferry::cuda
