// Vectorized contiguous conversions for the hot dtype pairs, the streaming copy and fill, the
// stride-2 gather and the (de)interleave of narrow planes, compiled once per SIMD target (Highway)
// and chosen at run time. Each result is bit-for-bit ferry::convert_value's: NaN, rounding and
// out-of-range rules are spelled out here rather than left to the instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ferry/backends/cpu/convert_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "ferry/backends/cpu/convert-inl.h"
#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/backends/cpu/hwy_dispatch.h"
#include "ferry/core/convert.h"

HWY_BEFORE_NAMESPACE();
namespace ferry::cpu::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
HWY_INLINE T LoadScalar(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
HWY_INLINE void StoreScalar(T v, void* p) {
  std::memcpy(p, &v, sizeof(T));
}

// Stores a vector, non-temporally when asked. Stream needs an address aligned to the vector's
// size and rounds vectors below 16 bytes up to 16, so callers only stream full vectors >= 16 bytes.
template <class D>
HWY_INLINE void Put(D d, hn::Vec<D> v, hn::TFromD<D>* p, bool stream) {
  if (stream) {
    hn::Stream(v, d, p);
  } else {
    hn::StoreU(v, d, p);
  }
}

// Elements before dst reaches a 64-byte boundary, or SIZE_MAX when streaming is off or
// impossible (dst not aligned to its element, or vectors below 16 bytes).
HWY_INLINE size_t StreamPeel(const void* dst, size_t elem, size_t vector_bytes, bool stream) {
  const auto addr = reinterpret_cast<uintptr_t>(dst);
  if (!stream || vector_bytes < 16 || addr % elem != 0) return SIZE_MAX;
  return ((64 - addr % 64) % 64) / elem;
}

// The shared loop: `scalar(i)` converts element i, `vec(i)` the `lanes` elements from i (storing
// with `stream`). With streaming, scalar elements first align dst to 64 bytes. Streaming kernels
// never fence (a fence per call would stall on every short row): see stream_fence().
template <class VecFn, class ScalarFn>
HWY_INLINE void Loop(size_t n, size_t lanes, size_t peel, VecFn vec, ScalarFn scalar) {
  const bool stream = peel != SIZE_MAX;
  size_t i = 0;
  if (stream) {
    for (; i < peel && i < n; ++i) scalar(i);
  }
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    vec(i, stream);
    vec(i + lanes, stream);
  }
  for (; i + lanes <= n; i += lanes) vec(i, stream);
  for (; i < n; ++i) scalar(i);
}

using Byte = unsigned char;

// One pair: From/To are the storage types (uint16_t for the 16-bit floats), `vec` converts a
// vector of DFrom lanes to a vector of the same number of To lanes.
template <typename To, typename From, class DFrom, class VecConvert, class ScalarConvert>
HWY_INLINE void Run(DFrom dfrom, const void* src_v, void* dst_v, size_t n, bool stream,
                    VecConvert vec, ScalarConvert scalar) {
  const hn::Rebind<To, DFrom> dto;
  const size_t lanes = hn::Lanes(dfrom);
  const auto* src = static_cast<const Byte*>(src_v);
  auto* dst = static_cast<Byte*>(dst_v);
  const size_t peel = StreamPeel(dst, sizeof(To), lanes * sizeof(To), stream);
  Loop(
      n, lanes, peel,
      [&](size_t i, bool s) {
        const auto in = hn::LoadU(dfrom, reinterpret_cast<const From*>(src + i * sizeof(From)));
        Put(dto, vec(in), reinterpret_cast<To*>(dst + i * sizeof(To)), s);
      },
      [&](size_t i) {
        StoreScalar<To>(scalar(LoadScalar<From>(src + i * sizeof(From))), dst + i * sizeof(To));
      });
}

