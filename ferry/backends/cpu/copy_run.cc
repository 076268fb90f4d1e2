// run_copy: executes a CopyPlan. Row kernels walk dst's dim 0 in runs; the transpose walks
// blocks of (dim 0 x src's contiguous dim), register tiles inside (streaming by strips or by
// panels), conversion folded in or done from an L1 buffer, edges as strided runs. Work is split
// in contiguous ranges across plan.threads chunks; with one chunk the thread pool is never
// touched.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/backends/cpu/copy_tuning.h"
#include "ferry/core/error.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu {
namespace {

using kernels::ConjNeg;
using kernels::TransposeOp;

// Note [short runs]
// A Memcpy whose dim-0 runs are at most kShortRunBytes (permute(1, 0, 2) of rows of 8 float32:
// 32-byte runs) spent about 20 ns per run on the call and the odometer, 0.11x memcpy. Whole runs
// along dim 1 are copied in a tight loop instead, by a copy whose size is a compile-time constant
// where it is a power of two.
constexpr int64_t kShortRunBytes = 64;

template <size_t kBytes>
void copy_runs_of(char* dst, int64_t dst1, const char* src, int64_t src1, int64_t runs) {
  for (int64_t r = 0; r < runs; ++r) std::memcpy(dst + r * dst1, src + r * src1, kBytes);
}

void copy_short_runs(char* dst, int64_t dst1, const char* src, int64_t src1, int64_t bytes,
                     int64_t runs) {
  switch (bytes) {
    case 4:
      return copy_runs_of<4>(dst, dst1, src, src1, runs);
    case 8:
      return copy_runs_of<8>(dst, dst1, src, src1, runs);
    case 16:
      return copy_runs_of<16>(dst, dst1, src, src1, runs);
    case 32:
      return copy_runs_of<32>(dst, dst1, src, src1, runs);
    case 64:
      return copy_runs_of<64>(dst, dst1, src, src1, runs);
    case 128:
      return copy_runs_of<128>(dst, dst1, src, src1, runs);
    case 256:
      return copy_runs_of<256>(dst, dst1, src, src1, runs);
    default:
      for (int64_t r = 0; r < runs; ++r) {
        std::memcpy(dst + r * dst1, src + r * src1, static_cast<size_t>(bytes));
      }
  }
}

// Moves dst and src to outer index o over dims [1, ndim) other than skip_a and skip_b, the first
// of them fastest; records each dim's index in idx when given (for step_odometer).
void seek_outer(const CopyProblem& p, int64_t o, int skip_a, int skip_b, char*& dst,
                const char*& src, DimVector* idx = nullptr) {
  for (int d = 1; d < p.ndim(); ++d) {
    if (d == skip_a || d == skip_b) continue;
    const int64_t id = o % p.sizes[d];
    o /= p.sizes[d];
    dst += id * p.dst_strides[d];
    src += id * p.src_strides[d];
    if (idx != nullptr) (*idx)[d] = id;
  }
}

// Dims listed fastest first, each a size and its byte strides: a transpose's outer dims in their
// order, or its staged units' (whose chunked dims take fewer, longer steps).
struct OuterWalk {
  DimVector sizes, dst_strides, src_strides;

