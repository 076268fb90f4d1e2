// Register-tile transposes, compiled once per SIMD target (Highway) and chosen at run time: a
// square tile of N vectors of N lanes is transposed by log2(N) stages of block swaps, with the
// float32 <-> bfloat16/half conversions folded in. Stored bits equal ferry::convert_value's.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ferry/backends/cpu/transpose_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "ferry/backends/cpu/convert-inl.h"
#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/backends/cpu/copy_tuning.h"
#include "ferry/backends/cpu/hwy_dispatch.h"
#include "ferry/backends/cpu/simd.h"

HWY_BEFORE_NAMESPACE();
namespace ferry::cpu::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using kernels::TransposeOp;
using kernels::TransposeRect;
using tuning::kTransposeChunkCols;
using tuning::kTransposePanelAheadRows;
using tuning::kTransposePanelMaxCols;
using tuning::kTransposePanelSrcBytes;
using tuning::kTransposePrefetchBytes;
using Byte = unsigned char;

// Tiles need several lanes, known at compile time: not on HWY_SCALAR (GCC < 12.3's baseline,
// where the transposes use the portable path) nor on scalable vectors.
#undef FERRY_CPU_TILES
// These two are defined below, per target (this file is compiled once for each).
#undef FERRY_NATIVE_BF16_TILES
#undef FERRY_PAIRED256_TILES
#undef FERRY_PAIRED256_BYTE_TILES
#undef FERRY_QUAD512_BYTE_TILES
#undef FERRY_COPY16_TILES
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
#define FERRY_CPU_TILES 1
#else
#define FERRY_CPU_TILES 0
#endif

#if FERRY_CPU_TILES

// Tiles of at most 16 rows: 16 registers hold one on AVX-512 (32 registers), 8 on AVX2 and
// SSE4 (16 registers), leaving room for the shuffles' temporaries.
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kMaxTile = 16;
#else
constexpr size_t kMaxTile = 8;
#endif

// Swaps the off-diagonal kUnit-byte blocks of rows a and b: afterwards a holds, in every
// 2*kUnit-byte segment, a's first half then b's first half, and b holds a's second half then
// b's second half. Applied for kUnit = half the vector down to one lane, this transposes.
template <size_t kUnit, class D>
HWY_INLINE void SwapBlocks(D d, hn::Vec<D>& a, hn::Vec<D>& b) {
  constexpr size_t kBytes = hn::MaxLanes(D()) * sizeof(hn::TFromD<D>);
  if constexpr (kUnit >= 16 && 2 * kUnit == kBytes) {
    const auto lo = hn::ConcatLowerLower(d, b, a);
    b = hn::ConcatUpperUpper(d, b, a);
    a = lo;
  } else if constexpr (kUnit == 16) {  // 128-bit blocks of a 512-bit vector
    const auto lo = hn::OddEvenBlocks(hn::SwapAdjacentBlocks(b), a);
    b = hn::OddEvenBlocks(b, hn::SwapAdjacentBlocks(a));
    a = lo;
  } else if constexpr (kUnit == 8) {
    const hn::Repartition<uint64_t, D> d64;
    const auto a64 = hn::BitCast(d64, a);
    const auto b64 = hn::BitCast(d64, b);
    a = hn::BitCast(d, hn::InterleaveLower(d64, a64, b64));
    b = hn::BitCast(d, hn::InterleaveUpper(d64, a64, b64));
  } else {
    // Units of 4, 2 or 1 bytes: shift within lanes twice as wide, then take odd/even units.
    using Narrow = hwy::UnsignedFromSize<kUnit>;
    using Wide = hwy::UnsignedFromSize<2 * kUnit>;
    const hn::Repartition<Narrow, D> dn;
    const hn::Repartition<Wide, D> dw;
    const auto new_a = hn::OddEven(hn::BitCast(dn, hn::ShiftLeft<8 * kUnit>(hn::BitCast(dw, b))),
                                   hn::BitCast(dn, a));
    const auto new_b = hn::OddEven(hn::BitCast(dn, b),
                                   hn::BitCast(dn, hn::ShiftRight<8 * kUnit>(hn::BitCast(dw, a))));
    a = hn::BitCast(d, new_a);
    b = hn::BitCast(d, new_b);
  }
}

// f(integral_constant<size_t, k>) for k = 0..kN-1, unrolled: the tile must stay in registers.
template <size_t... kK, class F>
HWY_INLINE void Unrolled(std::index_sequence<kK...>, F&& f) {
  (f(std::integral_constant<size_t, kK>()), ...);
}

// Elements of kElemBytes (a lane by default; 16 for Copy16Op's 128-bit blocks).
template <size_t kHalf, size_t kElemBytes = 0, class D, size_t kN>
HWY_INLINE void TransposeStages(D d, hn::Vec<D> (&v)[kN]) {
  if constexpr (kHalf >= 1) {
    constexpr size_t kElem = kElemBytes != 0 ? kElemBytes : sizeof(hn::TFromD<D>);
    Unrolled(std::make_index_sequence<kN>(), [&](auto r) {
      if constexpr ((r() & kHalf) == 0) SwapBlocks<kHalf * kElem>(d, v[r()], v[r() + kHalf]);
    });
    TransposeStages<kHalf / 2, kElemBytes>(d, v);
  }
}

// v[r] holds row r of an N x N tile (N = lanes); afterwards v[c] holds column c.
template <class D, size_t kN>
HWY_INLINE void TransposeSquare(D d, hn::Vec<D> (&v)[kN]) {
  static_assert(kN == hn::MaxLanes(D()), "a square tile: one vector per lane");
  TransposeStages<kN / 2>(d, v);
}

template <class D>
HWY_INLINE void Put(D d, hn::Vec<D> v, Byte* p, bool stream) {
  using T = hn::TFromD<D>;
  if (stream) {
    hn::Stream(v, d, reinterpret_cast<T*>(p));
  } else {
    hn::StoreU(v, d, reinterpret_cast<T*>(p));
  }
}

// Same element type on both sides: lanes of kSize bytes moved unchanged, tiles of at most kEdge
// (half tiles: HalfCopyOp).
template <size_t kSize, size_t kEdge = kMaxTile>
struct CopyOp {
  using T = hwy::UnsignedFromSize<kSize>;
  using D = hn::CappedTag<T, kEdge>;
  static constexpr size_t kSrcSize = kSize;
  static constexpr size_t kDstSize = kSize;
  static HWY_INLINE hn::Vec<D> Load(const Byte* p) {
    return hn::LoadU(D(), reinterpret_cast<const T*>(p));
  }
  static HWY_INLINE void Store(hn::Vec<D> v, Byte* p, bool stream) { Put(D(), v, p, stream); }
};