// x86's truncating conversion result for NaN and out-of-range values: the minimum.
template <class DI, class DF>
HWY_INLINE hn::Vec<DI> TruncateToInt(DI di, DF df, hn::Vec<DF> v) {
  using TI = hn::TFromD<DI>;
  using TF = hn::TFromD<DF>;
  constexpr TF kLo = static_cast<TF>(std::numeric_limits<TI>::min());
  const auto in_range = hn::And(v >= hn::Set(df, kLo), v < hn::Set(df, -kLo));
  return hn::IfThenElse(hn::RebindMask(di, in_range), hn::ConvertTo(di, v),
                        hn::Set(di, std::numeric_limits<TI>::min()));
}

}  // namespace

// The vectorized pairs; false for the others.
bool ConvertSimd(ScalarType dst_t, ScalarType src_t, void* dst, const void* src, int64_t count,
                 bool stream) {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  // Emulated vectors gain nothing over the portable loops (which the compiler vectorizes for
  // the baseline), and their DemoteTo clamps float64 -> float32 overflow to the largest float
  // instead of giving inf.
  (void)dst_t, (void)src_t, (void)dst, (void)src, (void)count, (void)stream;
  return false;
#else
  const size_t n = static_cast<size_t>(count);
  const hn::ScalableTag<float> df;
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df_half;  // as many floats as a vector of doubles
  const hn::ScalableTag<int32_t> di;
  const hn::ScalableTag<int64_t> dl;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  if (dst_t == kBFloat16 && src_t == kFloat32) {
    Run<uint16_t, float>(
        df, src, dst, n, stream, [&](auto v) { return F32ToBF16(df, v); },
        [](float f) { return float_to_bfloat16_bits(f); });
  } else if (dst_t == kFloat32 && src_t == kBFloat16) {
    Run<float, uint16_t>(
        hn::Rebind<uint16_t, decltype(df)>(), src, dst, n, stream,
        [&](auto v) { return BF16ToF32(df, v); },
        [](uint16_t h) { return bfloat16_bits_to_float(h); });
  } else if (dst_t == kFloat16 && src_t == kFloat32) {
    Run<uint16_t, float>(
        df, src, dst, n, stream, [&](auto v) { return F32ToF16(df, v); },
        [](float f) { return float_to_half_bits(f); });
  } else if (dst_t == kFloat32 && src_t == kFloat16) {
    Run<float, uint16_t>(
        hn::Rebind<uint16_t, decltype(df)>(), src, dst, n, stream,
        [&](auto v) { return F16ToF32(df, v); }, [](uint16_t h) { return half_bits_to_float(h); });
  } else if (dst_t == kFloat64 && src_t == kFloat32) {
    Run<double, float>(
        df_half, src, dst, n, stream, [&](auto v) { return hn::PromoteTo(dd, v); },
        [](float f) { return static_cast<double>(f); });
  } else if (dst_t == kFloat32 && src_t == kFloat64) {
    Run<float, double>(
        dd, src, dst, n, stream, [&](auto v) { return hn::DemoteTo(df_half, v); },
        [](double f) { return static_cast<float>(f); });
  } else if (dst_t == kFloat32 && src_t == kInt32) {
    Run<float, int32_t>(
        di, src, dst, n, stream, [&](auto v) { return hn::ConvertTo(df, v); },
        [](int32_t x) { return static_cast<float>(x); });
  } else if (dst_t == kInt32 && src_t == kFloat32) {
    Run<int32_t, float>(
        df, src, dst, n, stream, [&](auto v) { return TruncateToInt(di, df, v); },
        [](float f) { return convert_value<int32_t>(f); });
  } else if (dst_t == kFloat64 && src_t == kInt64) {
    Run<double, int64_t>(
        dl, src, dst, n, stream, [&](auto v) { return hn::ConvertTo(dd, v); },
        [](int64_t x) { return static_cast<double>(x); });
  } else if (dst_t == kInt64 && src_t == kFloat64) {
    Run<int64_t, double>(
        dd, src, dst, n, stream, [&](auto v) { return TruncateToInt(dl, dd, v); },
        [](double f) { return convert_value<int64_t>(f); });
  } else if (dst_t == kFloat32 && src_t == kUInt8) {
    Run<float, uint8_t>(
        du8, src, dst, n, stream, [&](auto v) { return hn::ConvertTo(df, hn::PromoteTo(di, v)); },
        [](uint8_t x) { return static_cast<float>(x); });
  } else if (dst_t == kFloat32 && src_t == kBool) {
    // A bool byte may hold any value (from_blob over foreign memory); every non-zero one is
    // true, so clamp to 1 before widening.
    const auto one = hn::Set(du8, uint8_t{1});
    Run<float, uint8_t>(
        du8, src, dst, n, stream,
        [&](auto v) { return hn::ConvertTo(df, hn::PromoteTo(di, hn::Min(v, one))); },
        [](uint8_t x) { return x != 0 ? 1.0f : 0.0f; });
  } else {
    return false;
  }
  return true;
#endif
}

