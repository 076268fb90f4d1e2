// The CPU copy engine's tuning constants, shared by plan_copy and run_copy (internal). Chosen by
// measurement with `ferry bench` (see docs/kernels.md); none of them affects results.
#pragma once

#include <cstdint>

namespace ferry::cpu::tuning {

// Bytes moved (read + written) per thread below which splitting across threads costs more
// than it saves (waking a pool thread costs tens of microseconds).
inline constexpr int64_t kMinBytesPerThread = int64_t{512} << 10;

// Store mode (docs/kernels.md, "Store mode"): a copy writes its output with non-temporal
// stores when the output one thread writes is at least a threshold, which depends on how the
// kernel writes:
// - sequential runs (memcpy, conversions, fills, gathers): glibc memcpy's rule, 3/4 of the
//   thread's share of the last-level cache, capped at kSequentialL2Multiple private L2s (a VM
//   may report the host's whole L3, shared with other tenants: this one reports 480 MiB, yet a
//   memcpy working set of 96 MiB already spills to DRAM);
// - scattered lines (transposes): 1/kScatteredL2Divisor of the private L2. Ordinary stores to
//   lines spread over many dst rows pay a read for ownership each, which no prefetcher
//   anticipates: from there on they are slower than streaming whole lines.
// FERRY_STREAM_THRESHOLD (bytes, optional K/M/G suffix, or "never") sets both.
inline constexpr int64_t kSequentialL2Multiple = 4;
inline constexpr int64_t kScatteredL2Divisor = 4;
inline constexpr int64_t kFallbackL2Bytes = int64_t{1} << 20;  // when sysconf reports no L2
inline constexpr int64_t kStreamNever = INT64_MAX;
// Outputs below this never stream, whatever the thresholds say (it spares small copies the
// look-up; streaming them would gain nothing).
inline constexpr int64_t kStreamMinBytes = int64_t{64} << 10;

struct StreamThresholds {
  int64_t sequential = kStreamNever;  // output bytes per thread
  int64_t scattered = kStreamNever;
};
// The thresholds of this machine (computed once; FERRY_STREAM_THRESHOLD read then).
const StreamThresholds& stream_thresholds();
// The rule itself, for the given cache sizes in bytes (0: not reported) and hardware threads.
StreamThresholds stream_thresholds_for(int64_t l2_bytes, int64_t llc_bytes, int64_t threads);
// FERRY_STREAM_THRESHOLD's syntax; raises ferry::Error on anything else.
int64_t parse_stream_threshold(const char* text);

// Both sides of a transpose must be at least this long for register tiles to pay off.
inline constexpr int64_t kMinTransposeSide = 8;

// Transpose blocks (elements along dst's contiguous dim i x along src's contiguous dim j). A block
// is one strip of rows tall: one streaming step of the tiles (transpose_stream_rows: a run of
// whole 64-byte lines per dst row, from at most 32 src rows, so that streaming stores never
// write partial lines), and kTransposeCols wide. Each row of the strip is then one sequential
// read stream, few enough for the L2 streamer. Transposes that convert after moving go through
// an L1 buffer of kTransposeBufferBytes, which bounds their blocks.
inline constexpr int64_t kTransposeCols = 256;
// Problems with fewer src-contiguous columns than kTransposeCols get blocks up to this many
// times taller instead, keeping the work per block.
inline constexpr int64_t kTransposeMaxRowScale = 8;
// Streaming transposes whose src rows are at most this far apart (and whole in a block)
// prefetch the next strip's rows.
inline constexpr int64_t kShortRowBytes = 1024;
inline constexpr int64_t kTransposeBufferBytes = int64_t{16} << 10;

// Note [transpose prefetch]
// A streaming transpose reads its strip's rows (up to 32) side by side, a line or two of each
// per step. On the AMD Zen 5 machine the benchmarks now run on, the hardware prefetchers do not
// keep that many streams fed from DRAM, least of all when the rows are a power of two apart
// (4096 x 4096: every row maps to the same cache sets and DRAM banks): the 4096 x 4096 float32
// transpose read its source at half the speed of a sequential read. Asking for each row's line
// kTransposePrefetchBytes ahead, into the L2, took it from 0.62x to 0.93x memcpy at one thread,
// permute(2, 1, 0) from 0.52x to 0.90x and NCHW -> NHWC from 0.62x to 0.97x. 4 lines ahead was
// the best of 3 to 8 (docs/kernels.md has the sweep).
inline constexpr int64_t kTransposePrefetchBytes = 256;

}  // namespace ferry::cpu::tuning
