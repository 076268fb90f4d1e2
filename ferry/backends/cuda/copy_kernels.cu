// The CUDA copy kernel (device_copy_kernel_stub for DeviceType::CUDA). plan_cuda_copy
// (copy_plan.h, host code tested without a GPU) picks one of three kernels:
//  - dense: contiguous operands; each thread loads `vector` source elements as one aligned
//    vector, converts them and stores them as one (16 bytes on the wider side);
//  - transpose: 32 x 32 tiles through shared memory, reads coalesced along src's fast dim and
//    writes along dst's, over a batch of the remaining dims;
//  - strided (and fills): one element per thread in a grid-stride loop, its byte offsets from
//    OffsetCalculator, its value from copy_element with a switch on the source's dtype.
// The dense and transpose kernels are compiled per (dst, src) pair of has_typed_paths, so their
// loops convert with no switch. Every element is stored as copy_element stores it (the CPU
// engine's rules, unit-tested on the host). The strided kernel's launches (split over the
// outermost dims beyond kMaxOffsetDims, 32-bit indices when they cannot wrap) come from
// for_each_offset_launch (ferry/iter/offset_launch.h), host code tested without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ferry/backends/cuda/copy_plan.h"
#include "ferry/core/array_ref.h"
#include "ferry/core/error.h"
#include "ferry/core/scalar_type.h"
#include "ferry/device/device_copy_kernel.h"
#include "ferry/iter/copy_element.h"
#include "ferry/iter/offset_calculator.h"
#include "ferry/iter/offset_launch.h"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;  // grid-stride beyond this
// fits_32bit_indexing leaves 2^31 above the element count for the loop's last step.
static_assert(kThreads * kMaxBlocks <= (int64_t{1} << 31), "a grid stride could wrap 32 bits");

// What every thread needs besides the offsets. Trivially copyable: passed by value.
struct ElementArgs {
  char* dst;
  const char* src;
  uint64_t value[2];  // a fill's value (src_is_value)
  ScalarType src_dtype;
  bool src_is_value;
  bool conj;
  bool neg;
};

template <typename D>
__device__ D load_converted(const char* p, ScalarType src_dtype, bool conj, bool neg) {
  switch (src_dtype) {
#define FERRY_CUDA_LOAD_CASE(cpp, name) \
  case ScalarType::name:                \
    return copy_element<D>(load_element<cpp>(p), conj, neg);
    FERRY_FORALL_SCALAR_TYPES(FERRY_CUDA_LOAD_CASE)
#undef FERRY_CUDA_LOAD_CASE
  }
  return D{};
}

template <typename D, typename Index>
__global__ void strided_copy_kernel(OffsetCalculator<2, Index> offsets, Index numel,
                                    ElementArgs args) {
  const uint64_t value[2] = {args.value[0], args.value[1]};
  const char* src = args.src_is_value ? reinterpret_cast<const char*>(value) : args.src;
  const Index step = static_cast<Index>(blockDim.x) * static_cast<Index>(gridDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    const auto at = offsets.get(i);
    *reinterpret_cast<D*>(args.dst + at.at[0]) =
        load_converted<D>(src + at.at[1], args.src_dtype, args.conj, args.neg);
  }
}

// `N` elements of T loaded or stored as one access (N * sizeof(T) is 1 to 16 bytes, a power of
// two, and the address a multiple of it: the plan checks).
template <typename T, int N>
struct alignas(sizeof(T) * N) Packed {
  T v[N];
};

// Dense: chunk c holds elements [c * N, c * N + N); the elements past the last whole chunk are
// done one by one.
template <typename D, typename S, int N>
__global__ void dense_copy_kernel(D* dst, const S* src, int64_t numel, bool conj, bool neg) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunks = numel / N;
  const auto* in = reinterpret_cast<const Packed<S, N>*>(src);
  auto* out = reinterpret_cast<Packed<D, N>*>(dst);
  for (int64_t c = first; c < chunks; c += step) {
    const Packed<S, N> a = in[c];
    Packed<D, N> b;
#pragma unroll
    for (int k = 0; k < N; ++k) b.v[k] = copy_element<D>(a.v[k], conj, neg);
    out[c] = b;
  }
  for (int64_t i = chunks * N + first; i < numel; i += step) {
    dst[i] = copy_element<D>(src[i], conj, neg);
  }
}