// memcpy with non-temporal stores: copies the head until dst is 64-byte aligned, then whole
// vectors, then the tail.
void CopyStream(void* dst_v, const void* src_v, size_t bytes) {
  const hn::ScalableTag<uint8_t> d;
  const size_t lanes = hn::Lanes(d);
  auto* dst = static_cast<Byte*>(dst_v);
  const auto* src = static_cast<const Byte*>(src_v);
  const size_t head = (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64;
  if (lanes < 16 || bytes < head + lanes) {
    std::memcpy(dst, src, bytes);
    return;
  }
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 4 * lanes <= bytes; i += 4 * lanes) {
    const auto v0 = hn::LoadU(d, src + i);
    const auto v1 = hn::LoadU(d, src + i + lanes);
    const auto v2 = hn::LoadU(d, src + i + 2 * lanes);
    const auto v3 = hn::LoadU(d, src + i + 3 * lanes);
    hn::Stream(v0, d, dst + i);
    hn::Stream(v1, d, dst + i + lanes);
    hn::Stream(v2, d, dst + i + 2 * lanes);
    hn::Stream(v3, d, dst + i + 3 * lanes);
  }
  for (; i + lanes <= bytes; i += lanes) hn::Stream(hn::LoadU(d, src + i), d, dst + i);
  std::memcpy(dst + i, src + i, bytes - i);
}

void CopyStreamRows(char* dst, int64_t dst_stride, const char* src, int64_t src_stride,
                    size_t bytes, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) CopyStream(dst + r * dst_stride, src + r * src_stride, bytes);
}

// Fills `bytes` at dst with the 64-byte `pattern`, whose byte k belongs at any address equal
// to dst + k modulo 64.
void FillPattern(void* dst_v, const void* pattern_v, size_t bytes, bool stream) {
  const hn::ScalableTag<uint8_t> d;
  const size_t lanes = hn::Lanes(d);
  auto* dst = static_cast<Byte*>(dst_v);
  const auto* pattern = static_cast<const Byte*>(pattern_v);
  // Doubled, so any 64-byte window of the pattern is contiguous.
  alignas(64) Byte twice[128];
  std::memcpy(twice, pattern, 64);
  std::memcpy(twice + 64, pattern, 64);
  const size_t head = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64);
  for (size_t k = 0; k < head; ++k) dst[k] = pattern[k % 64];
  // From the aligned address on, byte k of a line belongs at offset (head + k) mod 64.
  const Byte* window = twice + head % 64;
  size_t i = head;
  if (lanes >= 16 && lanes <= 64) {
    hn::Vec<decltype(d)> v[64 / 16];
    const size_t per_line = 64 / lanes;
    for (size_t k = 0; k < per_line; ++k) v[k] = hn::LoadU(d, window + k * lanes);
    const bool nt = stream && lanes >= 16;
    for (; i + 64 <= bytes; i += 64) {
      for (size_t k = 0; k < per_line; ++k) Put(d, v[k], dst + i + k * lanes, nt);
    }
  }
  for (; i < bytes; ++i) dst[i] = window[(i - head) % 64];
}