  void add(int64_t size, int64_t dst_stride, int64_t src_stride) {
    sizes.push_back(size);
    dst_strides.push_back(dst_stride);
    src_strides.push_back(src_stride);
  }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  // Moves dst and src to outer index o.
  void seek(int64_t o, char*& dst, const char*& src) const {
    for (size_t d = 0; d < sizes.size(); ++d) {
      const int64_t id = o % sizes[d];
      o /= sizes[d];
      dst += id * dst_strides[d];
      src += id * src_strides[d];
    }
  }
};

// Note [short-run blocks]
// Short runs whose neighbours along dim 2 are the next runs of the same src lines: permute(1, 0,
// 2) of rows of 8 float32, src runs 32 bytes apart along dim 2 and 128 KiB apart along dim 1.
// Copied run by run along dim 1, each src line is fetched once per run in it, and with the rows a
// power of two apart (one L1 and one L2 set) it has been evicted before the next run comes back
// for it: 0.55x memcpy on an Intel Xeon. Instead each row of dim 1 gives kRunBlockBytes of src
// along dim 2 at once: every src line read once and whole, dst written as that many sequential
// streams, the rows ahead asked for (the prefetchers do not follow a 128 KiB stride).
constexpr int64_t kRunBlockBytes = 256;
constexpr int64_t kRunBlockAheadRows = 8;

// Whether p's short runs go by blocks along dim 2 (Note [short-run blocks]).
bool short_run_blocks(const CopyProblem& p, CopyKernelKind kind) {
  if (kind != CopyKernelKind::Memcpy || p.ndim() < 3) return false;
  const int64_t run = p.sizes[0] * static_cast<int64_t>(element_size(p.dst_dtype));
  return run <= kShortRunBytes && p.src_strides[2] == run && p.sizes[2] >= 2 &&
         std::abs(p.src_strides[1]) >= kRunBlockBytes;
}

// The runs along dim 2 one short-run block copies per row of dim 1.
int64_t runs_per_block(const CopyProblem& p) {
  const int64_t run = p.sizes[0] * static_cast<int64_t>(element_size(p.dst_dtype));
  return std::max<int64_t>(1, kRunBlockBytes / run);
}

// One block: `runs` runs of `bytes` (kBytes when it is not 0: a fixed-size copy) per row.
template <size_t kBytes>
void copy_run_block(char* dst, int64_t dst1, int64_t dst2, const char* src, int64_t src1,
                    int64_t rows, int64_t runs, int64_t bytes) {
  const int64_t run = kBytes != 0 ? static_cast<int64_t>(kBytes) : bytes;
  for (int64_t r = 0; r < rows; ++r) {
    const char* ahead = src + (r + kRunBlockAheadRows) * src1;
    for (int64_t b = 0; b < runs * run; b += 64) {
      __builtin_prefetch(ahead + b, /*rw=*/0, /*locality=*/2);
    }
    const char* from = src + r * src1;
    char* to = dst + r * dst1;
    for (int64_t g = 0; g < runs; ++g) {
      std::memcpy(to + g * dst2, from + g * run, static_cast<size_t>(run));
    }
  }
}

// Units [lo, hi) of short-run blocks: (a block of runs along dim 2, outer index), blocks fastest.
void run_short_run_blocks(const CopyProblem& p, int64_t lo, int64_t hi) {
  const int64_t run = p.sizes[0] * static_cast<int64_t>(element_size(p.dst_dtype));
  const int64_t per_block = runs_per_block(p);
  const int64_t blocks = (p.sizes[2] + per_block - 1) / per_block;
  for (int64_t u = lo; u < hi; ++u) {
    const int64_t g0 = u % blocks * per_block;
    char* dst = p.dst + g0 * p.dst_strides[2];
    const char* src = p.src + g0 * p.src_strides[2];
    seek_outer(p, u / blocks, 1, 2, dst, src);
    const int64_t runs = std::min(per_block, p.sizes[2] - g0);
    const int64_t d1 = p.dst_strides[1], d2 = p.dst_strides[2], s1 = p.src_strides[1];
    switch (run) {
      case 16:
        copy_run_block<16>(dst, d1, d2, src, s1, p.sizes[1], runs, run);
        break;
      case 32:
        copy_run_block<32>(dst, d1, d2, src, s1, p.sizes[1], runs, run);
        break;
      case 64:
        copy_run_block<64>(dst, d1, d2, src, s1, p.sizes[1], runs, run);
        break;
      default:
        copy_run_block<0>(dst, d1, d2, src, s1, p.sizes[1], runs, run);
    }
  }
}

// The next position of the odometer over dims [first, ndim) but `skip`: dst and src move with it.
void step_odometer(const CopyProblem& p, int first, DimVector& idx, char*& dst, const char*& src,
                   int skip = -1) {
  for (int d = first; d < p.ndim(); ++d) {
    if (d == skip) continue;
    dst += p.dst_strides[d];
    src += p.src_strides[d];
    if (++idx[d] < p.sizes[d]) return;
    dst -= p.sizes[d] * p.dst_strides[d];
    src -= p.sizes[d] * p.src_strides[d];
    idx[d] = 0;
  }
}

// Elements [lo, hi) of the problem in dst's order (dim 0 fastest), as runs along dim 0.
void run_rows(const CopyProblem& p, CopyKernelKind kind, ConjNeg flags, bool stream, int64_t lo,
              int64_t hi) {
  const int nd = p.ndim();
  if (nd == 0) {
    kernels::strided_run(p.dst_dtype, p.src_dtype, p.dst, 0, p.src, 0, 1, flags);
    return;
  }
  const int64_t n0 = p.sizes[0];
  const int64_t dst0 = p.dst_strides[0];
  const int64_t src0 = p.src_strides[0];
  const auto elem = static_cast<int64_t>(element_size(p.dst_dtype));
  DimVector idx(static_cast<size_t>(nd), 0);  // inline up to kInlineDims: no allocation
  int64_t col = lo % n0;
  char* dst = p.dst + col * dst0;
  const char* src = p.src + col * src0;
  seek_outer(p, lo / n0, -1, -1, dst, src, &idx);
  const bool short_runs = kind == CopyKernelKind::Memcpy && nd >= 2 && n0 * elem <= kShortRunBytes;
  for (int64_t remaining = hi - lo;;) {
    if (short_runs && col == 0 && remaining >= n0) {
      // Whole runs along dim 1 (Note [short runs]); a partial last run takes the path below.
      const int64_t k = std::min(p.sizes[1] - idx[1], remaining / n0);
      copy_short_runs(dst, p.dst_strides[1], src, p.src_strides[1], n0 * elem, k);
      remaining -= k * n0;
      if (remaining == 0) return;
      // On to the last run copied (k >= 1), then one odometer step past it.
      idx[1] += k - 1;
      dst += (k - 1) * p.dst_strides[1];
      src += (k - 1) * p.src_strides[1];
      step_odometer(p, 1, idx, dst, src);
      continue;
    }
    const int64_t m = std::min(n0 - col, remaining);
    if (kind == CopyKernelKind::Memcpy) {
      kernels::copy_bytes(dst, src, static_cast<size_t>(m * elem), stream);
    } else {
      kernels::strided_run(p.dst_dtype, p.src_dtype, dst, dst0, src, src0, m, flags, stream);
    }
    remaining -= m;
    if (remaining == 0) return;
    dst -= col * dst0;
    src -= col * src0;
    col = 0;
    step_odometer(p, 1, idx, dst, src);
  }
}

// Note [narrow gathers]
// A gather whose dst runs (dim 0) are shorter than a tile side, from src rows contiguous along
// dim 1: NCHW -> NHWC with 3 or 4 channels (dim 0 the channels, dim 1 the pixels). Run by run,
// each run of 3 elements is a call; instead, kNarrowCols columns of dim 1 at a time, each of
// the n0 src rows is read sequentially and its elements interleaved into dst, with n0 and the
// element size known at compile time. Same dtype, no conj/neg; other gathers go run by run.
// With a packed dst (channels-last) of 2-4 planes, SIMD interleaves whole vectors of each row
// (Highway's StoreInterleaved): 3-channel uint8 images to channels-last went from 0.15-0.3x
// memcpy, a byte at a time, to docs/kernels.md's figures.
// Note [narrow scatters]
// The reverse: dst rows along dim 0 read from src tuples of 2-4 elements along another dim k (src
// stride one element, dim 0's one tuple): NHWC -> NCHW with 3 channels (k the channels), pixel
// unshuffle (k the pair of columns, dim 0 the 28 tuples of a row). Gathered row by row at a
// stride of one tuple, every src line is read once per element of the tuple, each row a call;
// instead the tuples of up to kNarrowCols pixels are split into the k rows at once (SIMD
// deinterleave).
constexpr int64_t kNarrowCols = 1024;

template <class T, int kN>
void interleave(char* dst, int64_t dst0, int64_t dst1, const char* src, int64_t src0, int64_t n,
                bool stream) {
  if (dst0 == static_cast<int64_t>(sizeof(T)) && dst1 == kN * static_cast<int64_t>(sizeof(T))) {
    // Packed dst (channels-last): one sequential stream of n * kN elements.
    if (kN <= 4 && kernels::interleave_planes(sizeof(T), kN, dst, src, src0, n, stream)) return;
    for (int64_t j = 0; j < n; ++j) {
      for (int i = 0; i < kN; ++i) {
        std::memcpy(dst + (j * kN + i) * static_cast<int64_t>(sizeof(T)),
                    src + i * src0 + j * static_cast<int64_t>(sizeof(T)), sizeof(T));
      }
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int i = 0; i < kN; ++i) {
      std::memcpy(dst + i * dst0 + j * dst1, src + i * src0 + j * static_cast<int64_t>(sizeof(T)),
                  sizeof(T));
    }
  }
}

using InterleaveFn = void (*)(char*, int64_t, int64_t, const char*, int64_t, int64_t, bool);

template <class T>
InterleaveFn interleave_for(int64_t n0) {
  switch (n0) {
    case 2:
      return &interleave<T, 2>;
    case 3:
      return &interleave<T, 3>;
    case 4:
      return &interleave<T, 4>;
    case 5:
      return &interleave<T, 5>;
    case 6:
      return &interleave<T, 6>;
    case 7:
      return &interleave<T, 7>;
    default:
      return nullptr;
  }
}

// The narrow gather's kernel for p, or nullptr when p is not one (Note [narrow gathers]).
InterleaveFn narrow_gather(const CopyProblem& p, ConjNeg flags) {
  const auto elem = static_cast<int64_t>(element_size(p.dst_dtype));
  if (p.ndim() < 2 || p.dst_dtype != p.src_dtype || flags.any() ||
      p.sizes[0] >= tuning::kMinTransposeSide || p.dst_strides[0] != elem ||
      p.src_strides[1] != elem) {
    return nullptr;
  }
  switch (elem) {
    case 1:
      return interleave_for<uint8_t>(p.sizes[0]);
    case 2:
      return interleave_for<uint16_t>(p.sizes[0]);
    case 4:
      return interleave_for<uint32_t>(p.sizes[0]);
    case 8:
      return interleave_for<uint64_t>(p.sizes[0]);
    default:
      return nullptr;
  }
}

// Units [lo, hi) of a narrow gather: (kNarrowCols columns of dim 1, outer index), columns fastest.
void run_narrow(const CopyProblem& p, InterleaveFn fn, bool stream, int64_t lo, int64_t hi) {
  const int64_t chunks = (p.sizes[1] + kNarrowCols - 1) / kNarrowCols;
  for (int64_t u = lo; u < hi; ++u) {
    const int64_t j0 = u % chunks * kNarrowCols;
    char* dst = p.dst + j0 * p.dst_strides[1];
    const char* src = p.src + j0 * p.src_strides[1];
    seek_outer(p, u / chunks, 1, -1, dst, src);
    fn(dst, p.dst_strides[0], p.dst_strides[1], src, p.src_strides[0],
       std::min(kNarrowCols, p.sizes[1] - j0), stream);
  }
}

// The dim holding a narrow scatter's tuples (Note [narrow scatters]), or 0 when p is not one.
int narrow_scatter_dim(const CopyProblem& p, ConjNeg flags) {
  const auto elem = static_cast<int64_t>(element_size(p.dst_dtype));
  if (p.ndim() < 2 || p.dst_dtype != p.src_dtype || flags.any() ||
      !(elem == 1 || elem == 2 || elem == 4 || elem == 8) || p.dst_strides[0] != elem) {
    return 0;
  }
  for (int k = 1; k < p.ndim(); ++k) {
    if (p.sizes[k] >= 2 && p.sizes[k] <= 4 && p.src_strides[k] == elem &&
        p.src_strides[0] == p.sizes[k] * elem) {
      return k;
    }
  }
  return 0;
}

// The dim whose rows a narrow scatter over tuple dim k hands to the kernel together, or 0 for
// row by row: the first dim other than 0 and k, when dim 0 fits one unit. Pixel unshuffle's
// rows of 28 pixels go 28 at a time, so each plane's 28 rows (3136 bytes, one run in dst)
// stream as whole lines, and the kernel is called once per block rather than per row.
int narrow_scatter_row_dim(const CopyProblem& p, int k) {
  if (p.sizes[0] > kNarrowCols) return 0;
  for (int d = 1; d < p.ndim(); ++d) {
    if (d != k) return d;
  }
  return 0;
}

// Units of a narrow scatter over tuple dim k: blocks of rows along dim r when r > 0, else
// kNarrowCols pixels of dim 0; times the index over the other dims.
int64_t narrow_scatter_units(const CopyProblem& p, int k, int r) {
  const int64_t per_outer = r > 0 ? p.sizes[0] * p.sizes[r] : p.sizes[0];
  const int64_t chunks = r > 0 ? 1 : (p.sizes[0] + kNarrowCols - 1) / kNarrowCols;
  return p.numel() / per_outer / p.sizes[k] * chunks;
}

// Units [lo, hi) of a narrow scatter over tuple dim k with row dim r > 0: each unit's sizes[r]
// rows of sizes[0] tuples in one kernel call.
void run_narrow_scatter_rows(const CopyProblem& p, int k, int r, bool stream, int64_t lo,
                             int64_t hi) {
  const auto elem = element_size(p.dst_dtype);
  const auto planes = static_cast<int>(p.sizes[k]);
  for (int64_t u = lo; u < hi; ++u) {
    char* dst = p.dst;
    const char* src = p.src;
    seek_outer(p, u, k, r, dst, src);
    if (kernels::deinterleave_plane_rows(elem, planes, dst, p.dst_strides[k], p.dst_strides[r], src,
                                         p.src_strides[r], p.sizes[0], p.sizes[r], stream)) {
      continue;
    }
    for (int64_t i = 0; i < p.sizes[r]; ++i) {
      for (int c = 0; c < planes; ++c) {
        kernels::strided_run(p.dst_dtype, p.src_dtype,
                             dst + i * p.dst_strides[r] + c * p.dst_strides[k], p.dst_strides[0],
                             src + i * p.src_strides[r] + c * p.src_strides[k], p.src_strides[0],
                             p.sizes[0], {});
      }
    }
  }
}

// Units [lo, hi) of a narrow scatter over tuple dim k: (kNarrowCols pixels of dim 0, index over
// the dims other than 0 and k), pixels fastest. The odometer steps rather than dividing per
// unit.
void run_narrow_scatter(const CopyProblem& p, int k, bool stream, int64_t lo, int64_t hi) {
  const auto elem = element_size(p.dst_dtype);
  const int64_t chunks = (p.sizes[0] + kNarrowCols - 1) / kNarrowCols;
  const auto planes = static_cast<int>(p.sizes[k]);
  int64_t chunk = lo % chunks;
  DimVector idx(static_cast<size_t>(p.ndim()), 0);
  char* dst = p.dst;
  const char* src = p.src;
  seek_outer(p, lo / chunks, k, -1, dst, src, &idx);
  for (int64_t u = lo; u < hi; ++u) {
    const int64_t i0 = chunk * kNarrowCols;
    const int64_t m = std::min(kNarrowCols, p.sizes[0] - i0);
    char* d0 = dst + i0 * p.dst_strides[0];
    const char* s0 = src + i0 * p.src_strides[0];
    if (!kernels::deinterleave_planes(elem, planes, d0, p.dst_strides[k], s0, m, stream)) {
      for (int c = 0; c < planes; ++c) {
        kernels::strided_run(p.dst_dtype, p.src_dtype, d0 + c * p.dst_strides[k], p.dst_strides[0],
                             s0 + c * p.src_strides[k], p.src_strides[0], m, {});
      }
    }
    if (++chunk < chunks) continue;
    chunk = 0;
    step_odometer(p, 1, idx, dst, src, k);
  }
}

// Note [line-staged transposes]
// A transpose with a side under two lines per block (dim 0 of 32 bytes: 32-byte dst runs; src
// rows of 32 bytes along dim k) whose rows sit a multiple of the L2's set span apart reads and
// writes each line in parts, and between the parts the other rows, all on the same L1 and L2
// sets, have evicted it: permute(4, 3, 2, 1, 0) of 32 x 16 x 16 x 32 x 32 bytes, src and dst
// rows 256 KiB apart, ran at 0.10x memcpy (AMD EPYC, Zen 5), every line fetched from the L3
// several times. When the dim that continues a side's runs (dst stride = dim 0's bytes; src
// stride = dim k's bytes) splits into chunks, the block takes a chunk of it, so that its src rows
// are kStagedSrcRunBytes long and its dst rows kStagedDstRunBytes (transpose_staging). The block
// then goes through two buffers: its src rows copied whole into the first, line after line,
// the register tiles from there into the second, whose rows go to dst whole (streamed when the
// plan streams: whole lines now). Each line is read and written once, and the src rows' longer
// runs keep more lines in flight. When one dim continues both sides' runs, the block's chunk of
// it is a batch of tiles (TransposeRect::repeat). That uint8 permutation went from 3.7-4.9 to
// 1.4-2.1 ms at 1 thread and 2.5-2.8 to 1.1 ms at 2, its bfloat16 twin from 4.9-5.9 to 2.8-4.4
// and 2.7-3.6 to 2.1-2.3 ms (three alternations). Where both sides already have two lines (the
// float32 twin) staging was slower (3.6-5.1 against 5.3-7.7 ms), and so it was where the rows
// are only 4 KiB apart and the L2 keeps them (permute(3, 0, 5, 1, 4, 2) of 8 x 8 x 16^4 bytes:
// 0.34-0.43 against 0.42-0.59 ms at 1 thread).

// Note [transpose outer order]
// The dims other than a transpose's two are outer: each index of them is a unit of blocks. By
// default the units follow dst (its strides ascending, as the problem's dims are ordered), so
// consecutive units write the next run of the same dst rows. When a block writes each dst row at
// least two lines (kTransposeMinStreamRunBytes, streamed), the units follow src instead (its
// strides ascending): consecutive units then read the next lines of the same src rows, which the
// prefetchers follow, while dst's runs are whole lines written once wherever they are. Many-dim
// permutations gain: permute(4, 3, 2, 1, 0) of 32 x 16 x 16 x 32 x 32 float32 went from
// 5.0-6.5 ms to 3.6-4.6 ms at 1 thread and 3.1-3.9 to 2.3-2.5 ms at 2 (AMD EPYC, Zen 4; units
// were 128 bytes of 32 rows a MiB apart, each unit 64 KiB further on); the 6-dim float64 one
// 4.3-4.4 to 3.8-4.2 ms. Below two lines per row the stores are ordinary and lines are
// finished in the cache: by dst's fastest outer dim for dst's lines (its next run of the same
// rows), so that one stays first, and src's fastest of the others comes second, so that the
// other part of each src line is read right after (src and dst rows a power of two apart evict
// each other's lines from the L1 and L2 within a few units). bfloat16 permute(4, 3, 2, 1, 0)
// went from 8.0-9.5 ms to 4.0-5.9 ms at 1 thread and 4.6-5.0 to 2.5-3.0 ms at 2 (all in src
// order: 9.6-9.9 ms at 1 thread), its uint8 twin from 4.8-5.6 to 3.0-3.5 and 2.4-2.7 to
// 1.5-2.0 ms.

// Note [small transposes]
// A many-dim permutation of narrow elements is a transpose of a single tile or two per outer
// index (permute(3, 0, 5, 1, 4, 2) of 8 x 8 x 16^4 bytes: 16 x 16 bytes, 256 bytes per unit), and
// finding each unit's operands (a division per outer dim), the block's set-up and the kernel's
// dispatch cost more than the tile itself: ferry ran at 0.19x memcpy, three quarters of its time
// outside the tiles. When each unit is one block with ordinary stores, the units along the
// fastest outer dim go to the kernel together (TransposeRect::repeat): one set-up per run of
// them.

// A transpose over dims 0 (i: dst contiguous) and k (j: src contiguous); other dims are outer.
struct Transpose {
  const CopyProblem& p;
  ConjNeg flags;
  int k = 0;
  int64_t rows = 0, cols = 0;    // M (along i) and K (along j)
  int64_t src_i = 0, dst_j = 0;  // the strided side of each operand, bytes
  int64_t dst_size = 0, src_size = 0;
  int64_t block_rows = 0, block_cols = 0;
  TransposeRoute route = TransposeRoute::kFused;
  TransposeOp op = TransposeOp::kNone;  // the route's tile op (transpose_tile_op)
  int64_t tile = 0;
  int64_t half_tile = 0;     // Note [half tiles] in copy_planner.cc; 0: none
  bool buffer_half = false;  // routes through the buffer: `tile` is the half tiles' edge
  bool stream = false;
  bool panel = false;       // streaming tiles go by panels (dst rows off their lines)
  bool short_rows = false;  // whole src rows per block, at most kShortRowBytes apart
  int64_t row_blocks = 0, col_groups = 1, outer = 1;
  bool rows_outermost = false;  // loop order, see run()
  DimVector outer_order;        // the outer dims, fastest first (Note [transpose outer order])
  OuterWalk outer_walk;         // the same dims' sizes and strides
  bool read_ahead = false;      // ask for the next unit's rows in address order (Ahead)