// float32 tiles read from or written as 16-bit floats; the transpose runs on the float32 lanes
// (tiles of at most kEdge: half tiles, HalfOf).
template <bool kBFloat16, size_t kEdge = kMaxTile>
struct FromF32Op {
  using D = hn::CappedTag<float, kEdge>;
  using U16 = hn::Rebind<uint16_t, D>;
  static constexpr size_t kSrcSize = 4;
  static constexpr size_t kDstSize = 2;
  static HWY_INLINE hn::Vec<D> Load(const Byte* p) {
    return hn::LoadU(D(), reinterpret_cast<const float*>(p));
  }
  static HWY_INLINE void Store(hn::Vec<D> v, Byte* p, bool stream) {
    if constexpr (kBFloat16) {
      Put(U16(), F32ToBF16(D(), v), p, stream);
    } else {
      Put(U16(), F32ToF16(D(), v), p, stream);
    }
  }
};

template <bool kBFloat16, size_t kEdge = kMaxTile>
struct ToF32Op {
  using D = hn::CappedTag<float, kEdge>;
  using U16 = hn::Rebind<uint16_t, D>;
  static constexpr size_t kSrcSize = 2;
  static constexpr size_t kDstSize = 4;
  static HWY_INLINE hn::Vec<D> Load(const Byte* p) {
    const auto h = hn::LoadU(U16(), reinterpret_cast<const uint16_t*>(p));
    if constexpr (kBFloat16) {
      return BF16ToF32(D(), h);
    } else {
      return F16ToF32(D(), h);
    }
  }
  static HWY_INLINE void Store(hn::Vec<D> v, Byte* p, bool stream) { Put(D(), v, p, stream); }
};

#if HWY_TARGET <= HWY_AVX2 && HWY_ARCH_X86_64
#define FERRY_COPY16_TILES 1
// 16-byte elements (complex128) moved unchanged: a square tile of one vector per row, 4 x 4 in
// 512-bit vectors and 2 x 2 in 256-bit ones, transposed by swaps of 128-bit blocks. Every row of
// the tile is a whole 64-byte line on AVX-512 (two tiles' rows make one on AVX2), so src lines
// are read once and dst lines written whole, where element-wise strided runs re-read each src
// line four times and, with rows a power of two apart, lose it from the L1 in between.
struct Copy16Op {
  using D = hn::ScalableTag<uint64_t>;
  static constexpr size_t kTileEdge = hn::MaxLanes(D()) / 2;
  static constexpr size_t kSrcSize = 16;
  static constexpr size_t kDstSize = 16;
  static HWY_INLINE void Tile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                              bool stream) {
    const D d;
    hn::Vec<D> v[kTileEdge];
    Unrolled(std::make_index_sequence<kTileEdge>(), [&](auto r) {
      v[r()] = hn::LoadU(
          d, reinterpret_cast<const uint64_t*>(src + static_cast<int64_t>(r()) * src_stride));
    });
    TransposeStages<kTileEdge / 2, 16>(d, v);
    Unrolled(std::make_index_sequence<kTileEdge>(),
             [&](auto c) { Put(d, v[c()], dst + static_cast<int64_t>(c()) * dst_stride, stream); });
  }
};
#else
#define FERRY_COPY16_TILES 0
#endif

// The tile's edge in elements: the op's own (Copy16Op) or one element per lane of its vectors.
template <class Op>
constexpr int64_t TileEdgeOf() {
  if constexpr (requires { Op::kTileEdge; }) {
    return static_cast<int64_t>(Op::kTileEdge);
  } else {
    return static_cast<int64_t>(hn::MaxLanes(typename Op::D()));
  }
}

// A tile by the ops' Load and Store: N rows loaded (converted to the tile's lanes), transposed,
// stored as N dst rows.
template <class Op>
HWY_INLINE void GenericTile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                            bool stream) {
  using D = typename Op::D;
  constexpr size_t kN = hn::MaxLanes(D());
  const D d;
  hn::Vec<D> v[kN];
  Unrolled(std::make_index_sequence<kN>(),
           [&](auto r) { v[r()] = Op::Load(src + static_cast<int64_t>(r()) * src_stride); });
  TransposeSquare(d, v);
  Unrolled(std::make_index_sequence<kN>(), [&](auto c) {
    Op::Store(v[c()], dst + static_cast<int64_t>(c()) * dst_stride, stream);
  });
}

#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86_64
#define FERRY_NATIVE_BF16_TILES 1
// A 16 x 16 tile of 16-bit elements held two rows per 512-bit vector ("paired"): w[k] holds row
// k in its lower half and row k + 8 in its upper half. Three stages of block swaps exchange the
// vector index with the column's low three bits; a 128-bit block swap per vector then exchanges
// the row's top bit with the column's, and w[k] holds column k in its lower half and column
// k + 8 in its upper half, stored as those dst rows: about half the shuffles of transposing 16
// float32 rows first. Used after the native bfloat16 conversion below, which pairs rows anyway
// (for plain 16-bit copies it was slower than 16 256-bit rows on Zen 5: docs/kernels.md).
using Paired16 = hn::Full512<uint16_t>;

HWY_INLINE void StorePairedColumns(hn::Vec<Paired16> (&w)[8], Byte* dst, int64_t dst_stride,
                                   bool stream) {
  const Paired16 d;
  const hn::Half<Paired16> dh;
  TransposeStages<4>(d, w);
  Unrolled(std::make_index_sequence<8>(), [&](auto k) {
    constexpr auto c = static_cast<int64_t>(k());
    // 128-bit blocks (row top bit, column top bit) -> (column top bit, row top bit).
    const hn::Vec<Paired16> v{_mm512_shuffle_i64x2(w[c].raw, w[c].raw, _MM_SHUFFLE(3, 1, 2, 0))};
    Put(dh, hn::LowerHalf(dh, v), dst + c * dst_stride, stream);
    Put(dh, hn::UpperHalf(dh, v), dst + (c + 8) * dst_stride, stream);
  });
}

