// The CPU copy engine's contract: a coalesced copy problem (what the TensorIterator leaves of
// dst.copy_(src)), the plan chosen for it, and the function that runs it. The same entry
// points serve the CPU copy_stub kernel and, later, device backends that run CPU kernels on
// host-visible mappings (the sim device's stream workers).
#pragma once

#include <cstdint>
#include <string>

#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"
#include "ferry/iter/copy_problem.h"

namespace ferry::cpu {
namespace kernels {
enum class TransposeOp : int8_t;  // copy_kernels.h
struct ConjNeg;
}  // namespace kernels

// The problem is ferry::CopyProblem (ferry/iter/copy_problem.h), the one every copy kernel
// takes; here it is used on host memory.
using ferry::CopyProblem;

enum class CopyKernelKind : int8_t {
  Memcpy,     // dense, same dtype, no conj/neg: memcpy, split across threads when large
  Convert,    // dense, converting and/or conj/neg: vectorized conversion
  Broadcast,  // src stride 0 along dst's fastest dim: convert once, fill the run
  Transpose,  // dst's and src's fastest dims differ: blocked, in-register tile transposes
  Gather,     // dst dense along dim 0, src strided along it: vectorized gather/compaction
  Strided,    // anything else: strided loops
};

const char* copy_kernel_name(CopyKernelKind kind);

// How a transpose converts (docs/kernels.md, "Transposes"), chosen from the dtypes and conj/neg
// bits alone, the same way by plan_copy and run_copy:
// - kFused: the tiles convert on the way (same dtype, or float32 <-> bfloat16/half), no conj/neg;
// - kConvertFirst: rows of src are converted into an L1 buffer in dst's dtype, conj/neg applied
//   there, then tiles of dst's element size move the buffer to dst (so conj/neg need no second
//   pass over dst, and the output may stream);
// - kMoveFirst: tiles of src's element size move src into the buffer, whose rows are then
//   converted into dst (dst's element size has no tiles: 16-byte complex);
// - kStrided: no tiles for either size on this target: strided runs through the buffer.
enum class TransposeRoute : int8_t { kFused, kConvertFirst, kMoveFirst, kStrided };
const char* transpose_route_name(TransposeRoute route);
TransposeRoute transpose_route(const CopyProblem& problem);
// Whether the route's tiles store to dst (fused, or moving what was converted first), and so
// may stream by strips or panels; else they store to the buffer.
inline bool tiles_store_to_dst(TransposeRoute route) {
  return route == TransposeRoute::kFused || route == TransposeRoute::kConvertFirst;
}
// Whether a kernel can stream its output with these conj/neg bits (they are applied in place
// after the conversion, except by transposes that convert first, in their buffer).
bool stream_allows(CopyKernelKind kind, TransposeRoute route, kernels::ConjNeg flags);
// The tile op of a route: the fused conversion, or a move of dst's (converted first) or src's
// elements.
kernels::TransposeOp transpose_tile_op(const CopyProblem& problem, TransposeRoute route);

// A narrow transpose whose rows share the L2's sets goes block by block through two buffers,
// each block widened to whole lines on both sides (Note [line-staged transposes] in
// copy_run.cc): row_dim continues dst's runs past dim 0 and col_dim src's past src_fast_dim (-1:
// none; the same dim when `shared`), and a block takes row_n and col_n of them.
struct TransposeStaging {
  int row_dim = -1, col_dim = -1;
  int64_t row_n = 1, col_n = 1;
  bool shared = false;
  bool active() const { return row_n > 1 || col_n > 1; }
};
TransposeStaging transpose_staging(const CopyProblem& problem, int src_fast_dim);
// The half tiles' edge for a transpose whose whole tiles leave rows (or, under a whole tile,
// columns) that half tiles would take (Note [half tiles] in copy_planner.cc); else 0.
int64_t transpose_half_tile_for(const CopyProblem& problem, int src_fast_dim);

struct CopyPlan {
  CopyKernelKind kind = CopyKernelKind::Strided;
  // Transpose: the dim along which src is unit-stride (dst is unit-stride along dim 0).
  int src_fast_dim = -1;
  // Transpose: the cache block (elements along dim 0 x along src_fast_dim) and the register
  // tile; 0 where not applicable.
  int64_t block_rows = 0;
  int64_t block_cols = 0;
  int64_t tile_rows = 0;
  int64_t tile_cols = 0;
  // Transpose: how it converts.
  TransposeRoute route = TransposeRoute::kFused;
  // Transpose with streaming stores, dst rows off their 64-byte lines: the tiles stream by
  // panels, each dst row front to back (docs/kernels.md, "Transposes"), not by strips.
  bool panel = false;
  // Transpose: the tiles convert float32 to bfloat16 with the CPU's own instruction
  // (AVX512_BF16; simd.h, native_bf16), to the same bits as the portable rounding.
  bool native_bf16 = false;
  // Transpose: block by block through buffers (transpose_staging); its stores are whole lines.
  bool staged = false;
  // Transpose: the edge of the tiles of half the width that take the rows the whole tiles leave
  // (transpose_half_tile_for; Note [half tiles] in copy_planner.cc); 0: none.
  int64_t half_tile = 0;
  // Chunks the work is split into (1: runs on the calling thread).
  int threads = 1;
  // Non-temporal (streaming) stores for the output, chosen from its size per thread and the
  // cache sizes detected at run time (docs/kernels.md, "Store mode"). Either value gives the
  // same result; run_copy ignores it when conj/neg must be applied after the conversion.
  bool stream = false;
  // The SIMD target the kernels run on (e.g. "AVX3", "AVX2", "EMU128").
  const char* simd_target = "";

  // One line for `ferry explain`.
  std::string describe() const;
};

// Whether dst's rows (its runs along dim 0) all start on a 64-byte line: dst itself and every
// other dim's stride are multiples of 64 bytes.
bool dst_rows_on_lines(const CopyProblem& problem);

// Chooses the kernel; cheap enough to call on every copy (no allocation).
CopyPlan plan_copy(const CopyProblem& problem);

// How run_copy walks a plan that is not a Transpose. It is decided from the problem when the
// copy runs, by copy_walk, which `ferry explain` calls too.
enum class CopyWalk : int8_t {
  kRows,            // dim-0 runs, one kernel call each (tight loops for short runs)
  kShortRunBlocks,  // Memcpy of short runs, a block of them per src row (Note [short-run blocks])
  kNarrowGather,    // Gather into 2-7 packed planes: SIMD interleave (Note [narrow gathers])
  kNarrowScatter,   // Gather from 2-4 packed planes: SIMD deinterleave (Note [narrow scatters])
};
CopyWalk copy_walk(const CopyProblem& problem, const CopyPlan& plan);
// One line for `ferry explain`: the walk, with the planes it interleaves or deinterleaves.
std::string describe_walk(const CopyProblem& problem, const CopyPlan& plan);

// Runs `plan` on `problem`. Splits across ferry's thread pool when plan.threads > 1.
void run_copy(const CopyProblem& problem, const CopyPlan& plan);

// plan_copy + run_copy.
inline void copy(const CopyProblem& problem) { run_copy(problem, plan_copy(problem)); }

}  // namespace ferry::cpu