  // Note [line-staged transposes]: the block's shape, and the units it steps through (every dim
  // but the two, the chunked ones in chunks, by dst's strides, fastest first). Not staged when
  // staged_units is 0.
  TransposeStaging staging;
  OuterWalk staged_walk;
  int64_t staged_units = 0;

  static constexpr size_t kBufferBytes = tuning::kTransposeBufferBytes;

  // The rows of the strip this thread reads next (`count` rows from `rows`, src_i apart, whole
  // src rows of cols elements) and the stretch [begin, end) of them, laid end to end, that one
  // block asks for (TransposeRect::ahead).
  struct Ahead {
    const char* rows = nullptr;
    int64_t count = 0, begin = 0, end = 0;
  };

  // The same block at `count` places, `src` and `dst` bytes apart (Note [small transposes]).
  struct Repeat {
    int64_t count, src, dst;
  };

  void block(char* dst, const char* src, int64_t bi, int64_t bj, const Ahead& ahead,
             const Repeat& rep = Repeat{1, 0, 0}) const {
    const int64_t bi_t = tile > 0 ? bi / tile * tile : 0;
    const int64_t bj_t = tile > 0 ? bj / tile * tile : 0;
    // Converted first, repeated blocks whose src rows continue one another (permute(3, 0, 5, 1,
    // 4, 2) of int32 to float32: rows of 8 elements, each block's next 8 the next block's) are
    // converted a whole row of all the blocks per call, and moved by one repeated tile call.
    const bool convert_repeats =
        rep.count > 1 && route == TransposeRoute::kConvertFirst && !stream && bi_t > 0 &&
        bj_t > 0 && rep.src == bj * src_size &&
        bi_t * rep.count * bj * dst_size <= static_cast<int64_t>(kBufferBytes);
    if (rep.count > 1 && route != TransposeRoute::kFused && !convert_repeats) {
      for (int64_t r = 0; r < rep.count; ++r) {
        block(dst + r * rep.dst, src + r * rep.src, bi, bj, ahead);
      }
      return;
    }
    alignas(64) char buffer[kBufferBytes];
    int64_t done_i = bi_t;  // rows [0, done_i) x cols [0, done_j) come from the tiles
    int64_t done_j = bj_t;
    if (route == TransposeRoute::kFused) {
      if (bi_t > 0 && bj_t > 0) {
        kernels::transpose_tiles({src, dst, bi_t, bj_t, src_i, dst_j, op, stream,
                                  stream && short_rows, panel, ahead.rows, src_i, cols * src_size,
                                  ahead.begin, ahead.end, rep.count, rep.src, rep.dst});
      }
      // Note [half tiles]: the rows under the tiles, or the block when its columns are under a
      // whole tile.
      if (half_tile > 0) {
        const int64_t i0 = bj_t > 0 ? bi_t : 0;
        const int64_t bi_h = bi / half_tile * half_tile;
        const int64_t bj_h = bj_t > 0 ? bj_t : bj / half_tile * half_tile;
        if (bi_h > i0 && bj_h > 0) {
          kernels::TransposeRect rect;
          rect.src = src + i0 * src_i;
          rect.dst = dst + i0 * dst_size;
          rect.rows = bi_h - i0;
          rect.cols = bj_h;
          rect.src_row_stride = src_i;
          rect.dst_row_stride = dst_j;
          rect.op = op;
          rect.repeat = rep.count;
          rect.src_repeat_stride = rep.src;
          rect.dst_repeat_stride = rep.dst;
          rect.half = true;
          kernels::transpose_tiles(rect);
          done_i = bi_h;
          done_j = bj_h;
        }
      }
    } else if (convert_repeats) {
      const int64_t width = rep.count * bj;  // elements per buffer row
      for (int64_t i = 0; i < bi_t; ++i) {
        kernels::convert_contiguous(p.dst_dtype, p.src_dtype, buffer + i * width * dst_size,
                                    src + i * src_i, width, flags);
      }
      kernels::TransposeRect rect{buffer, dst, bi_t, bj_t, width * dst_size, dst_j, op, false};
      rect.repeat = rep.count;
      rect.src_repeat_stride = bj * dst_size;
      rect.dst_repeat_stride = rep.dst;
      rect.half = buffer_half;
      kernels::transpose_tiles(rect);
    } else if (route == TransposeRoute::kConvertFirst) {
      // src's rows converted into the buffer in dst's dtype, conj/neg applied there, as many
      // whole tile columns at a time as it holds; then moved to dst by the tiles.
      const int64_t chunk =
          std::max<int64_t>(tile, static_cast<int64_t>(kBufferBytes) /
                                      (std::max<int64_t>(bi_t, 1) * dst_size) / tile * tile);
      for (int64_t j0 = 0; bi_t > 0 && j0 < bj_t; j0 += chunk) {
        const int64_t m = std::min(chunk, bj_t - j0);
        for (int64_t i = 0; i < bi_t; ++i) {
          // The row's next stretch, a chunk ahead (Note [transpose prefetch]: the prefetchers
          // do not keep up with a strip's rows read side by side).
          const char* row = src + i * src_i + j0 * src_size;
          for (int64_t b = 0; b < m * src_size; b += 64) {
            __builtin_prefetch(row + m * src_size + b, /*rw=*/0, /*locality=*/2);
          }
          kernels::convert_contiguous(p.dst_dtype, p.src_dtype, buffer + i * m * dst_size, row, m,
                                      flags);
        }
        kernels::TransposeRect rect{buffer, dst + j0 * dst_j, bi_t,  m,    m * dst_size, dst_j,
                                    op,     stream,           false, panel};
        rect.half = buffer_half;
        kernels::transpose_tiles(rect);
      }
    } else {
      // Transpose src elements into the buffer (dst's layout, src's dtype), then convert rows.
      if (tile == 0) {
        done_i = bi;
        done_j = bj;
        for (int64_t j = 0; j < bj; ++j) {
          kernels::strided_run(p.src_dtype, p.src_dtype, buffer + j * bi * src_size, src_size,
                               src + j * src_size, src_i, bi, {});
        }
      } else if (bi_t > 0 && bj_t > 0) {
        kernels::TransposeRect rect{src, buffer, bi_t, bj_t, src_i, bi_t * src_size, op, false};
        rect.half = buffer_half;
        kernels::transpose_tiles(rect);
      }
      if (done_i > 0) {
        for (int64_t j = 0; j < done_j; ++j) {
          kernels::convert_contiguous(p.dst_dtype, p.src_dtype, dst + j * dst_j,
                                      buffer + j * done_i * src_size, done_i, flags, stream);
        }
      }
    }
    // Edges, along dst's rows: the rows below the tiles in the tiles' columns, whole columns right
    // of them. (Along src's rows, a bottom edge would scatter every store over the dst rows.)
    if (done_i == bi && done_j == bj) return;
    for (int64_t r = 0; r < rep.count; ++r) {
      for (int64_t j = 0; j < bj; ++j) {
        const int64_t i0 = j < done_j ? done_i : 0;
        if (i0 < bi) {
          kernels::strided_run(
              p.dst_dtype, p.src_dtype, dst + r * rep.dst + j * dst_j + i0 * dst_size, dst_size,
              src + r * rep.src + i0 * src_i + j * src_size, src_i, bi - i0, flags);
        }
      }
    }
  }

