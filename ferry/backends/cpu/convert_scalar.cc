// The portable half of the conversion kernels: conj/neg, contiguous conversion for every one of
// the 196 dtype pairs (the vectorized pairs directly, the rest in two steps through a small
// buffer of float32, float64 or an integer type), and runs with arbitrary strides. Results are
// bit-for-bit ferry::convert_value's; pointers need no alignment.
#include <algorithm>
#include <array>
#include <complex>
#include <cstring>
#include <type_traits>

#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/core/convert.h"

namespace ferry::cpu::kernels {
namespace {

using Byte = unsigned char;
constexpr int64_t kChunk = 256;              // elements per buffered step
constexpr size_t kChunkBytes = kChunk * 16;  // the widest element (complex128)

template <typename T>
T load(const void* p) {
  if constexpr (std::is_same_v<T, bool>) {
    // Any non-zero byte is true: a bool object holding 2..255 would be undefined behaviour,
    // and in practice converts to 2..255.
    return *static_cast<const Byte*>(p) != 0;
  } else {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
}

template <typename T>
void store(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// --- scalar conversion between the 8 "core" dtypes (bool, integers, float32, float64) ------------

using ConvertFn = void (*)(void* dst, const void* src, int64_t n);

template <typename To, typename From>
void convert_loop(void* dst, const void* src, int64_t n) {
  auto* d = static_cast<Byte*>(dst);
  const auto* s = static_cast<const Byte*>(src);
  for (int64_t i = 0; i < n; ++i) {
    store<To>(d + i * sizeof(To), convert_value<To>(load<From>(s + i * sizeof(From))));
  }
}

// Core dtypes are the first six (Bool..Int64) plus Float32 and Float64.
constexpr int core_index(ScalarType t) {
  switch (t) {
    case kFloat32:
      return 6;
    case kFloat64:
      return 7;
    default:
      return static_cast<int>(t) <= static_cast<int>(kInt64) ? static_cast<int>(t) : -1;
  }
}

template <typename From>
constexpr std::array<ConvertFn, 8> core_row() {
  return {&convert_loop<bool, From>,    &convert_loop<uint8_t, From>, &convert_loop<int8_t, From>,
          &convert_loop<int16_t, From>, &convert_loop<int32_t, From>, &convert_loop<int64_t, From>,
          &convert_loop<float, From>,   &convert_loop<double, From>};
}

// kCoreTable[from][to]
constexpr std::array<std::array<ConvertFn, 8>, 8> kCoreTable = {
    core_row<bool>(),    core_row<uint8_t>(), core_row<int8_t>(), core_row<int16_t>(),
    core_row<int32_t>(), core_row<int64_t>(), core_row<float>(),  core_row<double>()};

// The dtype a value passes through on the two-step path: the 16- and 8-bit floats widen to
// float32 (convert_value goes through float for them, both ways), complex to its real part.
constexpr ScalarType core_of(ScalarType t) {
  if (is_reduced_floating_point(t)) return kFloat32;
  return to_real_value_type(t);
}

// One step between a dtype and its core dtype, or between two core dtypes.
void convert_step(ScalarType dst_t, ScalarType src_t, void* dst, const void* src, int64_t n) {
  if (dst_t == src_t) {
    std::memcpy(dst, src, static_cast<size_t>(n) * element_size(dst_t));
    return;
  }
  if (convert_simd(dst_t, src_t, dst, src, n, false)) return;
  auto* d = static_cast<Byte*>(dst);
  const auto* s = static_cast<const Byte*>(src);
  if (is_complex(src_t)) {  // to its real type: the real parts
    const size_t part = element_size(dst_t);
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * part, s + 2 * i * part, part);
  } else if (is_complex(dst_t)) {  // from its real type: zero imaginary parts
    const size_t part = element_size(src_t);
    std::memset(dst, 0, static_cast<size_t>(n) * 2 * part);
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + 2 * i * part, s + i * part, part);
  } else if (src_t == kFloat8_e4m3fn) {
    for (int64_t i = 0; i < n; ++i) store<float>(d + 4 * i, float8_e4m3fn_bits_to_float(s[i]));
  } else if (src_t == kFloat8_e5m2) {
    for (int64_t i = 0; i < n; ++i) store<float>(d + 4 * i, float8_e5m2_bits_to_float(s[i]));
  } else if (dst_t == kFloat8_e4m3fn) {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_float8_e4m3fn_bits(load<float>(s + 4 * i));
  } else if (dst_t == kFloat8_e5m2) {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_float8_e5m2_bits(load<float>(s + 4 * i));
  } else if (dst_t == kFloat16) {
    for (int64_t i = 0; i < n; ++i)
      store<uint16_t>(d + 2 * i, float_to_half_bits(load<float>(s + 4 * i)));
  } else if (dst_t == kBFloat16) {
    for (int64_t i = 0; i < n; ++i) {
      store<uint16_t>(d + 2 * i, float_to_bfloat16_bits(load<float>(s + 4 * i)));
    }
  } else if (src_t == kFloat16) {
    for (int64_t i = 0; i < n; ++i)
      store<float>(d + 4 * i, half_bits_to_float(load<uint16_t>(s + 2 * i)));
  } else if (src_t == kBFloat16) {
    for (int64_t i = 0; i < n; ++i) {
      store<float>(d + 4 * i, bfloat16_bits_to_float(load<uint16_t>(s + 2 * i)));
    }
  } else {
    kCoreTable[core_index(src_t)][core_index(dst_t)](dst, src, n);
  }
}

// Pairs without a vectorized kernel: src -> core(src) -> core(dst) -> dst, 256 elements at a
// time through L1-resident buffers. Each step is exact or rounds exactly where convert_value does.
void convert_two_step(ScalarType dst_t, ScalarType src_t, Byte* dst, const Byte* src, int64_t n) {
  if (is_complex(dst_t) && is_complex(src_t)) {  // complex64 <-> complex128: part by part
    convert_step(to_real_value_type(dst_t), to_real_value_type(src_t), dst, src, 2 * n);
    return;
  }
  if (is_complex(src_t) && dst_t == kBool) {  // true if either part is non-zero
    for (int64_t i = 0; i < n; ++i) {
      if (src_t == kComplex64) {
        store<bool>(dst + i, convert_value<bool>(load<std::complex<float>>(src + 8 * i)));
      } else {
        store<bool>(dst + i, convert_value<bool>(load<std::complex<double>>(src + 16 * i)));
      }
    }
    return;
  }
  const ScalarType src_core = core_of(src_t);
  const ScalarType dst_core = core_of(dst_t);
  const size_t src_size = element_size(src_t);
  const size_t dst_size = element_size(dst_t);
  alignas(64) Byte a[kChunkBytes];
  alignas(64) Byte b[kChunkBytes];
  for (int64_t off = 0; off < n; off += kChunk) {
    const int64_t m = std::min(kChunk, n - off);
    const Byte* p = src + off * src_size;
    Byte* out = dst + off * dst_size;
    if (src_core != src_t) {
      convert_step(src_core, src_t, a, p, m);
      p = a;
    }
    if (dst_core == dst_t) {
      convert_step(dst_t, src_core, out, p, m);
    } else {
      if (dst_core != src_core) {
        convert_step(dst_core, src_core, b, p, m);
        p = b;
      }
      convert_step(dst_t, dst_core, out, p, m);
    }
  }
}

template <typename U>
void negate_ints(Byte* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    store<U>(p + i * sizeof(U), static_cast<U>(U{0} - load<U>(p + i * sizeof(U))));
}

// XORs `mask` into every `stride`-th U starting at p + first.
template <typename U>
void flip_bits(Byte* p, int64_t count, size_t first, size_t stride, U mask) {
  for (int64_t i = 0; i < count; ++i) {
    Byte* q = p + first + static_cast<size_t>(i) * stride;
    store<U>(q, static_cast<U>(load<U>(q) ^ mask));
  }
}

// Copies n elements of `size` bytes between strided addresses.
template <size_t kSize>
void move_elements(Byte* dst, int64_t dst_stride, const Byte* src, int64_t src_stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, kSize);
}

void move_strided(size_t size, Byte* dst, int64_t dst_stride, const Byte* src, int64_t src_stride,
                  int64_t n) {
  switch (size) {
    case 1:
      return move_elements<1>(dst, dst_stride, src, src_stride, n);
    case 2:
      return move_elements<2>(dst, dst_stride, src, src_stride, n);
    case 4:
      return move_elements<4>(dst, dst_stride, src, src_stride, n);
    case 8:
      return move_elements<8>(dst, dst_stride, src, src_stride, n);
    default:
      return move_elements<16>(dst, dst_stride, src, src_stride, n);
  }
}

}  // namespace