// dst[k] = src[2k] for n elements of elem_size bytes (2, 4 or 8).
bool GatherStride2(size_t elem_size, void* dst_v, const void* src_v, int64_t count, bool stream) {
#if HWY_TARGET == HWY_SCALAR
  (void)elem_size, (void)dst_v, (void)src_v, (void)count, (void)stream;
  return false;  // one lane: nothing to gain over the scalar loop
#else
  const size_t n = static_cast<size_t>(count);
  auto* dst = static_cast<Byte*>(dst_v);
  const auto* src = static_cast<const Byte*>(src_v);
  auto run = [&](auto d) {
    using T = hn::TFromD<decltype(d)>;
    const size_t lanes = hn::Lanes(d);
    const size_t peel = StreamPeel(dst, sizeof(T), lanes * sizeof(T), stream);
    auto scalar = [&](size_t i) {
      std::memcpy(dst + i * sizeof(T), src + 2 * i * sizeof(T), sizeof(T));
    };
    // A vector pair at i also reads the odd element after the last one it keeps, so the final
    // element is left to the scalar tail: the run may end exactly at the end of memory.
    Loop(
        n - 1, lanes, peel,
        [&](size_t i, bool s) {
          const T* p = reinterpret_cast<const T*>(src + 2 * i * sizeof(T));
          const auto lo = hn::LoadU(d, p);
          const auto hi = hn::LoadU(d, p + lanes);
          Put(d, hn::ConcatEven(d, hi, lo), reinterpret_cast<T*>(dst + i * sizeof(T)), s);
        },
        scalar);
    scalar(n - 1);
  };
  if (n == 0) return true;
  switch (elem_size) {
    case 2:
      run(hn::ScalableTag<uint16_t>());
      return true;
    case 4:
      run(hn::ScalableTag<uint32_t>());
      return true;
    case 8:
      run(hn::ScalableTag<uint64_t>());
      return true;
    default:
      return false;
  }
#endif
}

#if HWY_TARGET != HWY_SCALAR
// kPlanes rows `stride` bytes apart from `planes` <-> one packed row of tuples at `packed`:
// `lanes` elements of each row per vector, kPlanes vectors per tuple group.
template <int kPlanes, class D>
HWY_INLINE void InterleaveVec(D d, const Byte* planes, int64_t stride, Byte* packed) {
  using T = hn::TFromD<D>;
  const auto row = [&](int c) {
    return hn::LoadU(d, reinterpret_cast<const T*>(planes + c * stride));
  };
  T* out = reinterpret_cast<T*>(packed);
  if constexpr (kPlanes == 2) {
    hn::StoreInterleaved2(row(0), row(1), d, out);
  } else if constexpr (kPlanes == 3) {
    hn::StoreInterleaved3(row(0), row(1), row(2), d, out);
  } else {
    hn::StoreInterleaved4(row(0), row(1), row(2), row(3), d, out);
  }
}

template <int kPlanes, class D>
HWY_INLINE void DeinterleaveVec(D d, const Byte* packed, Byte* planes, int64_t stride) {
  using T = hn::TFromD<D>;
  const T* in = reinterpret_cast<const T*>(packed);
  const auto put = [&](int c, hn::Vec<D> v) {
    hn::StoreU(v, d, reinterpret_cast<T*>(planes + c * stride));
  };
  hn::Vec<D> v0, v1, v2, v3;
  if constexpr (kPlanes == 2) {
    hn::LoadInterleaved2(d, in, v0, v1);
  } else if constexpr (kPlanes == 3) {
    hn::LoadInterleaved3(d, in, v0, v1, v2);
  } else {
    hn::LoadInterleaved4(d, in, v0, v1, v2, v3);
  }
  put(0, v0);
  put(1, v1);
  if constexpr (kPlanes >= 3) put(2, v2);
  if constexpr (kPlanes == 4) put(3, v3);
}