  int64_t units() const {
    return staged_units > 0 ? staged_units : outer * row_blocks * col_groups;
  }

  // Staged units [lo, hi) (Note [line-staged transposes]): src rows into buffer a, the tiles
  // into buffer b, b's rows out to dst.
  void run_staged(int64_t lo, int64_t hi) const {
    const TransposeStaging& s = staging;
    alignas(64) char a[tuning::kStagedBlockBytes];
    alignas(64) char b[tuning::kStagedBlockBytes];
    // A shared dim's chunk lengthens both sides' rows (col_n == row_n); otherwise row_n more src
    // rows and col_n more dst rows.
    const int64_t row_chunks = s.shared ? 1 : s.row_n;  // src rows: rows x row_chunks
    const int64_t col_chunks = s.shared ? 1 : s.col_n;  // dst rows: cols x col_chunks
    const int64_t a_row = cols * s.col_n * src_size;
    const int64_t b_row = rows * s.row_n * dst_size;
    const int64_t src_chunk = s.shared || s.row_dim < 0 ? 0 : p.src_strides[s.row_dim];
    const int64_t dst_chunk = s.shared || s.col_dim < 0 ? 0 : p.dst_strides[s.col_dim];
    kernels::TransposeRect rect;
    rect.src = a;
    rect.dst = b;
    rect.rows = rows * row_chunks;
    rect.cols = cols * col_chunks;
    rect.src_row_stride = a_row;
    rect.dst_row_stride = b_row;
    rect.op = op;
    if (s.shared) {
      rect.repeat = s.row_n;
      rect.src_repeat_stride = cols * src_size;
      rect.dst_repeat_stride = rows * dst_size;
    }
    for (int64_t u = lo; u < hi; ++u) {
      char* dst = p.dst;
      const char* src = p.src;
      staged_walk.seek(u, dst, src);
      for (int64_t q = 0; q < row_chunks; ++q) {
        copy_short_runs(a + q * rows * a_row, a_row, src + q * src_chunk, src_i, a_row, rows);
      }
      kernels::transpose_tiles(rect);
      for (int64_t q = 0; q < col_chunks; ++q) {
        char* to = dst + q * dst_chunk;
        const char* from = b + q * cols * b_row;
        if (stream) {
          kernels::stream_rows(to, dst_j, from, b_row, static_cast<size_t>(b_row), cols);
        } else {
          copy_short_runs(to, dst_j, from, b_row, b_row, cols);
        }
      }
    }
  }

