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
// A transpose's block writes each dst row a run of at most dim 0's elements. Runs of two lines
// or more: streaming stores pay off (plan_copy), and the blocks of a many-dim permutation follow
// src rather than dst (Note [transpose outer order] in copy_run.cc). Below: neither.
inline constexpr int64_t kTransposeMinStreamRunBytes = 128;

// Bytes after which addresses fall on the same private-L2 sets again (its size / associativity:
// 64 KiB on Zen 5, 128 KiB on Sapphire Rapids), from sysconf once; kFallbackL2SetSpan when it
// does not say. Lines a multiple of it apart compete for the same few ways.
int64_t l2_set_span();
int64_t l2_set_span_for(int64_t l2_bytes, int64_t l2_ways);
inline constexpr int64_t kFallbackL2SetSpan = int64_t{64} << 10;

// Note [transpose prefetch]
// A streaming transpose reads its strip's rows (up to 32) side by side, a line or two of each
// per step. On the AMD Zen 5 machine the benchmarks now run on, the hardware prefetchers do not
// keep that many streams fed from DRAM, least of all when the rows are a power of two apart
// (4096 x 4096: every row's line at a column maps to the same L1 set): the 4096 x 4096 float32
// transpose read its source at half the speed of a sequential read. Asking for each row's line
// kTransposePrefetchBytes ahead, into the L2, took it from 0.62x to 0.93x memcpy at one thread,
// permute(2, 1, 0) from 0.52x to 0.90x and NCHW -> NHWC from 0.62x to 0.97x. 4 lines ahead was
// the best of 3 to 8 (docs/kernels.md has the sweep).
inline constexpr int64_t kTransposePrefetchBytes = 256;

// Note [transpose read-ahead]
// The prefetch above asks for each row's lines a few steps ahead, so each strip starts cold and
// its first lines come from DRAM at the pace of its side-by-side rows. Streaming strips of long
// src rows therefore also ask, spread evenly over the strip's steps, for the whole of the strip
// the thread reads next (its next unit: the next row block, or the same rows of the next outer
// index), row after row in address order, the order DRAM and the L2 streamer serve best. NCHW ->
// NHWC (32 x 64 x 56 x 56 float32) went from 0.87x to 0.94x-1.02x memcpy at one thread and from
// 0.89x to 0.96x at two; permute(2, 1, 0) of 256^3 from 0.82x to 0.88x-0.91x and 0.90x to 0.95x
// (`ferry bench`, alternating runs). Not when the next strip starts a multiple of the L2 set span
// (l2_set_span) away from this one: its lines then fall on the sets this strip is using, which
// rows a power of two apart already fill (4096 x 4096: the next strip is 512 KiB on), and reading
// ahead there cost 5-8% at one thread.

// Note [transpose passes]
// With 16-bit (and 8-bit) dst elements, a strip of 32 src rows gives each dst row a single
// 64-byte line, and single streamed lines scattered over dst rows are the slowest write pattern
// on both development machines (on the Zen 5 one the 4096 x 4096 bfloat16 transpose wrote at
// 13 GB/s that way, half its read speed). 64 src rows read side by side are too many streams.
// So such strips are 64 rows read in two passes of 32: the first fills the first line of each
// dst row's run in an L1 scratch, the second the second, kTransposeChunkCols columns at a time;
// the finished runs (two lines each) stream out while the next chunk is read. That took the
// bfloat16 transpose from 0.50x to 0.81x memcpy at one thread. 64 columns was the best of 32 to
// 256: longer chunks leave the scratch to the L2 and the streaming stores in bursts (streaming
// a whole 128-column chunk at once, rather than a few runs per step, was slower than no passes).
// Each row is then read a chunk at a time, so its lines are prefetched one chunk ahead, its next
// visit: 128 bytes for bfloat16 (0.84x against 0.82x at 256, four runs each), 256 for float32.
inline constexpr int64_t kTransposeChunkCols = 64;

// Note [transpose panels]
// Streaming stores must write whole lines, and the strips above give each dst row a run that
// starts and ends where the strip does. When dst rows do not start on a line boundary (a row
// stride that is not a multiple of 64 bytes, as 3000 float32 elements; or dst itself off its
// line), those runs start and end mid-line in most rows. Those partial lines took ordinary
// stores, and the line's other half came from the next strip, long after the line had left the
// caches: each was read from memory, then written twice (3000 x 3000 float32 at 0.44x memcpy).
// Such transposes stream by panels instead: kTransposePanelSrcBytes of each src row (at most
// kTransposePanelMaxCols columns), read row after row down the whole block (kTransposePanelRows
// rows), in steps that give each dst row a 128-byte run. Each dst row of the panel is then
// written front to back: a step streams the whole lines it completes and carries the row's
// partial last line, in an L1 scratch, to the next step. Only a row's first and last line in
// each block take ordinary stores. That took 3000 x 3000 float32 from 3.7 to 2.4 ms at one
// thread, float32 -> bfloat16 from 2.9 to 1.7 ms (docs/kernels.md, "Panels"). Reading 256 bytes
// of each row was better than 128, 512 no better. Asking for each row's lines 16 rows ahead beat
// 32, 64 and 128 in `ferry bench` (transpose2d_f32_to_bf16_3000: 0.63x memcpy against 0.57x at 32;
// 0.60x without). Blocks of 256 rows were worse than 1024 (more partial lines), longer ones no
// better. On line-aligned rows the strips stay: the panels' row-after-row reads are slow when
// rows are a power of two apart (4096 x 4096 float32: 25 GB/s against 42).
inline constexpr int64_t kTransposePanelSrcBytes = 256;
inline constexpr int64_t kTransposePanelMaxCols = 128;
inline constexpr int64_t kTransposePanelAheadRows = 16;
inline constexpr int64_t kTransposePanelRows = 1024;

// Line-staged transposes (Note [line-staged transposes] in copy_run.cc): each side's runs grow to
// at least these bytes by taking more of the dim that continues them, while the block fits
// kStagedBlockBytes (two such buffers, in the L2).
inline constexpr int64_t kStagedDstRunBytes = 128;
inline constexpr int64_t kStagedSrcRunBytes = 256;
inline constexpr int64_t kStagedBlockBytes = int64_t{32} << 10;

}  // namespace ferry::cpu::tuning