// float32 -> bfloat16 by the CPU's own conversion (AVX512_BF16's VCVTNE2PS2BF16, two rows per
// instruction) before a paired tile, for CPUs that have it (native_bf16). It rounds to nearest
// even like F32ToBF16, but flushes denormals to zero and keeps NaNs' sign and payload, where
// ferry (and PyTorch) keep denormals and store every NaN as 0x7FC0: a tile holding either
// converts the portable way. Inline assembly, because Highway 1.0 has no target with
// AVX512_BF16 and the instruction must not reach the kernels compiled for CPUs without it.
struct NativeBF16Op : FromF32Op<true> {
  static HWY_INLINE void Tile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                              bool stream) {
    hn::Vec<D> v[16];
    __mmask16 special = 0;  // quiet NaN (0x01), denormal (0x20), signalling NaN (0x80)
    Unrolled(std::make_index_sequence<16>(), [&](auto r) {
      v[r()] = Load(src + static_cast<int64_t>(r()) * src_stride);
      special |= _mm512_fpclass_ps_mask(v[r()].raw, 0xA1);
    });
    if (HWY_UNLIKELY(special != 0)) {
      GenericTile<FromF32Op<true>>(src, src_stride, dst, dst_stride, stream);
      return;
    }
    hn::Vec<Paired16> w[8];
    Unrolled(std::make_index_sequence<8>(), [&](auto k) {
      constexpr auto r = static_cast<size_t>(k());
      __m512i both;  // row r's bfloat16 lanes in the lower half, row r + 8's in the upper
      asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(both) : "v"(v[r + 8].raw), "v"(v[r].raw));
      w[r] = hn::Vec<Paired16>{both};
    });
    StorePairedColumns(w, dst, dst_stride, stream);
  }
};
#else
#define FERRY_NATIVE_BF16_TILES 0
#endif

#if HWY_TARGET == HWY_AVX2
#define FERRY_PAIRED256_TILES 1
// AVX2's tiles with 16-bit and 8-bit dst elements (docs/kernels.md, "AVX2 tiles"): 16 x 16, as two
// halves of 16 rows x 8 columns held two rows per 256-bit vector ("paired"): w[k] holds row k of
// the half in its lower 128 bits and row k + 8 in its upper. Three stages of in-block swaps (no
// lane crossing) leave column c of rows 0-7 in w[c]'s lower half and of rows 8-15 in its upper: dst
// row c's 16 elements, one 32-byte store. A square tile of 8 128-bit rows stores 16 bytes per
// dst row and costs 1.7x the instructions per element; 16 256-bit rows need all 16 registers
// before the shuffles' temporaries. Each half takes 8 registers.
using Pair256 = hn::Full256<uint16_t>;

HWY_INLINE void StorePaired256(hn::Vec<Pair256> (&w)[8], Byte* dst, int64_t dst_stride,
                               bool stream) {
  TransposeStages<4>(Pair256(), w);
  Unrolled(std::make_index_sequence<8>(), [&](auto c) {
    Put(Pair256(), w[c()], dst + static_cast<int64_t>(c()) * dst_stride, stream);
  });
}

// 16-bit elements moved unchanged.
struct Copy2PairedOp {
  using D = Pair256;  // 16 lanes: the tile's edge
  static constexpr size_t kSrcSize = 2;
  static constexpr size_t kDstSize = 2;
  static HWY_INLINE void Tile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                              bool stream) {
    const Pair256 d;
    const hn::Half<Pair256> dh;
    for (int64_t h = 0; h < 2; ++h) {
      hn::Vec<Pair256> w[8];
      Unrolled(std::make_index_sequence<8>(), [&](auto k) {
        const Byte* row = src + static_cast<int64_t>(k()) * src_stride + h * 16;
        w[k()] =
            hn::Combine(d, hn::LoadU(dh, reinterpret_cast<const uint16_t*>(row + 8 * src_stride)),
                        hn::LoadU(dh, reinterpret_cast<const uint16_t*>(row)));
      });
      StorePaired256(w, dst + h * 8 * dst_stride, dst_stride, stream);
    }
  }
};

// float32 -> bfloat16 or half: each half reads 32 bytes of 16 src rows, converts rows k and
// k + 8 into one paired vector, then transposes it as above. bfloat16 packs the two rows'
// rounded 32-bit words with one VPACKUSDW (the words fit in 16 bits) and one lane permute, where
// two separate demotions take four shuffles; half converts with F16C's VCVTPS2PH (F32ToF16).
template <bool kBFloat16>
struct FromF32PairedOp {
  using D = Pair256;  // 16 lanes: the tile's edge
  static constexpr size_t kSrcSize = 4;
  static constexpr size_t kDstSize = 2;
  static HWY_INLINE hn::Vec<Pair256> Pair(const Byte* lo, const Byte* hi) {
    const hn::Full256<float> df;
    const auto a = hn::LoadU(df, reinterpret_cast<const float*>(lo));
    const auto b = hn::LoadU(df, reinterpret_cast<const float*>(hi));
    if constexpr (kBFloat16) {
      const __m256i packed =
          _mm256_packus_epi32(F32ToBF16Words(df, a).raw, F32ToBF16Words(df, b).raw);
      return hn::Vec<Pair256>{_mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0))};
    } else {
      return hn::Combine(Pair256(), F32ToF16(df, b), F32ToF16(df, a));
    }
  }
  static HWY_INLINE void Tile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                              bool stream) {
    for (int64_t h = 0; h < 2; ++h) {
      hn::Vec<Pair256> w[8];
      Unrolled(std::make_index_sequence<8>(), [&](auto k) {
        const Byte* row = src + static_cast<int64_t>(k()) * src_stride + h * 32;
        w[k()] = Pair(row, row + 8 * src_stride);
      });
      StorePaired256(w, dst + h * 8 * dst_stride, dst_stride, stream);
    }
  }
};
#else
#define FERRY_PAIRED256_TILES 0
#endif