  // Unit u's operands at its row block's first row, column 0, and its rows there.
  struct Unit {
    char* dst = nullptr;
    const char* src = nullptr;
    int64_t rows = 0, cg = 0;
  };
  Unit unit(int64_t u) const {
    const int64_t rest = u / col_groups;
    Unit x;
    x.cg = u % col_groups;
    const int64_t rb = rows_outermost ? rest / outer : rest % row_blocks;
    x.dst = p.dst;
    x.src = p.src;
    outer_walk.seek(rows_outermost ? rest % outer : rest / row_blocks, x.dst, x.src);
    const int64_t i0 = rb * block_rows;
    x.rows = std::min(block_rows, rows - i0);
    x.src += i0 * src_i;
    x.dst += i0 * dst_size;
    return x;
  }

  int64_t col_blocks() const { return (cols + block_cols - 1) / block_cols; }

  // Whether the units along the fastest outer dim go to the kernel as one repeated block (Note
  // [small transposes]): every unit is a single block with ordinary stores.
  bool repeats_blocks() const {
    return col_blocks() == 1 && row_blocks == 1 && col_groups == 1 && !stream &&
           !outer_order.empty();
  }

  // Units [lo, hi): unit = (row block, outer index, column group). Normally the outer index is
  // slowest. When every outer dim lies inside src's rows (src stride below src_i, as the middle
  // dim of permute(2, 1, 0)), the row block is slowest instead: a strip of src rows is then read
  // sequentially through all the outer dims (each row's whole plane) before the next strip.
  void run(int64_t lo, int64_t hi) const {
    if (staged_units > 0) {
      run_staged(lo, hi);
      return;
    }
    const int64_t col_blocks = this->col_blocks();
    if (repeats_blocks()) {
      // Note [small transposes]: unit u is outer index u; the units that differ only in the
      // fastest outer dim's index go to the kernel as one repeated block.
      const int d0 = outer_order[0];
      const int64_t n0 = p.sizes[d0];
      for (int64_t u = lo; u < hi;) {
        const int64_t end = std::min(hi, (u / n0 + 1) * n0);
        const Unit x = unit(u);
        block(x.dst, x.src, x.rows, cols, Ahead{}, {end - u, p.src_strides[d0], p.dst_strides[d0]});
        u = end;
      }
      return;
    }
    const int64_t blocks_per_group = (col_blocks + col_groups - 1) / col_groups;
    Unit next = lo < hi ? unit(lo) : Unit{};
    for (int64_t u = lo; u < hi; ++u) {
      const Unit x = next;
      if (u + 1 < hi) next = unit(u + 1);
      // The next unit's rows, this thread's next strip, asked for in address order across this
      // unit's blocks, unless they lie on this strip's L2 sets (Note [transpose read-ahead]).
      Ahead ahead;
      if (read_ahead && col_groups == 1 && u + 1 < hi &&
          (next.src - x.src) % tuning::l2_set_span() != 0) {
        ahead.rows = next.src;
        ahead.count = next.rows;
      }
      const int64_t ahead_bytes = ahead.count * cols * src_size;
      const int64_t cb_begin = x.cg * blocks_per_group;
      const int64_t cb_end = std::min(col_blocks, (x.cg + 1) * blocks_per_group);
      for (int64_t cb = cb_begin; cb < cb_end; ++cb) {
        const int64_t j0 = cb * block_cols;
        ahead.begin = ahead_bytes * (cb - cb_begin) / (cb_end - cb_begin);
        ahead.end = ahead_bytes * (cb + 1 - cb_begin) / (cb_end - cb_begin);
        block(x.dst + j0 * dst_j, x.src + j0 * src_size, x.rows, std::min(block_cols, cols - j0),
              ahead);
      }
    }
  }
};

Transpose make_transpose(const CopyProblem& p, const CopyPlan& plan, ConjNeg flags) {
  Transpose t{p, flags};
  t.k = plan.src_fast_dim;
  t.rows = p.sizes[0];
  t.cols = p.sizes[t.k];
  t.src_i = p.src_strides[0];
  t.dst_j = p.dst_strides[t.k];
  t.dst_size = static_cast<int64_t>(element_size(p.dst_dtype));
  t.src_size = static_cast<int64_t>(element_size(p.src_dtype));
  t.block_rows = plan.block_rows;
  t.block_cols = plan.block_cols;
  // The route from the problem itself, as plan_copy chose it (a plan made for another problem
  // must not make the tiles skip a conversion or conj/neg).
  t.route = transpose_route(p);
  t.op = transpose_tile_op(p, t.route);
  t.tile = kernels::transpose_tile(t.op);
  t.stream = plan.stream && stream_allows(plan.kind, t.route, flags);
  // Tiles that store to dst stream by strips when every block's dst rows start on a cache line
  // and blocks are whole streaming steps (the tiles give a ragged last block ordinary stores);
  // otherwise by panels, whatever the plan says (a plan made for another problem stays correct).
  const int64_t stream_rows = kernels::transpose_stream_rows(t.op);
  const bool strips_fit = dst_rows_on_lines(p) && stream_rows > 0 &&
                          t.block_rows % stream_rows == 0 && t.block_rows * t.dst_size % 64 == 0;
  t.panel = tiles_store_to_dst(t.route) && t.stream && (plan.panel || !strips_fit);
  // Note [half tiles]: as planned, where this problem's tiles have them. The routes through the
  // buffer take them for every tile, and only with ordinary stores.
  t.half_tile = plan.half_tile > 0 ? kernels::transpose_half_tile(t.op) : 0;
  if (t.half_tile > 0 && t.route != TransposeRoute::kFused) {
    t.buffer_half = !t.stream;
    if (t.buffer_half) t.tile = t.half_tile;
    t.half_tile = 0;
  }
  // The buffer holds a tile column of a block in dst's dtype (converted first), or a whole block
  // (converted after).
  const int64_t buffered = t.route == TransposeRoute::kFused ? 0
                           : t.route == TransposeRoute::kConvertFirst
                               ? t.block_rows * t.tile * t.dst_size
                               : t.block_rows * t.block_cols * std::max(t.dst_size, t.src_size);
  FERRY_CHECK(t.block_rows > 0 && t.block_cols > 0 &&
                  buffered <= static_cast<int64_t>(Transpose::kBufferBytes),
              "run_copy: transpose block ", t.block_rows, "x", t.block_cols,
              " does not fit the kernel's buffer");
  // Whole src rows per block, close together (NHWC -> NCHW: 256-byte pixels), strips in order.
  t.short_rows = t.cols <= t.block_cols && std::abs(t.src_i) <= tuning::kShortRowBytes;
  // Strips of long rows read the next unit's rows ahead (Note [transpose read-ahead]); short rows
  // have their own prefetch, panels read down the whole block.
  t.read_ahead = t.route == TransposeRoute::kFused && t.stream && !t.panel && !t.short_rows;
  t.row_blocks = (t.rows + t.block_rows - 1) / t.block_rows;
  t.rows_outermost = true;
  for (int d = 1; d < p.ndim(); ++d) {
    if (d == t.k) continue;
    t.outer *= p.sizes[d];
    t.rows_outermost = t.rows_outermost && std::abs(p.src_strides[d]) < std::abs(t.src_i);
  }
  t.rows_outermost = t.rows_outermost && t.outer > 1;
  for (int d = 1; d < p.ndim(); ++d) {
    if (d != t.k) t.outer_order.push_back(d);
  }
  // Note [transpose outer order]
  const auto by_src = [&](int a, int b) {
    return std::abs(p.src_strides[a]) < std::abs(p.src_strides[b]);
  };
  if (std::min(t.block_rows, t.rows) * t.dst_size >= tuning::kTransposeMinStreamRunBytes) {
    std::stable_sort(t.outer_order.begin(), t.outer_order.end(), by_src);
  } else if (t.outer_order.size() >= 3) {
    const auto second = std::min_element(t.outer_order.begin() + 1, t.outer_order.end(), by_src);
    std::rotate(t.outer_order.begin() + 1, second, second + 1);
  }
  for (int d : t.outer_order) t.outer_walk.add(p.sizes[d], p.dst_strides[d], p.src_strides[d]);
  // Note [line-staged transposes]: as planned, when this problem allows it.
  if (plan.staged) t.staging = transpose_staging(p, t.k);
  if (t.staging.active()) {
    DimVector dims;
    for (int d = 1; d < p.ndim(); ++d) {
      if (d != t.k) dims.push_back(d);
    }
    std::stable_sort(dims.begin(), dims.end(), [&](int64_t x, int64_t y) {
      return std::abs(p.dst_strides[x]) < std::abs(p.dst_strides[y]);
    });
    for (int64_t d : dims) {
      const int64_t n = d == t.staging.row_dim   ? t.staging.row_n
                        : d == t.staging.col_dim ? t.staging.col_n
                                                 : 1;
      if (p.sizes[d] > n)
        t.staged_walk.add(p.sizes[d] / n, p.dst_strides[d] * n, p.src_strides[d] * n);
    }
    t.staged_units = t.staged_walk.count();
  }
  // Too few (outer x row block) units to share among the threads: split the columns too.
  if (t.outer * t.row_blocks < 4 * plan.threads) {
    t.col_groups = std::min<int64_t>((t.cols + t.block_cols - 1) / t.block_cols, 4 * plan.threads);
  }
  return t;
}

template <class Body>
void split(int threads, int64_t total, const Body& body) {
  if (threads <= 1 || total <= 1) {
    body(0, total);
    return;
  }
  const int64_t chunks = std::min<int64_t>(threads, total);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) body(c * total / chunks, (c + 1) * total / chunks);
  });
}

}  // namespace