// Transpose: block (tx, ty) of kTransposeTile x kTransposeRows threads moves tile (x, y) of one
// batch index: it reads rows of the tile along src's fast dim (threadIdx.x along the columns),
// converting into shared memory, then writes its columns along dst's fast dim (threadIdx.x
// along the rows). The tile's extra column keeps the column reads off one shared-memory bank.
template <typename D, typename S>
__global__ void transpose_copy_kernel(char* dst, const char* src, TransposeGeometry g, bool conj,
                                      bool neg) {
  // Raw bytes: a __shared__ array may not have a constructor to run (std::complex has one).
  __shared__ alignas(
      alignof(D)) unsigned char tile_bytes[sizeof(D) * kTransposeTile * (kTransposeTile + 1)];
  auto tile = reinterpret_cast<D(*)[kTransposeTile + 1]>(tile_bytes);
  const int64_t tiles_r = g.tiles_along_rows();
  const int64_t tiles_c = g.tiles_along_cols();
  for (int64_t b = blockIdx.z; b < g.batch; b += gridDim.z) {
    const auto at = g.batch_offsets.get(static_cast<uint64_t>(b));
    char* d = dst + at.at[0];
    const char* s = src + at.at[1];
    for (int64_t ty = blockIdx.y; ty < tiles_c; ty += gridDim.y) {
      for (int64_t tx = blockIdx.x; tx < tiles_r; tx += gridDim.x) {
        const int64_t row0 = tx * kTransposeTile;
        const int64_t col0 = ty * kTransposeTile;
        for (int r = threadIdx.y; r < kTransposeTile; r += kTransposeRows) {
          const int64_t row = row0 + r;
          const int64_t col = col0 + threadIdx.x;
          if (row < g.rows && col < g.cols) {
            tile[r][threadIdx.x] =
                copy_element<D>(*reinterpret_cast<const S*>(s + g.src_offset(row, col)), conj, neg);
          }
        }
        __syncthreads();
        for (int c = threadIdx.y; c < kTransposeTile; c += kTransposeRows) {
          const int64_t row = row0 + threadIdx.x;
          const int64_t col = col0 + c;
          if (row < g.rows && col < g.cols) {
            *reinterpret_cast<D*>(d + g.dst_offset(row, col)) = tile[threadIdx.x][c];
          }
        }
        __syncthreads();
      }
    }
  }
}

template <typename Fn>
void visit_floating(ScalarType t, Fn&& fn) {
  switch (t) {
    case ScalarType::Float32:
      fn.template operator()<float>();
      return;
    case ScalarType::Float64:
      fn.template operator()<double>();
      return;
    case ScalarType::Float16:
      fn.template operator()<Half>();
      return;
    case ScalarType::BFloat16:
      fn.template operator()<BFloat16>();
      return;
    default:
      FERRY_FAIL_AS(Error, "CUDA copy kernel: expected a floating dtype for a typed path, but got ",
                    dtype_name(t));
  }
}

// fn<D, S>() for a pair has_typed_paths accepts.
template <typename Fn>
void visit_typed_pair(ScalarType dst, ScalarType src, Fn&& fn) {
  if (dst == src) {
    visit_dtype(dst, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) fn.template operator()<T, T>();
    });
  } else {
    visit_floating(dst, [&]<typename D>() {
      visit_floating(src, [&]<typename S>() { fn.template operator()<D, S>(); });
    });
  }
}

void check_launch(int device, const char* what) {
  const cudaError_t error = cudaGetLastError();
  FERRY_CHECK_AS(DeviceError, error == cudaSuccess, "cuda:", device, ": ", what,
                 " launch failed: ", cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
}

template <typename Index>
void launch(const CopyProblem& p, int ndim, char* dst, const char* src, int64_t numel,
            cudaStream_t stream, int device) {
  const int64_t* strides[2] = {p.dst_strides.data(), p.src_strides.data()};
  const OffsetCalculator<2, Index> offsets(ndim, p.sizes.data(), strides);
  ElementArgs args{};
  args.dst = dst;
  args.src = src;
  static_assert(sizeof(args.value) == sizeof(p.value));
  __builtin_memcpy(args.value, p.value, sizeof(args.value));
  args.src_dtype = p.src_dtype;
  args.src_is_value = p.src_is_value;
  args.conj = p.conj;
  args.neg = p.neg;
  const int64_t blocks = std::min<int64_t>((numel + kThreads - 1) / kThreads, kMaxBlocks);
  visit_dtype(p.dst_dtype, [&]<typename D>() {
    strided_copy_kernel<D, Index><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        offsets, static_cast<Index>(numel), args);
  });
  check_launch(device, "copy kernel");
}