#if HWY_TARGET == HWY_AVX2
#define FERRY_PAIRED256_BYTE_TILES 1
// Bytes: one 16 x 16 tile in 8 paired vectors (row k in the lower 128 bits, row k + 8 in the
// upper). The same three stages transpose each 8 x 8 byte square (one 64-bit quarter of a vector),
// leaving in w[c] column c of rows 0-7, column c + 8 of rows 0-7, column c of rows 8-15, column
// c + 8 of rows 8-15; one quarter permute makes the lower half dst row c and the upper half dst
// row c + 8. A square AVX2 byte tile is 8 x 8 in 64-bit registers: 2.5x the instructions.
struct Copy1PairedOp {
  using D = hn::Full128<uint8_t>;  // 16 lanes: the tile's edge
  static constexpr size_t kSrcSize = 1;
  static constexpr size_t kDstSize = 1;
  static HWY_INLINE void Tile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                              bool stream) {
    const hn::Full256<uint8_t> d;
    const hn::Full128<uint8_t> dh;
    hn::Vec<hn::Full256<uint8_t>> w[8];
    Unrolled(std::make_index_sequence<8>(), [&](auto k) {
      const Byte* row = src + static_cast<int64_t>(k()) * src_stride;
      w[k()] = hn::Combine(d, hn::LoadU(dh, row + 8 * src_stride), hn::LoadU(dh, row));
    });
    TransposeStages<4>(d, w);
    Unrolled(std::make_index_sequence<8>(), [&](auto k) {
      constexpr auto c = static_cast<int64_t>(k());
      const hn::Vec<hn::Full256<uint8_t>> v{
          _mm256_permute4x64_epi64(w[c].raw, _MM_SHUFFLE(3, 1, 2, 0))};
      Put(dh, hn::LowerHalf(dh, v), dst + c * dst_stride, stream);
      Put(dh, hn::UpperHalf(dh, v), dst + (c + 8) * dst_stride, stream);
    });
  }
};
#else
#define FERRY_PAIRED256_BYTE_TILES 0
#endif

#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86_64
#define FERRY_QUAD512_BYTE_TILES 1
// Bytes on AVX-512: one 16 x 16 tile in 4 vectors of four rows ("quad"): w[k] holds rows k,
// k + 4, k + 8 and k + 12 in its 128-bit blocks 0-3. Two stages of in-block swaps exchange the
// vector index with the column's low two bits: w[c] (c < 4), block b, dword q then holds rows
// 4b to 4b + 3 of column 4q + c. One dword permute per vector gathers dword q of every block into
// block q: dst row 4q + c. Two swap stages over 2 pairs of vectors and 4 permutes, where the
// paired 256-bit tile takes three stages over 4 pairs and 8 permutes (and 16 128-bit rows four
// stages over 8 pairs); the inserts and extracts that split rows over blocks are the price.
struct Copy1QuadOp {
  using D = hn::Full128<uint8_t>;  // 16 lanes: the tile's edge
  static constexpr size_t kSrcSize = 1;
  static constexpr size_t kDstSize = 1;
  static HWY_INLINE void Tile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                              bool stream) {
    const hn::Full512<uint8_t> d;
    const hn::Full128<uint8_t> dq;
    hn::Vec<hn::Full512<uint8_t>> w[4];
    Unrolled(std::make_index_sequence<4>(), [&](auto k) {
      const Byte* row = src + static_cast<int64_t>(k()) * src_stride;
      __m512i v = _mm512_castsi128_si512(hn::LoadU(dq, row).raw);
      v = _mm512_inserti32x4(v, hn::LoadU(dq, row + 4 * src_stride).raw, 1);
      v = _mm512_inserti32x4(v, hn::LoadU(dq, row + 8 * src_stride).raw, 2);
      v = _mm512_inserti32x4(v, hn::LoadU(dq, row + 12 * src_stride).raw, 3);
      w[k()] = hn::Vec<hn::Full512<uint8_t>>{v};
    });
    TransposeStages<2>(d, w);
    // Result dword 4q + b <- dword 4b + q.
    const __m512i gather = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    Unrolled(std::make_index_sequence<4>(), [&](auto k) {
      constexpr auto c = static_cast<int64_t>(k());
      const __m512i v = _mm512_permutexvar_epi32(gather, w[c].raw);
      Put(dq, hn::Vec<hn::Full128<uint8_t>>{_mm512_castsi512_si128(v)}, dst + c * dst_stride,
          stream);
      Put(dq, hn::Vec<hn::Full128<uint8_t>>{_mm512_extracti32x4_epi32(v, 1)},
          dst + (4 + c) * dst_stride, stream);
      Put(dq, hn::Vec<hn::Full128<uint8_t>>{_mm512_extracti32x4_epi32(v, 2)},
          dst + (8 + c) * dst_stride, stream);
      Put(dq, hn::Vec<hn::Full128<uint8_t>>{_mm512_extracti32x4_epi32(v, 3)},
          dst + (12 + c) * dst_stride, stream);
    });
  }
};
#else
#define FERRY_QUAD512_BYTE_TILES 0
#endif

// One tile of op: its own routine if it has one (NativeBF16Op), else the generic one.
template <class Op>
HWY_INLINE void TransposeTile(const Byte* src, int64_t src_stride, Byte* dst, int64_t dst_stride,
                              bool stream) {
  if constexpr (requires { Op::Tile(src, src_stride, dst, dst_stride, stream); }) {
    Op::Tile(src, src_stride, dst, dst_stride, stream);
  } else {
    GenericTile<Op>(src, src_stride, dst, dst_stride, stream);
  }
}

// Streams kRunBytes (whole 64-byte lines) per row from an L1 scratch of `rows` runs to dst rows
// dst_stride apart.
template <size_t kRunBytes>
HWY_INLINE void StreamRuns(const Byte* scratch, int64_t rows, Byte* dst, int64_t dst_stride) {
  const hn::CappedTag<uint8_t, 64> d;
  constexpr size_t kLanes = hn::MaxLanes(d);
  static_assert(kRunBytes % 64 == 0 && 64 % kLanes == 0, "whole lines, whole vectors");
  for (int64_t c = 0; c < rows; ++c) {
    for (size_t k = 0; k < kRunBytes; k += kLanes) {
      hn::Stream(hn::Load(d, scratch + static_cast<size_t>(c) * kRunBytes + k), d,
                 dst + c * dst_stride + static_cast<int64_t>(k));
    }
  }
}

