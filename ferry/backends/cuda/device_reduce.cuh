// Device-side helpers of the CUDA compute kernels: block-wide reductions through shared memory
// (any value type, any associative combine), the atomic add every scatter kernel uses (native
// atomics for float, double, int32 and int64; a compare-and-swap on the enclosing 32-bit word
// for 8- and 16-bit types, adding in float for float16/bfloat16/float8 as the CPU kernels do),
// and the device-side index check whose failure is reported at the next synchronization.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "ferry/core/bfloat16.h"
#include "ferry/core/half.h"

// CUDA's device assertion is a call to __assert_fail, which glibc's assert.h declares only
// without NDEBUG and only where it is included; declared here whatever the build flags (a
// redeclaration where assert.h did declare it).
extern "C" __host__ __device__ void __assert_fail(const char* assertion, const char* file,
                                                  unsigned int line, const char* function) noexcept;

namespace ferry::cuda {

// Shared memory for `count` values of type V (the kernel is launched with enough dynamic
// shared memory).
template <typename V>
__device__ inline V* shared_values() {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  return reinterpret_cast<V*>(shared_bytes);
}

// Combines values[lane_out * lanes + 0 .. lanes) (lanes a power of two) into
// values[lane_out * lanes]; every thread of the block must call it.
template <typename V, typename Combine>
__device__ inline void block_combine(V* values, int lanes, int lane_out, int lane,
                                     Combine combine) {
  __syncthreads();
  for (int half = lanes / 2; half > 0; half /= 2) {
    if (lane < half) {
      V* row = values + lane_out * lanes;
      row[lane] = combine(row[lane], row[lane + half]);
    }
    __syncthreads();
  }
}

// The sum of v over a 1-d block of blockDim.x threads (a power of two), in shared memory of
// blockDim.x values; every thread gets the result.
template <typename V>
__device__ inline V block_sum(V v, V* scratch) {
  scratch[threadIdx.x] = v;
  block_combine(scratch, static_cast<int>(blockDim.x), 0, static_cast<int>(threadIdx.x),
                [](V a, V b) { return a + b; });
  const V total = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return total;
}

// An index outside [0, limit) stops the kernel with a device-side assertion: the launch
// returns, and the error ("device-side assert triggered") surfaces at the next synchronization
// of the stream or device, after which the CUDA context is unusable (the CUDA convention, as
// PyTorch's CUDA_KERNEL_ASSERT). The message printed names the operation and the index.
__device__ inline void check_index(int64_t index, int64_t limit, const char* op) {
  if (index < 0 || index >= limit) {
    printf("ferry %s: index %lld is out of bounds: expected a value in [0, %lld)\n", op,
           static_cast<long long>(index), static_cast<long long>(limit));
    __assert_fail("index out of bounds", __FILE__, static_cast<unsigned>(__LINE__), op);
  }
}

template <typename T>
__device__ inline T add_as_compute(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return static_cast<T>(static_cast<float>(a) + static_cast<float>(b));
  }
}

// *p += v, atomically.
template <typename T>
__device__ inline void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, float>) {
    atomicAdd(p, v);
  } else if constexpr (std::is_same_v<T, double>) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 600
    atomicAdd(p, v);
#else
    auto* word = reinterpret_cast<unsigned long long*>(p);
    unsigned long long old = *word, seen = 0;
    do {
      seen = old;
      old = atomicCAS(word, seen,
                      static_cast<unsigned long long>(__double_as_longlong(
                          __longlong_as_double(static_cast<long long>(seen)) + v)));
    } while (old != seen);
#endif
  } else if constexpr (sizeof(T) == 4) {
    atomicAdd(reinterpret_cast<unsigned int*>(p), static_cast<unsigned int>(v));
  } else if constexpr (sizeof(T) == 8) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2, "atomic_add: unsupported element size");
    // Compare-and-swap the aligned 32-bit word holding the element (allocations are padded to
    // far more than 4 bytes, so the word never leaves the allocation).
    const auto address = reinterpret_cast<uintptr_t>(p);
    auto* word = reinterpret_cast<unsigned int*>(address & ~uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(address & 3u) * 8u;
    constexpr unsigned kMask = sizeof(T) == 1 ? 0xFFu : 0xFFFFu;
    unsigned old = *word, seen = 0;
    do {
      seen = old;
      using Bits = std::conditional_t<sizeof(T) == 1, uint8_t, uint16_t>;
      const auto bits = static_cast<Bits>((seen >> shift) & kMask);
      T current;
      __builtin_memcpy(&current, &bits, sizeof(T));
      const T sum = add_as_compute(current, v);
      Bits sum_bits;
      __builtin_memcpy(&sum_bits, &sum, sizeof(T));
      const unsigned next = (seen & ~(kMask << shift)) | (static_cast<unsigned>(sum_bits) << shift);
      old = atomicCAS(word, seen, next);
    } while (old != seen);
  }
}

}  // namespace ferry::cuda