int64_t blocks_for(int64_t work) {
  return std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks);
}

void launch_dense(const CopyProblem& p, const CudaCopyPlan& plan, cudaStream_t stream, int device) {
  const int64_t numel = p.numel();
  visit_typed_pair(p.dst_dtype, p.src_dtype, [&]<typename D, typename S>() {
    constexpr int kWidest = static_cast<int>(16 / std::max(sizeof(D), sizeof(S)));
    auto* dst = reinterpret_cast<D*>(p.dst);
    const auto* src = reinterpret_cast<const S*>(p.src);
    const auto launch = [&]<int N>() {
      dense_copy_kernel<D, S, N>
          <<<static_cast<unsigned>(blocks_for(numel / N)), kThreads, 0, stream>>>(dst, src, numel,
                                                                                  p.conj, p.neg);
    };
    // The two widths the kernel is compiled for (plan.vector is one of them).
    if (plan.vector == kWidest) {
      launch.template operator()<kWidest>();
    } else {
      launch.template operator()<1>();
    }
  });
  check_launch(device, "dense copy kernel");
}

void launch_transpose(const CopyProblem& p, const CudaCopyPlan& plan, cudaStream_t stream,
                      int device) {
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y),
                  static_cast<unsigned>(plan.grid_z));
  const dim3 block(kTransposeTile, kTransposeRows);
  visit_typed_pair(p.dst_dtype, p.src_dtype, [&]<typename D, typename S>() {
    transpose_copy_kernel<D, S>
        <<<grid, block, 0, stream>>>(p.dst, p.src, plan.transpose, p.conj, p.neg);
  });
  check_launch(device, "transpose copy kernel");
}

// Makes the stream's device current for the launch, restoring the caller's afterwards.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    FERRY_CHECK_AS(DeviceError, cudaGetDevice(&previous_) == cudaSuccess, "cuda:", device,
                   ": copy kernel: cudaGetDevice failed");
    if (previous_ != device) {
      const cudaError_t error = cudaSetDevice(device);
      FERRY_CHECK_AS(DeviceError, error == cudaSuccess, "cuda:", device,
                     ": copy kernel: cudaSetDevice failed: ", cudaGetErrorString(error));
    } else {
      previous_ = -1;
    }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};

void cuda_copy_kernel(const CopyProblem& problem, const Stream& stream) {
  FERRY_CHECK_AS(DeviceError, stream.device_type() == DeviceType::CUDA,
                 "CUDA copy kernel: expected a CUDA stream, but got ", stream);
  FERRY_CHECK(problem.sizes.size() == problem.dst_strides.size() &&
                  problem.sizes.size() == problem.src_strides.size(),
              "CUDA copy kernel: expected as many strides as sizes, but got sizes ",
              IntArrayRef(problem.sizes), ", dst strides ", IntArrayRef(problem.dst_strides),
              " and src strides ", IntArrayRef(problem.src_strides));
  if (problem.numel() == 0) return;
  const int device = stream.device_index();
  const int64_t* strides[2] = {problem.dst_strides.data(), problem.src_strides.data()};
  auto* const dst = static_cast<char*>(problem.dst);
  const auto* const src = static_cast<const char*>(problem.src);
  const auto cuda_stream = static_cast<cudaStream_t>(stream.raw());
  DeviceScope scope(device);
  const CudaCopyPlan plan = plan_cuda_copy(problem);
  if (plan.kind == CudaCopyKind::kDense) {
    launch_dense(problem, plan, cuda_stream, device);
    return;
  }
  if (plan.kind == CudaCopyKind::kTranspose) {
    launch_transpose(problem, plan, cuda_stream, device);
    return;
  }
  // The split and the index width are decided by host code that is tested without a GPU.
  for_each_offset_launch<2>(
      problem.ndim(), problem.sizes.data(), strides, [&](const OffsetLaunch<2>& l) {
        char* d = dst + l.offset[0];
        const char* s = src == nullptr ? nullptr : src + l.offset[1];
        if (l.index32) {
          launch<uint32_t>(problem, l.ndim, d, s, l.numel, cuda_stream, device);
        } else {
          launch<uint64_t>(problem, l.ndim, d, s, l.numel, cuda_stream, device);
        }
      });
}

FERRY_REGISTER_DISPATCH(device_copy_kernel_stub, DeviceType::CUDA, &cuda_copy_kernel);

}  // namespace
}  // namespace ferry::cuda