// n tuples: vectors, then the tail element by element.
template <int kPlanes, class D>
HWY_INLINE void PlanesRun(D d, bool to_packed, Byte* packed, Byte* planes, int64_t stride,
                          size_t n) {
  constexpr size_t kSize = sizeof(hn::TFromD<D>);
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    Byte* tuple = packed + i * kPlanes * kSize;
    if (to_packed) {
      InterleaveVec<kPlanes>(d, planes + i * kSize, stride, tuple);
    } else {
      DeinterleaveVec<kPlanes>(d, tuple, planes + i * kSize, stride);
    }
  }
  if (i < n && i >= lanes) {
    // The tail as one more vector ending at the row's end, overlapping the last one: the
    // overlapped elements are stored twice with the same values (src and dst never overlap
    // here: copy_ stages partly overlapping operands). A row of 28 float32: 16 + 16 lanes.
    const size_t last = n - lanes;
    Byte* tuple = packed + last * kPlanes * kSize;
    if (to_packed) {
      InterleaveVec<kPlanes>(d, planes + last * kSize, stride, tuple);
    } else {
      DeinterleaveVec<kPlanes>(d, tuple, planes + last * kSize, stride);
    }
    return;
  }
  if constexpr (hn::MaxLanes(D()) > 4) {
    // Rows shorter than a vector in vectors half as wide.
    if (i < n) {
      PlanesRun<kPlanes>(hn::Half<D>(), to_packed, packed + i * kPlanes * kSize, planes + i * kSize,
                         stride, n - i);
    }
    return;
  }
  for (; i < n; ++i) {
    for (int c = 0; c < kPlanes; ++c) {
      Byte* in_tuple = packed + (i * kPlanes + static_cast<size_t>(c)) * kSize;
      Byte* in_plane = planes + c * stride + static_cast<int64_t>(i * kSize);
      if (to_packed) {
        std::memcpy(in_tuple, in_plane, kSize);
      } else {
        std::memcpy(in_plane, in_tuple, kSize);
      }
    }
  }
}

template <class D>
HWY_INLINE bool PlanesOf(D d, int planes, bool to_packed, Byte* packed, Byte* rows, int64_t stride,
                         size_t n) {
  switch (planes) {
    case 2:
      PlanesRun<2>(d, to_packed, packed, rows, stride, n);
      return true;
    case 3:
      PlanesRun<3>(d, to_packed, packed, rows, stride, n);
      return true;
    case 4:
      PlanesRun<4>(d, to_packed, packed, rows, stride, n);
      return true;
    default:
      return false;
  }
}
#endif

constexpr size_t kStreamMinRowBytes = 1024;

// Planes <-> packed tuples (Note [narrow gathers] in copy_run.cc): `planes` (2, 3 or 4) rows of
// n elements of elem_size bytes (1, 2, 4 or 8), `stride` bytes apart from `rows`, and one
// packed row of n tuples at `packed`. to_packed: packed[k * planes + c] = row c's element k;
// otherwise the reverse; with streaming stores when `stream`. False when not vectorized (one
// lane, other sizes).
bool MovePlanesRow(size_t elem_size, int planes, bool to_packed, void* packed_v, void* rows_v,
                   int64_t stride, int64_t count, bool stream) {
#if HWY_TARGET == HWY_SCALAR
  (void)elem_size, (void)planes, (void)to_packed, (void)packed_v, (void)rows_v, (void)stride,
      (void)count, (void)stream;
  return false;
#else
  auto* packed = static_cast<Byte*>(packed_v);
  auto* rows = static_cast<Byte*>(rows_v);
  const auto n = static_cast<size_t>(count);
  // Streaming only rows of whole lines, most of them (a row of pixel unshuffle's, 28 float32,
  // streamed as a line and two pieces ran at a sixth of the speed of ordinary stores), and only
  // shapes the vector path below takes.
  const size_t tuple = elem_size * static_cast<size_t>(planes);
  const bool streams = stream && n * elem_size >= kStreamMinRowBytes && planes >= 2 &&
                       planes <= 4 && elem_size > 0 && elem_size <= 8;
  if (streams && to_packed) {
    // Streaming stores of the packed row: interleaved into an L1 buffer a piece at a time, then
    // streamed out (Highway's StoreInterleaved has no non-temporal form). The packed row is
    // written without being read first: a third less traffic than ordinary stores.
    constexpr size_t kBufferBytes = 4096;
    alignas(64) Byte buffer[kBufferBytes];
    const size_t per_piece = kBufferBytes / tuple;
    for (size_t i = 0; i < n; i += per_piece) {
      const size_t m = std::min(per_piece, n - i);
      if (!MovePlanesRow(elem_size, planes, true, buffer, rows + i * elem_size, stride,
                         static_cast<int64_t>(m), false)) {
        return false;
      }
      CopyStream(packed + i * tuple, buffer, m * tuple);
    }
    return true;
  }
  if (streams) {
    // The rows stream the same way: a piece of each split into the buffer's rows, then streamed.
    constexpr size_t kBufferBytes = 8192;
    alignas(64) Byte buffer[kBufferBytes];
    const size_t per_piece = kBufferBytes / tuple / 64 * 64;
    const auto piece_stride = static_cast<int64_t>(per_piece * elem_size);
    for (size_t i = 0; i < n; i += per_piece) {
      const size_t m = std::min(per_piece, n - i);
      if (!MovePlanesRow(elem_size, planes, false, packed + i * tuple, buffer, piece_stride,
                         static_cast<int64_t>(m), false)) {
        return false;
      }
      for (int c = 0; c < planes; ++c) {
        CopyStream(rows + c * stride + static_cast<int64_t>(i * elem_size),
                   buffer + c * piece_stride, m * elem_size);
      }
    }
    return true;
  }
  switch (elem_size) {
    case 1:
      return PlanesOf(hn::ScalableTag<uint8_t>(), planes, to_packed, packed, rows, stride, n);
    case 2:
      return PlanesOf(hn::ScalableTag<uint16_t>(), planes, to_packed, packed, rows, stride, n);
    case 4:
      return PlanesOf(hn::ScalableTag<uint32_t>(), planes, to_packed, packed, rows, stride, n);
    case 8:
      return PlanesOf(hn::ScalableTag<uint64_t>(), planes, to_packed, packed, rows, stride, n);
    default:
      return false;
  }
#endif
}