void apply_conj_neg(ScalarType t, void* data, int64_t n, ConjNeg flags) {
  flags = effective_conj_neg(t, flags.conj, flags.neg);
  if (!flags.any() || n <= 0) return;
  auto* p = static_cast<Byte*>(data);
  switch (t) {
    case kUInt8:
    case kInt8:
      return negate_ints<uint8_t>(p, n);
    case kInt16:
      return negate_ints<uint16_t>(p, n);
    case kInt32:
      return negate_ints<uint32_t>(p, n);
    case kInt64:
      return negate_ints<uint64_t>(p, n);
    case kFloat8_e4m3fn:
    case kFloat8_e5m2:
      return flip_bits<uint8_t>(p, n, 0, 1, 0x80u);
    case kFloat16:
    case kBFloat16:
      return flip_bits<uint16_t>(p, n, 0, 2, 0x8000u);
    case kFloat32:
      return flip_bits<uint32_t>(p, n, 0, 4, 0x80000000u);
    case kFloat64:
      return flip_bits<uint64_t>(p, n, 0, 8, uint64_t{1} << 63);
    case kComplex64:
    case kComplex128: {
      const size_t part = element_size(t) / 2;
      // neg flips both parts and conj the imaginary one, so together they flip the real part.
      if (flags.neg) {
        if (part == 4) flip_bits<uint32_t>(p, n, 0, 8, 0x80000000u);
        if (part == 8) flip_bits<uint64_t>(p, n, 0, 16, uint64_t{1} << 63);
      }
      if (flags.neg != flags.conj) {
        if (part == 4) flip_bits<uint32_t>(p, n, 4, 8, 0x80000000u);
        if (part == 8) flip_bits<uint64_t>(p, n, 8, 16, uint64_t{1} << 63);
      }
      return;
    }
    case kBool:
      return;
  }
}