// How a streaming step groups tiles (docs/kernels.md, "Transposes"):
// - kRows tiles along i give every dst row a run of kRunBytes: two whole 64-byte lines written
//   back to back when possible. Non-temporal stores of single lines scattered over dst rows run
//   at half the speed of sequential ones on the development machine; runs of two lines or more
//   run at full speed. But kRows tiles along i also mean kN * kRows src read streams, and the L2
//   streamer follows 32, not 64: so at most 32 rows (two-line runs for float32 on AVX3 and AVX2,
//   single lines for 16-bit dst elements), and at least a whole line (64 rows of 1-byte ones).
// - When that still leaves single lines (16-bit and 8-bit dst elements), kPasses strips of those
//   rows fill the halves of two-line runs (StreamStrip; Note [transpose passes]).
// - kCols tiles along j read whole 64-byte src lines one right after the other (rows of a strip
//   may be a multiple of 4 KiB apart and share one L1 set: a half-read line would be evicted
//   before the next tile came back for its other half).
// - Tall strips (kTall): when the src rows are whole and close together (TransposeRect::
//   prefetch_next_strip, NHWC -> NCHW), a strip reads one compact region front to back and the
//   streamer's limit does not apply: up to 128 rows, giving each dst row a run of 512 bytes.
template <class Op, bool kTall = false>
struct Grouping {
  static constexpr int64_t kN = TileEdgeOf<Op>();
  static constexpr int64_t kDstRowBytes = kN * static_cast<int64_t>(Op::kDstSize);
  static constexpr int64_t kSrcRowBytes = kN * static_cast<int64_t>(Op::kSrcSize);
  static constexpr int64_t kLineRows = kDstRowBytes >= 64 ? 1 : 64 / kDstRowBytes;
  static constexpr int64_t kWantBytes = kTall ? 512 : 128;
  static constexpr int64_t kWantRows = kDstRowBytes >= kWantBytes ? 1 : kWantBytes / kDstRowBytes;
  static constexpr int64_t kMaxRows = (kTall ? 128 : 32) / kN;
  static constexpr int64_t kRows = std::max(kLineRows, std::min(kWantRows, kMaxRows));
  static constexpr int64_t kRunBytes = kRows * kDstRowBytes;
  static constexpr int64_t kCols = kSrcRowBytes >= 64 ? 1 : 64 / kSrcRowBytes;
  static_assert(kRunBytes % kDstRowBytes == 0 && kRunBytes % 64 == 0, "whole lines per run");
  // Strips whose runs are single lines (16-bit and 8-bit dst elements) are read in kPasses
  // passes that fill the two halves of longer runs, kChunk columns at a time (Note [transpose
  // passes] in copy_tuning.h).
  static constexpr int64_t kPasses = kRunBytes >= 128 ? 1 : 128 / kRunBytes;
  static constexpr int64_t kChunk =
      kPasses == 1 ? kN * kCols
                   : std::max<int64_t>(1, kTransposeChunkCols / (kN * kCols)) * kN * kCols;
  static_assert(kChunk % (kN * kCols) == 0, "whole steps per chunk");
};

// Tiles of [i0, i1) x [j0, j1), stored directly with ordinary stores. Not inlined: Tiles calls it
// three times, and three unrolled copies per op and target cost half the file's compile time.
template <class Op>
HWY_NOINLINE void DirectTiles(const TransposeRect& r, int64_t i0, int64_t i1, int64_t j0,
                              int64_t j1) {
  constexpr int64_t kN = Grouping<Op>::kN;
  const auto* src = reinterpret_cast<const Byte*>(r.src);
  auto* dst = reinterpret_cast<Byte*>(r.dst);
  const auto src_step = static_cast<int64_t>(Op::kSrcSize);
  const auto dst_step = static_cast<int64_t>(Op::kDstSize);
  for (int64_t i = i0; i < i1; i += kN) {
    for (int64_t j = j0; j < j1; j += kN) {
      TransposeTile<Op>(src + i * r.src_row_stride + j * src_step, r.src_row_stride,
                        dst + j * r.dst_row_stride + i * dst_step, r.dst_row_stride, false);
    }
  }
}

// Asks for the lines of `rows` src rows from `first`, `stride` apart, `bytes` of each, into the
// L2 (Note [transpose prefetch] in copy_tuning.h). Prefetches never fault: the rows may lie past
// the rect.
HWY_INLINE void PrefetchRows(const Byte* first, int64_t stride, int64_t rows, int64_t bytes) {
  for (int64_t q = 0; q < rows; ++q) {
    for (int64_t b = 0; b < bytes; b += 64) {
      __builtin_prefetch(first + q * stride + b, /*rw=*/0, /*locality=*/2);
    }
  }
}

// Asks for a stretch of rows' lines in address order, a few per step (TransposeRect::ahead;
// Note [transpose read-ahead] in copy_tuning.h).
class ReadAhead {
 public:
  ReadAhead() = default;  // asks for nothing
  ReadAhead(const TransposeRect& r, int64_t steps) {
    if (r.ahead == nullptr || r.ahead_row_bytes <= 0 || r.ahead_end <= r.ahead_begin) return;
    const int64_t q = r.ahead_begin / r.ahead_row_bytes;
    row_ = reinterpret_cast<const Byte*>(r.ahead) + q * r.ahead_row_stride;
    stride_ = r.ahead_row_stride;
    row_bytes_ = r.ahead_row_bytes;
    at_ = r.ahead_begin - q * r.ahead_row_bytes;
    left_ = (r.ahead_end - r.ahead_begin + 63) / 64;
    steps = std::max<int64_t>(steps, 1);
    per_step_ = (left_ + steps - 1) / steps;
  }
  HWY_INLINE void Step() {
    for (int64_t k = std::min(per_step_, left_); k > 0; --k) {
      __builtin_prefetch(row_ + at_, /*rw=*/0, /*locality=*/2);
      at_ += 64;
      if (at_ >= row_bytes_) {
        at_ -= row_bytes_;
        row_ += stride_;
      }
    }
    left_ -= std::min(per_step_, left_);
  }

 private:
  const Byte* row_ = nullptr;
  int64_t stride_ = 0, row_bytes_ = 1, at_ = 0, left_ = 0, per_step_ = 0;
};

