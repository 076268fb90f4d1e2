// The CPU copy engine's tuning constants, shared by plan_copy and run_copy (internal). Chosen by
// measurement with `ferry bench` (see docs/kernels.md); none of them affects results.
#pragma once

#include <cstdint>

namespace ferry::cpu::tuning {

// Bytes moved (read + written) per thread below which splitting across threads costs more
// than it saves (waking a pool thread costs tens of microseconds).
inline constexpr int64_t kMinBytesPerThread = int64_t{512} << 10;

// Outputs at least this large are written with non-temporal stores, which skip reading the
// destination lines into the cache first: they would be evicted before reuse anyway.
inline constexpr int64_t kStreamMinBytes = int64_t{8} << 20;

// Both sides of a transpose must be at least this long for register tiles to pay off.
inline constexpr int64_t kMinTransposeSide = 8;

// Transpose blocks (elements along dst's contiguous dim i x along src's contiguous dim j). A block
// is one strip of rows tall: the fewest rows that give each dst row whole 64-byte lines (so that
// streaming stores never write partial lines), and kTransposeCols wide. Each row of the strip is
// then one sequential read stream, few enough for the prefetchers. Transposes that convert
// after moving go through an L1 buffer of kTransposeBufferBytes, which bounds their blocks.
inline constexpr int64_t kTransposeCols = 256;
inline constexpr int64_t kTransposeBufferBytes = int64_t{16} << 10;

}  // namespace ferry::cpu::tuning