CopyWalk copy_walk(const CopyProblem& p, const CopyPlan& plan) {
  if (plan.kind == CopyKernelKind::Transpose || p.numel() == 0) return CopyWalk::kRows;
  if (short_run_blocks(p, plan.kind)) return CopyWalk::kShortRunBlocks;
  if (plan.kind == CopyKernelKind::Gather) {
    const ConjNeg flags = kernels::effective_conj_neg(p.dst_dtype, p.conj, p.neg);
    if (narrow_gather(p, flags) != nullptr) return CopyWalk::kNarrowGather;
    if (narrow_scatter_dim(p, flags) > 0) return CopyWalk::kNarrowScatter;
  }
  return CopyWalk::kRows;
}

std::string describe_walk(const CopyProblem& p, const CopyPlan& plan) {
  const std::string runs =
      p.ndim() == 0 ? "" : std::to_string(p.sizes[0] * element_size(p.dst_dtype)) + "-byte ";
  switch (copy_walk(p, plan)) {
    case CopyWalk::kShortRunBlocks:
      return "short-run blocks: " + runs + "runs, " + std::to_string(runs_per_block(p)) +
             " per src row at a time";
    case CopyWalk::kNarrowGather:
      return "narrow gather: " + std::to_string(p.sizes[0]) +
             " planes interleaved into packed tuples (SIMD)";
    case CopyWalk::kNarrowScatter: {
      const int k = narrow_scatter_dim(p, kernels::effective_conj_neg(p.dst_dtype, p.conj, p.neg));
      const int r = narrow_scatter_row_dim(p, k);
      return "narrow scatter: tuples of " + std::to_string(p.sizes[k]) + " along dim " +
             std::to_string(k) + " deinterleaved into planes (SIMD)" +
             (r > 0 ? ", " + std::to_string(p.sizes[r]) + " rows of dim " + std::to_string(r) +
                          " per call"
                    : "");
    }
    case CopyWalk::kRows:
      break;
  }
  if (plan.kind == CopyKernelKind::Transpose) {
    // The outer dims' order and the repeated blocks, as run_copy will use them.
    const Transpose t =
        make_transpose(p, plan, kernels::effective_conj_neg(p.dst_dtype, p.conj, p.neg));
    if (t.staged_units > 0) {
      // Note [line-staged transposes]
      const TransposeStaging& s = t.staging;
      const auto chunk = [](int dim, int64_t n) {
        return " (" + std::to_string(n) + " of dim " + std::to_string(dim) + ")";
      };
      const int64_t src_run = t.cols * t.src_size * s.col_n;
      const int64_t dst_run = t.rows * t.dst_size * s.row_n;
      return "line-staged blocks: src rows of " + std::to_string(src_run) + " bytes" +
             (s.col_n > 1 ? chunk(s.col_dim, s.col_n) : "") + " into a buffer, register tiles " +
             (s.shared ? "repeated " + std::to_string(s.row_n) + " times " : "") +
             "into a second, dst rows of " + std::to_string(dst_run) + " bytes" +
             (!s.shared && s.row_n > 1 ? chunk(s.row_dim, s.row_n) : "") + " out; " +
             std::to_string(t.staged_units) + " blocks";
    }
    std::string walk = "blocks of register tiles";
    if (t.outer_order.size() > 1) {
      walk += ", outer dims";
      for (int d : t.outer_order) walk += " " + std::to_string(d);
      walk += " (fastest first)";
    }
    if (t.repeats_blocks()) {
      walk += ", up to " + std::to_string(p.sizes[t.outer_order[0]]) + " blocks per kernel call";
    }
    return walk;
  }
  return "rows: " + runs + "runs along dim 0, one kernel call each";
}