// Streams one strip of kPasses * kN * kRows src rows, from row i, over `cols` columns (whole
// steps). Each pass transposes kN * kRows of the rows into its part of the dst runs in `scratch`
// (two chunks: kChunk runs of kPasses * kRunBytes each); a chunk's runs stream out while the next
// chunk is read, a few after every step, so that reads and streaming stores stay interleaved.
// With one pass a chunk is one step (Grouping::kChunk), streamed out right after it.
template <class Op, int64_t kPasses, int64_t kChunk, bool kTall = false>
HWY_INLINE void StreamStrip(const TransposeRect& r, int64_t i, int64_t cols, Byte* scratch,
                            ReadAhead& read_ahead) {
  using G = Grouping<Op, kTall>;
  constexpr int64_t kN = G::kN;
  constexpr int64_t kStepI = kN * G::kRows;
  constexpr int64_t kStepJ = kN * G::kCols;
  constexpr int64_t kRunBytes = kPasses * G::kRunBytes;
  constexpr int64_t kRunsPerStep = std::max<int64_t>(1, kStepJ / kPasses);
  constexpr int64_t kStepSrcBytes = kStepJ * static_cast<int64_t>(Op::kSrcSize);
  // How far ahead each row's lines are asked for: with passes, the row's next chunk.
  constexpr int64_t kAhead =
      kPasses == 1 ? kTransposePrefetchBytes : kChunk * static_cast<int64_t>(Op::kSrcSize);
  const auto* src = reinterpret_cast<const Byte*>(r.src);
  auto* dst = reinterpret_cast<Byte*>(r.dst);
  const auto src_step = static_cast<int64_t>(Op::kSrcSize);
  const auto dst_step = static_cast<int64_t>(Op::kDstSize);
  const Byte* pending = nullptr;  // the previous chunk's runs not yet streamed
  Byte* pending_dst = nullptr;
  int64_t pending_runs = 0;
  const auto drain = [&](int64_t n) {
    n = std::min(n, pending_runs);
    StreamRuns<static_cast<size_t>(kRunBytes)>(pending, n, pending_dst, r.dst_row_stride);
    pending += n * kRunBytes;
    pending_dst += n * r.dst_row_stride;
    pending_runs -= n;
  };
  for (int64_t jc = 0; jc < cols; jc += kChunk) {
    const int64_t jn = std::min(kChunk, cols - jc);
    Byte* runs = scratch + (jc / kChunk) % 2 * kChunk * kRunBytes;
    for (int64_t pass = 0; pass < kPasses; ++pass) {
      const int64_t ip = i + pass * kStepI;
      for (int64_t j = jc; j < jc + jn; j += kStepJ) {
        // Each of the strip's rows is a read stream; ask for its lines a few steps ahead, into
        // the L2 (Note [transpose prefetch] in copy_tuning.h). Prefetches never fault, so the
        // last steps may name lines past the rows' ends.
        PrefetchRows(src + ip * r.src_row_stride + j * src_step + kAhead, r.src_row_stride, kStepI,
                     kStepSrcBytes);
        read_ahead.Step();
        if (r.prefetch_next_strip) {
          const Byte* next = src + (ip + kStepI) * r.src_row_stride + j * src_step;
          for (int64_t q = 0; q < kStepI; ++q) hwy::Prefetch(next + q * r.src_row_stride);
        }
        Byte* out = runs + (j - jc) * kRunBytes + pass * G::kRunBytes;
        for (int64_t g = 0; g < G::kRows; ++g) {
          for (int64_t c = 0; c < G::kCols; ++c) {
            TransposeTile<Op>(src + (ip + g * kN) * r.src_row_stride + (j + c * kN) * src_step,
                              r.src_row_stride, out + c * kN * kRunBytes + g * G::kDstRowBytes,
                              kRunBytes, false);
          }
        }
        drain(kRunsPerStep);
      }
    }
    drain(pending_runs);  // a short last chunk leaves some
    pending = runs;
    pending_dst = dst + jc * r.dst_row_stride + i * dst_step;
    pending_runs = jn;
    if constexpr (kPasses == 1) drain(pending_runs);
  }
  drain(pending_runs);
}

// How a panel step groups tiles (Note [transpose panels] in copy_tuning.h): kRowTiles tiles
// along i give each dst row a run of 128 bytes, and a panel is kPanelCols columns (j) wide,
// kTransposePanelSrcBytes of each src row. Its scratch row holds the line carried over from the
// previous step, then the step's run.
template <class Op>
struct PanelGrouping {
  static constexpr int64_t kN = Grouping<Op>::kN;
  static constexpr int64_t kSrcSize = static_cast<int64_t>(Op::kSrcSize);
  static constexpr int64_t kTileDstBytes = Grouping<Op>::kDstRowBytes;
  static constexpr int64_t kRowTiles = kTileDstBytes >= 128 ? 1 : 128 / kTileDstBytes;
  static constexpr int64_t kStepRows = kN * kRowTiles;
  static constexpr int64_t kRunBytes = kRowTiles * kTileDstBytes;
  static constexpr int64_t kScratchRowBytes = 64 + kRunBytes;
  static constexpr int64_t kPanelCols = std::max<int64_t>(
      kN, std::min(kTransposePanelSrcBytes / kSrcSize, kTransposePanelMaxCols) / kN * kN);
  static_assert(kRunBytes % 64 == 0, "whole lines per run");
};

// Streams the whole lines of a dst row that one step completes: from the line holding the row's
// element `at` to the one holding the end of the step's `run` bytes, taking the first line's
// leading bytes from the line the scratch row carries (on the rect's first step, that line is
// not ours: its bytes from `at` on take ordinary stores instead). Then carries the 64 bytes up to
// the run's end (the partial last line, and whatever precedes it) into the scratch row.
HWY_INLINE void StreamCarried(Byte* scratch_row, Byte* at, int64_t run, bool first) {
  const hn::CappedTag<uint8_t, 64> d;
  constexpr auto kLanes = static_cast<int64_t>(hn::MaxLanes(d));
  const auto skew = static_cast<int64_t>(reinterpret_cast<uintptr_t>(at) % 64);
  const int64_t whole = (skew + run) / 64 * 64;  // bytes of whole lines, from at - skew
  Byte* line = at - skew;
  int64_t k = 0;
  if (first && skew != 0) {
    std::memcpy(at, scratch_row + 64, static_cast<size_t>(std::min(64 - skew, run)));
    k = 64;
  }
  for (; k < whole; k += kLanes) {
    hn::Stream(hn::LoadU(d, scratch_row + 64 - skew + k), d, line + k);
  }
  if ((skew + run) % 64 != 0) {
    for (k = 0; k < 64; k += kLanes) {
      hn::Store(hn::LoadU(d, scratch_row + run + k), d, scratch_row + k);
    }
  }
}