// Rows of tuples asked for ahead of a block's split (pixel unshuffle, Zen 4: 16 rows, 7 KiB,
// beat 8 and 32; without, the src loads took most of the time).
constexpr int64_t kPlanesAheadRows = 16;

// `nrows` rows of MovePlanesRow: row r's packed tuples at packed + r * packed_row_stride, its
// plane rows at rows + r * row_stride (the planes still `stride` apart). When the plane rows
// follow each other (row_stride = n elements: pixel unshuffle's rows of 28 pixels) and the
// rows are split into planes (to_packed false), a plane's rows are one run: split a piece of
// rows into an L1 buffer, then stream each plane's run, so that rows too short to stream alone
// (112 bytes) are still written as whole lines without being read first.
bool MovePlanes(size_t elem_size, int planes, bool to_packed, void* packed_v,
                int64_t packed_row_stride, void* rows_v, int64_t stride, int64_t row_stride,
                int64_t count, int64_t nrows, bool stream) {
  auto* packed = static_cast<Byte*>(packed_v);
  auto* rows = static_cast<Byte*>(rows_v);
  const auto row_bytes = static_cast<int64_t>(elem_size) * count;
  constexpr int64_t kBufferBytes = 8192;
  const int64_t per_piece = row_bytes * planes > 0 ? kBufferBytes / (row_bytes * planes) : 0;
  if (stream && !to_packed && nrows > 1 && row_stride == row_bytes && per_piece >= 1 &&
      row_bytes * nrows >= static_cast<int64_t>(kStreamMinRowBytes)) {
    alignas(64) Byte buffer[kBufferBytes];
    for (int64_t r0 = 0; r0 < nrows; r0 += per_piece) {
      const int64_t m = std::min(per_piece, nrows - r0);
      for (int64_t r = 0; r < m; ++r) {
        // The tuples kPlanesAheadRows rows on (past the block: the next one's), asked for now:
        // rows a few hundred bytes apart are read faster than the prefetchers fetch them.
        const Byte* ahead = packed + (r0 + r + kPlanesAheadRows) * packed_row_stride;
        for (int64_t b = 0; b < row_bytes * planes; b += 64) hwy::Prefetch(ahead + b);
        if (!MovePlanesRow(elem_size, planes, false, packed + (r0 + r) * packed_row_stride,
                           buffer + r * row_bytes, m * row_bytes, count, false)) {
          return false;
        }
      }
      for (int c = 0; c < planes; ++c) {
        CopyStream(rows + c * stride + r0 * row_bytes, buffer + c * m * row_bytes,
                   static_cast<size_t>(m * row_bytes));
      }
    }
    return true;
  }
  for (int64_t r = 0; r < nrows; ++r) {
    // Whether a row is vectorized depends only on the sizes: a refusal comes at row 0.
    if (!MovePlanesRow(elem_size, planes, to_packed, packed + r * packed_row_stride,
                       rows + r * row_stride, stride, count, stream)) {
      return false;
    }
  }
  return true;
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

void StreamFence() { hwy::FlushStream(); }

}  // namespace ferry::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ferry::cpu {