void run_copy(const CopyProblem& p, const CopyPlan& plan) {
  const int64_t numel = p.numel();
  if (numel == 0) return;
  const ConjNeg flags = kernels::effective_conj_neg(p.dst_dtype, p.conj, p.neg);
  const bool stream = plan.stream && !flags.any();
  if (plan.kind == CopyKernelKind::Transpose) {
    FERRY_CHECK(plan.src_fast_dim > 0 && plan.src_fast_dim < p.ndim(),
                "run_copy: a Transpose plan needs src_fast_dim in [1, ", p.ndim(), "), but got ",
                plan.src_fast_dim);
    const Transpose t = make_transpose(p, plan, flags);
    split(plan.threads, t.units(), [&](int64_t lo, int64_t hi) {
      t.run(lo, hi);
      if (t.stream) kernels::stream_fence();  // Note [streaming stores]
    });
    return;
  }
  // One contiguous run on this thread: straight to the kernel (the per-call cost of small copies).
  if (p.ndim() <= 1 && plan.threads <= 1 &&
      (plan.kind == CopyKernelKind::Memcpy || plan.kind == CopyKernelKind::Convert)) {
    if (plan.kind == CopyKernelKind::Memcpy) {
      kernels::copy_bytes(p.dst, p.src, static_cast<size_t>(numel) * element_size(p.dst_dtype),
                          stream);
    } else {
      kernels::convert_contiguous(p.dst_dtype, p.src_dtype, p.dst, p.src, numel, flags, stream);
    }
    if (stream) kernels::stream_fence();
    return;
  }
  switch (copy_walk(p, plan)) {
    case CopyWalk::kShortRunBlocks: {
      const int64_t per_block = runs_per_block(p);
      const int64_t units =
          numel / p.sizes[0] / p.sizes[1] / p.sizes[2] * ((p.sizes[2] + per_block - 1) / per_block);
      split(plan.threads, units, [&](int64_t lo, int64_t hi) { run_short_run_blocks(p, lo, hi); });
      return;
    }
    case CopyWalk::kNarrowGather: {
      const InterleaveFn fn = narrow_gather(p, flags);
      const int64_t units =
          numel / p.sizes[0] / p.sizes[1] * ((p.sizes[1] + kNarrowCols - 1) / kNarrowCols);
      split(plan.threads, units, [&](int64_t lo, int64_t hi) {
        run_narrow(p, fn, stream, lo, hi);
        if (stream) kernels::stream_fence();  // Note [streaming stores]
      });
      return;
    }
    case CopyWalk::kNarrowScatter: {
      const int k = narrow_scatter_dim(p, flags);
      const int r = narrow_scatter_row_dim(p, k);
      split(plan.threads, narrow_scatter_units(p, k, r), [&](int64_t lo, int64_t hi) {
        if (r > 0) {
          run_narrow_scatter_rows(p, k, r, stream, lo, hi);
        } else {
          run_narrow_scatter(p, k, stream, lo, hi);
        }
        if (stream) kernels::stream_fence();  // Note [streaming stores]
      });
      return;
    }
    case CopyWalk::kRows:
      break;
  }
  split(plan.threads, numel, [&](int64_t lo, int64_t hi) {
    run_rows(p, plan.kind, flags, stream, lo, hi);
    if (stream) kernels::stream_fence();
  });
}

}  // namespace ferry::cpu