// Streams a transpose whose dst rows need not start on a cache line, a panel of columns at a
// time: all of the rect's rows top to bottom, kStepRows per step (fewer in the last), so that
// each dst row of the panel is written front to back (Note [transpose panels]).
template <class Op>
HWY_NOINLINE void PanelTiles(const TransposeRect& r) {
  using G = PanelGrouping<Op>;
  constexpr int64_t kN = G::kN;
  const auto* src = reinterpret_cast<const Byte*>(r.src);
  auto* dst = reinterpret_cast<Byte*>(r.dst);
  const auto dst_step = static_cast<int64_t>(Op::kDstSize);
  alignas(64) Byte scratch[G::kPanelCols * G::kScratchRowBytes];
  for (int64_t j0 = 0; j0 < r.cols; j0 += G::kPanelCols) {
    const int64_t width = std::min(G::kPanelCols, r.cols - j0);
    const Byte* panel = src + j0 * G::kSrcSize;
    for (int64_t i = 0; i < r.rows; i += G::kStepRows) {
      // Each src row is read once per panel, kTransposePanelSrcBytes at a time: ask for the
      // step's rows kTransposePanelAheadRows ahead. Prefetches never fault; the last steps may
      // name rows past the rect.
      PrefetchRows(panel + (i + kTransposePanelAheadRows) * r.src_row_stride, r.src_row_stride,
                   G::kStepRows, width * G::kSrcSize);
      const int64_t tiles = std::min(G::kRowTiles, (r.rows - i) / kN);  // rows: whole tiles
      for (int64_t g = 0; g < tiles; ++g) {
        for (int64_t c = 0; c < width; c += kN) {
          TransposeTile<Op>(panel + (i + g * kN) * r.src_row_stride + c * G::kSrcSize,
                            r.src_row_stride,
                            scratch + c * G::kScratchRowBytes + 64 + g * G::kTileDstBytes,
                            G::kScratchRowBytes, false);
        }
      }
      for (int64_t c = 0; c < width; ++c) {
        StreamCarried(scratch + c * G::kScratchRowBytes,
                      dst + (j0 + c) * r.dst_row_stride + i * dst_step, tiles * G::kTileDstBytes,
                      i == 0);
      }
    }
    // Each row's last partial line, from the carried one, with ordinary stores (only the rect's
    // bytes: a short rect may not reach back to the line's start).
    for (int64_t c = 0; c < width; ++c) {
      Byte* end = dst + (j0 + c) * r.dst_row_stride + r.rows * dst_step;
      const auto skew = static_cast<int64_t>(reinterpret_cast<uintptr_t>(end) % 64);
      const int64_t n = std::min(skew, r.rows * dst_step);
      std::memcpy(end - n, scratch + c * G::kScratchRowBytes + 64 - n, static_cast<size_t>(n));
    }
  }
}

// The tall strips (Grouping) that fit in r's rows, over `cols` columns; returns the rows done.
// Short src rows have no read-ahead of the next unit (that is for long rows). Not inlined, so
// that Tiles' own strips keep their code and frame.
template <class Op>
HWY_NOINLINE int64_t TallStrips(const TransposeRect& r, int64_t cols) {
  using G = Grouping<Op>;
  using T = Grouping<Op, true>;
  int64_t i = 0;
  if constexpr (T::kPasses == 1 && T::kRows > G::kRows && T::kCols == G::kCols) {
    constexpr int64_t kStepI = T::kN * T::kRows;
    alignas(64) Byte scratch[2 * T::kChunk * T::kRunBytes];
    ReadAhead read_ahead;
    for (; i + kStepI <= r.rows; i += kStepI) {
      StreamStrip<Op, 1, T::kChunk, true>(r, i, cols, scratch, read_ahead);
    }
  }
  return i;
}

// Rows (i) outer, columns (j) inner: src is read along its rows, dst written a tile row at a
// time. When streaming, tiles are grouped (Grouping) in an L1 scratch of whole dst runs first,
// so that every non-temporal store writes whole lines (a partial line would cost a
// read-modify-write in memory), two or more of them in a row. A last strip too short for all
// passes streams single-line runs; rows and columns beyond the last whole step (ragged
// problems) get ordinary stores. Streaming by panels (dst rows off their lines) is PanelTiles.
template <class Op>
void Tiles(const TransposeRect& r) {
  using G = Grouping<Op>;
  constexpr int64_t kN = G::kN;
  if (!r.stream) {
    DirectTiles<Op>(r, 0, r.rows, 0, r.cols);
    return;
  }
  if (r.panel) {
    PanelTiles<Op>(r);
    return;
  }
  constexpr int64_t kStepI = kN * G::kRows;
  constexpr int64_t kStepJ = kN * G::kCols;
  const int64_t cols = r.cols / kStepJ * kStepJ;
  alignas(64) Byte scratch[2 * G::kChunk * G::kPasses * G::kRunBytes];  // two chunks of runs
  ReadAhead read_ahead(r, r.rows / kStepI * (cols / kStepJ));
  int64_t i = 0;
  if (r.prefetch_next_strip) i = TallStrips<Op>(r, cols);  // short src rows
  for (; i + G::kPasses * kStepI <= r.rows; i += G::kPasses * kStepI) {
    StreamStrip<Op, G::kPasses, G::kChunk>(r, i, cols, scratch, read_ahead);
  }
  if constexpr (G::kPasses > 1) {
    for (; i + kStepI <= r.rows; i += kStepI) {
      StreamStrip<Op, 1, kStepJ>(r, i, cols, scratch, read_ahead);
    }
  }
  DirectTiles<Op>(r, 0, i, cols, r.cols);
  DirectTiles<Op>(r, i, r.rows, 0, r.cols);
}

template <class Op>
constexpr int TileOf() {
  return static_cast<int>(TileEdgeOf<Op>());
}

// Columns (along j) one streaming step covers.
template <class Op>
constexpr int StreamColsOf() {
  using G = Grouping<Op>;
  return static_cast<int>(G::kN * G::kCols);
}

// Rows (along i) one streaming strip covers: enough tiles, and passes, for a whole run per dst
// row.
template <class Op>
constexpr int StreamRowsOf() {
  using G = Grouping<Op>;
  return static_cast<int>(G::kN * G::kRows * G::kPasses);
}