HWY_EXPORT(ConvertSimd);
HWY_EXPORT(CopyStream);
HWY_EXPORT(CopyStreamRows);
HWY_EXPORT(FillPattern);
HWY_EXPORT(GatherStride2);
HWY_EXPORT(MovePlanes);
HWY_EXPORT(TargetName);
HWY_EXPORT(StreamFence);

namespace kernels {

bool convert_simd(ScalarType dst_t, ScalarType src_t, void* dst, const void* src, int64_t n,
                  bool stream) {
  return FERRY_DISPATCH(ConvertSimd)(dst_t, src_t, dst, src, n, stream);
}

void copy_bytes(void* dst, const void* src, size_t bytes, bool stream) {
  if (stream) {
    FERRY_DISPATCH(CopyStream)(dst, src, bytes);
  } else if (bytes != 0) {
    std::memcpy(dst, src, bytes);
  }
}

void stream_rows(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, size_t bytes,
                 int64_t rows) {
  FERRY_DISPATCH(CopyStreamRows)(dst, dst_stride, src, src_stride, bytes, rows);
}

void fill_contiguous(void* dst, const void* value, size_t elem_size, int64_t n, bool stream) {
  if (n <= 0) return;
  const size_t bytes = static_cast<size_t>(n) * elem_size;
  if (bytes <= 64) {
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(static_cast<char*>(dst) + k * elem_size, value, elem_size);
    return;
  }
  alignas(64) unsigned char pattern[64];
  for (size_t k = 0; k < 64; k += elem_size) std::memcpy(pattern + k, value, elem_size);
  FERRY_DISPATCH(FillPattern)(dst, pattern, bytes, stream);
}

bool gather_stride2_simd(size_t elem_size, void* dst, const void* src, int64_t n, bool stream) {
  return FERRY_DISPATCH(GatherStride2)(elem_size, dst, src, n, stream);
}

bool interleave_planes(size_t elem_size, int planes, void* dst, const void* src, int64_t stride,
                       int64_t n, bool stream) {
  return FERRY_DISPATCH(MovePlanes)(elem_size, planes, true, dst, 0, const_cast<void*>(src), stride,
                                    0, n, 1, stream);
}

bool deinterleave_planes(size_t elem_size, int planes, void* dst, int64_t stride, const void* src,
                         int64_t n, bool stream) {
  return FERRY_DISPATCH(MovePlanes)(elem_size, planes, false, const_cast<void*>(src), 0, dst,
                                    stride, 0, n, 1, stream);
}

bool deinterleave_plane_rows(size_t elem_size, int planes, void* dst, int64_t stride,
                             int64_t dst_row_stride, const void* src, int64_t src_row_stride,
                             int64_t n, int64_t rows, bool stream) {
  return FERRY_DISPATCH(MovePlanes)(elem_size, planes, false, const_cast<void*>(src),
                                    src_row_stride, dst, stride, dst_row_stride, n, rows, stream);
}

// The variant FERRY_DISPATCH calls names itself: what plans and `ferry explain` show is what runs.
const char* dispatch_target_name() { return FERRY_DISPATCH(TargetName)(); }

void stream_fence() { FERRY_DISPATCH(StreamFence)(); }

}  // namespace kernels
}  // namespace ferry::cpu
#endif  // HWY_ONCE
