// Index arithmetic shared by the host and the device copy kernels: a linear index (dimension 0
// fastest, as the TensorIterator orders them) becomes one byte offset per operand over a
// coalesced shape, with the divisions by the sizes done as multiplications (IntDivider). Every
// function is FERRY_HOST_DEVICE, so the arithmetic a CUDA kernel runs is the one tested here.
// Invariants: IntDivider<uint32_t> is exact for every divisor >= 1 and every n < 2^32;
// OffsetCalculator::get(i)[arg] == sum_d index_d(i) * strides[arg][d] for every i < numel.
#pragma once

#include <cstdint>

#include "ferry/core/float_bits.h"  // FERRY_HOST_DEVICE

// Only the device pass knows the pragma (the host compiler would warn about it).
#if defined(__CUDA_ARCH__)
#define FERRY_PRAGMA_UNROLL _Pragma("unroll")
#else
#define FERRY_PRAGMA_UNROLL
#endif

namespace ferry {

// Dimensions a device kernel takes in one launch; a copy with more (after coalescing) is split
// by the launcher over its outermost dimensions.
inline constexpr int kMaxOffsetDims = 16;

template <typename Value>
struct DivMod {
  Value div;
  Value mod;
};

// n / d and n % d by plain division: the 64-bit fallback for copies that do not fit 32 bits.
template <typename Value>
struct IntDivider {
  IntDivider() = default;
  FERRY_HOST_DEVICE explicit IntDivider(Value d) : divisor(d) {}
  FERRY_HOST_DEVICE Value div(Value n) const { return n / divisor; }
  FERRY_HOST_DEVICE Value mod(Value n) const { return n % divisor; }
  FERRY_HOST_DEVICE DivMod<Value> divmod(Value n) const {
    const Value q = n / divisor;
    return {q, n - q * divisor};
  }
  Value divisor = 1;
};

// Division by a 32-bit divisor as a multiply-high and a shift (Granlund and Montgomery's
// round-up method): with l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1 (which fits 32
// bits because 2^l - d < d), n / d == (mulhi(m, n) + n) >> l. The sum is taken in 64 bits, so
// the result is exact for every n < 2^32, not only below 2^31.
template <>
struct IntDivider<uint32_t> {
  IntDivider() = default;
  FERRY_HOST_DEVICE explicit IntDivider(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  FERRY_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, magic);
#else
    const auto t = static_cast<uint32_t>((uint64_t{n} * magic) >> 32);
#endif
    return static_cast<uint32_t>((uint64_t{t} + n) >> shift);
  }
  FERRY_HOST_DEVICE uint32_t mod(uint32_t n) const { return n - div(n) * divisor; }
  FERRY_HOST_DEVICE DivMod<uint32_t> divmod(uint32_t n) const {
    const uint32_t q = div(n);
    return {q, n - q * divisor};
  }
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;
};

// Byte offsets of NArgs operands for a linear index. Index is uint32_t (fast division; the
// caller guarantees numel and every offset fit) or uint64_t. Trivially copyable, so it is
// passed to kernels by value.
template <int NArgs, typename Index>
struct OffsetCalculator {
  struct Offsets {
    Index at[NArgs];
  };

  OffsetCalculator() = default;
  // shape[d] for d < ndim (each >= 1), byte_strides[arg][d] (>= 0); ndim <= kMaxOffsetDims.
  FERRY_HOST_DEVICE OffsetCalculator(int ndim, const int64_t* shape,
                                     const int64_t* const* byte_strides)
      : dims(ndim) {
    for (int d = 0; d < ndim; ++d) {
      sizes[d] = IntDivider<Index>(static_cast<Index>(shape[d]));
      for (int arg = 0; arg < NArgs; ++arg) {
        strides[d][arg] = static_cast<Index>(byte_strides[arg][d]);
      }
    }
  }

  FERRY_HOST_DEVICE Offsets get(Index linear) const {
    Offsets out;
    FERRY_PRAGMA_UNROLL
    for (int arg = 0; arg < NArgs; ++arg) out.at[arg] = 0;
    FERRY_PRAGMA_UNROLL
    for (int d = 0; d < kMaxOffsetDims; ++d) {
      if (d == dims) break;
      const DivMod<Index> qr = sizes[d].divmod(linear);
      linear = qr.div;
      FERRY_PRAGMA_UNROLL
      for (int arg = 0; arg < NArgs; ++arg) out.at[arg] += qr.mod * strides[d][arg];
    }
    return out;
  }

  int dims = 0;
  IntDivider<Index> sizes[kMaxOffsetDims];
  Index strides[kMaxOffsetDims][NArgs] = {};
};

}  // namespace ferry