// Calls fn.template operator()<Op>() for a runtime op; returns fallback for kNone.
template <class R, class Fn>
HWY_INLINE R VisitOp(TransposeOp op, R fallback, Fn&& fn) {
  switch (op) {
    case TransposeOp::kCopy1:
#if FERRY_QUAD512_BYTE_TILES
      return fn.template operator()<Copy1QuadOp>();
#elif FERRY_PAIRED256_BYTE_TILES
      return fn.template operator()<Copy1PairedOp>();
#else
      return fn.template operator()<CopyOp<1>>();
#endif
    case TransposeOp::kCopy2:
#if FERRY_PAIRED256_TILES
      return fn.template operator()<Copy2PairedOp>();
#else
      return fn.template operator()<CopyOp<2>>();
#endif
    case TransposeOp::kCopy4:
      return fn.template operator()<CopyOp<4>>();
    case TransposeOp::kCopy8:
      return fn.template operator()<CopyOp<8>>();
    case TransposeOp::kCopy16:
#if FERRY_COPY16_TILES
      return fn.template operator()<Copy16Op>();
#else
      break;
#endif
    case TransposeOp::kF32ToBF16:
#if FERRY_NATIVE_BF16_TILES
      if (native_bf16()) return fn.template operator()<NativeBF16Op>();
#endif
#if FERRY_PAIRED256_TILES
      return fn.template operator()<FromF32PairedOp<true>>();
#else
      return fn.template operator()<FromF32Op<true>>();
#endif
    case TransposeOp::kF32ToF16:
#if FERRY_PAIRED256_TILES
      return fn.template operator()<FromF32PairedOp<false>>();
#else
      return fn.template operator()<FromF32Op<false>>();
#endif
    case TransposeOp::kBF16ToF32:
      return fn.template operator()<ToF32Op<true>>();
    case TransposeOp::kF16ToF32:
      return fn.template operator()<ToF32Op<false>>();
    case TransposeOp::kNone:
      break;
  }
  return fallback;
}

// Calls fn.template operator()<Op>() with the half-tile op of `op` (Note [half tiles] in
// copy_planner.cc): the op's elements in vectors of half its tile's edge, which the generic tile
// transposes like any other; returns fallback where there is none (16-byte elements; edges
// under 2, or under 4 for the conversions).
template <class R, class Fn>
HWY_INLINE R VisitHalfOp(TransposeOp op, R fallback, Fn&& fn) {
  const bool bf16 = op == TransposeOp::kF32ToBF16 || op == TransposeOp::kBF16ToF32;
  return VisitOp<R>(op, fallback, [&]<class Full>() -> R {
    constexpr int64_t kHalf = TileEdgeOf<Full>() / 2;
    constexpr auto kEdge = static_cast<size_t>(kHalf);
    constexpr size_t kSrc = Full::kSrcSize, kDst = Full::kDstSize;
    if constexpr (kSrc == kDst && kSrc <= 8 && kHalf >= 2) {
      return fn.template operator()<CopyOp<kSrc, kEdge>>();
    } else if constexpr (kSrc == 4 && kDst == 2 && kHalf >= 4) {
      return bf16 ? fn.template operator()<FromF32Op<true, kEdge>>()
                  : fn.template operator()<FromF32Op<false, kEdge>>();
    } else if constexpr (kSrc == 2 && kDst == 4 && kHalf >= 4) {
      return bf16 ? fn.template operator()<ToF32Op<true, kEdge>>()
                  : fn.template operator()<ToF32Op<false, kEdge>>();
    } else {
      return fallback;
    }
  });
}

#endif  // FERRY_CPU_TILES
}  // namespace

int TransposeTileSize(TransposeOp op) {
#if !FERRY_CPU_TILES
  (void)op;
  return 0;
#else
  return VisitOp<int>(op, 0, []<class Op>() { return TileOf<Op>(); });
#endif
}

int TransposeHalfTileSize(TransposeOp op) {
#if !FERRY_CPU_TILES
  (void)op;
  return 0;
#else
  return VisitHalfOp<int>(op, 0, []<class Op>() { return TileOf<Op>(); });
#endif
}

int TransposeStreamRows(TransposeOp op) {
#if !FERRY_CPU_TILES
  (void)op;
  return 0;
#else
  return VisitOp<int>(op, 0, []<class Op>() { return StreamRowsOf<Op>(); });
#endif
}

int TransposeStreamCols(TransposeOp op) {
#if !FERRY_CPU_TILES
  (void)op;
  return 0;
#else
  return VisitOp<int>(op, 0, []<class Op>() { return StreamColsOf<Op>(); });
#endif
}

bool TransposeNativeBF16(TransposeOp op) {
#if FERRY_CPU_TILES && FERRY_NATIVE_BF16_TILES
  return VisitOp<bool>(op, false, []<class Op>() { return std::is_same_v<Op, NativeBF16Op>; });
#else
  (void)op;
  return false;
#endif
}

void TransposeTiles(const TransposeRect& rect) {
#if FERRY_CPU_TILES
  if (rect.half) {
    VisitHalfOp<int>(rect.op, 0, [&]<class Op>() {
      TransposeRect r = rect;
      for (int64_t k = 0; k < rect.repeat; ++k) {
        DirectTiles<Op>(r, 0, r.rows, 0, r.cols);
        r.src += rect.src_repeat_stride;
        r.dst += rect.dst_repeat_stride;
      }
      return 0;
    });
    return;
  }
  VisitOp<int>(rect.op, 0, [&]<class Op>() {
    TransposeRect r = rect;
    for (int64_t k = 0; k < rect.repeat; ++k) {
      Tiles<Op>(r);
      r.src += rect.src_repeat_stride;
      r.dst += rect.dst_repeat_stride;
    }
    return 0;
  });
#else
  (void)rect;
#endif
}

}  // namespace ferry::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ferry::cpu {

HWY_EXPORT(TransposeTileSize);
HWY_EXPORT(TransposeHalfTileSize);
HWY_EXPORT(TransposeStreamRows);
HWY_EXPORT(TransposeStreamCols);
HWY_EXPORT(TransposeNativeBF16);
HWY_EXPORT(TransposeTiles);

namespace kernels {

int transpose_tile(TransposeOp op) { return FERRY_DISPATCH(TransposeTileSize)(op); }

int transpose_half_tile(TransposeOp op) { return FERRY_DISPATCH(TransposeHalfTileSize)(op); }

int transpose_stream_rows(TransposeOp op) { return FERRY_DISPATCH(TransposeStreamRows)(op); }

int transpose_stream_cols(TransposeOp op) { return FERRY_DISPATCH(TransposeStreamCols)(op); }

bool transpose_native_bf16(TransposeOp op) { return FERRY_DISPATCH(TransposeNativeBF16)(op); }

void transpose_tiles(const TransposeRect& rect) { FERRY_DISPATCH(TransposeTiles)(rect); }

}  // namespace kernels
}  // namespace ferry::cpu
#endif  // HWY_ONCE
