// The CUDA copy kernel (device_copy_kernel_stub for DeviceType::CUDA): one thread per element in
// a grid-stride loop; the element's byte offsets come from OffsetCalculator and its value from
// copy_element (both FERRY_HOST_DEVICE and unit-tested on the host), so the kernel adds nothing
// but the launch. One kernel per destination dtype, reading any source dtype. Which launches a
// copy needs (split over the outermost dimensions beyond kMaxOffsetDims) and whether each takes
// 32-bit indices (multiply-shift division) come from for_each_offset_launch
// (ferry/iter/offset_launch.h), host code tested without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <string>

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
