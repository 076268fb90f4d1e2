// batched_copy: many dst.copy_(src) as one planned transfer, for Module::to, load_state_dict and
// Module::load. Small host-to-device copies from pageable memory are packed into one pinned
// staging buffer per device, moved with one copy, and scattered (converted where dtypes differ)
// by device-side copies on the same stream; every other pair is one non-blocking copy_. Nothing
// bypasses the copy engine: each step is a copy_, so the device copy policy, pinned-block events
// and stream ordering apply as for single copies. A blocking transfer synchronizes each stream
// it used once, at the end; a non-blocking one never waits for a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ferry/core/tensor.h"

namespace ferry::nn {

struct CopyPair {
  Tensor dst;
  Tensor src;
};

struct TransferOptions {
  // Host-to-device sources of at most this many bytes, in pageable memory, are packed.
  size_t small_tensor_bytes = size_t{1} << 20;
  // A packed batch holds at most this many bytes (a larger set becomes several batches).
  size_t max_batch_bytes = size_t{64} << 20;
};

// What a transfer did (for tests and the benchmark).
struct TransferReport {
  int64_t direct_copies = 0;   // pairs copied with their own copy_
  int64_t packed_tensors = 0;  // pairs that went through a packed batch
  int64_t batches = 0;         // packed batches (one host-to-device copy each)
  int64_t packed_bytes = 0;    // bytes those batches moved
  int64_t synchronizations = 0;
};

// Copies every pair (src broadcast to dst as copy_ does) with autograd off. With non_blocking,
// returns once every copy is queued; the destinations may be used on their device's current
// stream at once. Host destinations of a non-blocking device-to-host copy should be pinned (as
// Tensor::to makes them), or the runtime completes that copy before returning.
TransferReport batched_copy(const std::vector<CopyPair>& pairs, bool non_blocking,
                            const TransferOptions& options = {});

}  // namespace ferry::nn