void convert_contiguous(ScalarType dst_t, ScalarType src_t, void* dst, const void* src, int64_t n,
                        ConjNeg flags, bool stream) {
  if (n <= 0) return;
  flags = effective_conj_neg(dst_t, flags.conj, flags.neg);
  // Streamed stores leave the cache; a conj/neg pass would read them back from memory.
  stream = stream && !flags.any();
  if (dst_t == src_t) {
    copy_bytes(dst, src, static_cast<size_t>(n) * element_size(dst_t), stream);
  } else if (!convert_simd(dst_t, src_t, dst, src, n, stream)) {
    convert_two_step(dst_t, src_t, static_cast<Byte*>(dst), static_cast<const Byte*>(src), n);
  }
  apply_conj_neg(dst_t, dst, n, flags);
}

void strided_run(ScalarType dst_t, ScalarType src_t, char* dst_c, int64_t dst_stride,
                 const char* src_c, int64_t src_stride, int64_t n, ConjNeg flags, bool stream) {
  if (n <= 0) return;
  auto* dst = reinterpret_cast<Byte*>(dst_c);
  const auto* src = reinterpret_cast<const Byte*>(src_c);
  const auto dst_size = static_cast<int64_t>(element_size(dst_t));
  const auto src_size = static_cast<int64_t>(element_size(src_t));
  flags = effective_conj_neg(dst_t, flags.conj, flags.neg);
  const bool dst_dense = dst_stride == dst_size || n == 1;
  const bool src_dense = src_stride == src_size || n == 1;
  if (dst_dense && src_dense) {
    convert_contiguous(dst_t, src_t, dst, src, n, flags, stream);
    return;
  }
  if (src_stride == 0) {  // one value, converted once, then filled in
    alignas(16) Byte value[16];
    convert_contiguous(dst_t, src_t, value, src, 1, flags);
    if (dst_dense) {
      fill_contiguous(dst, value, static_cast<size_t>(dst_size), n, stream);
    } else {
      move_strided(static_cast<size_t>(dst_size), dst, dst_stride, value, 0, n);
    }
    return;
  }
  if (dst_t == src_t && !flags.any()) {
    if (!(dst_dense && src_stride == 2 * src_size &&
          gather_stride2_simd(static_cast<size_t>(src_size), dst, src, n, stream))) {
      move_strided(static_cast<size_t>(dst_size), dst, dst_stride, src, src_stride, n);
    }
    return;
  }
  // Gather into a, convert (into b unless dst is contiguous), scatter.
  alignas(64) Byte a[kChunkBytes];
  alignas(64) Byte b[kChunkBytes];
  for (int64_t off = 0; off < n; off += kChunk) {
    const int64_t m = std::min(kChunk, n - off);
    const Byte* p = src + off * src_stride;
    if (!src_dense) {
      if (!(src_stride == 2 * src_size &&
            gather_stride2_simd(static_cast<size_t>(src_size), a, p, m, false))) {
        move_strided(static_cast<size_t>(src_size), a, src_size, p, src_stride, m);
      }
      p = a;
    }
    if (dst_dense) {
      convert_contiguous(dst_t, src_t, dst + off * dst_size, p, m, flags, stream);
    } else {
      convert_contiguous(dst_t, src_t, b, p, m, flags);
      move_strided(static_cast<size_t>(dst_size), dst + off * dst_stride, dst_stride, b, dst_size,
                   m);
    }
  }
}

TransposeOp transpose_copy_op(size_t elem_size) {
  switch (elem_size) {
    case 1:
      return TransposeOp::kCopy1;
    case 2:
      return TransposeOp::kCopy2;
    case 4:
      return TransposeOp::kCopy4;
    case 8:
      return TransposeOp::kCopy8;
    case 16:
      return TransposeOp::kCopy16;
    default:
      return TransposeOp::kNone;
  }
}

TransposeOp transpose_op(ScalarType dst_t, ScalarType src_t) {
  if (dst_t == src_t) return transpose_copy_op(element_size(dst_t));
  if (src_t == kFloat32 && dst_t == kBFloat16) return TransposeOp::kF32ToBF16;
  if (src_t == kFloat32 && dst_t == kFloat16) return TransposeOp::kF32ToF16;
  if (src_t == kBFloat16 && dst_t == kFloat32) return TransposeOp::kBF16ToF32;
  if (src_t == kFloat16 && dst_t == kFloat32) return TransposeOp::kF16ToF32;
  return TransposeOp::kNone;
}

}  // namespace ferry::cpu::kernels
