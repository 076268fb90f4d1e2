// batched_copy: many dst.copy_(src) as one planned transfer, for Module::to, load_state_dict and
// Module::load. Small host-to-device copies from pageable memory go through pinned staging
// buffers of at most max_batch_bytes: the CPU copy engine writes each source into a 64-byte
// aligned slot, the slots cross together with one copy and are scattered (converted where dtypes
// differ) by device-side copies; with stage_large_tensors, large pageable sources are staged too
// and copied from their slot straight into their destination, queued without waiting, so staging
// the next one overlaps that copy. Every other pair is one non-blocking copy_. Nothing bypasses the
// copy engine: each step is a copy_, so the device copy policy, pinned-block events and stream
// ordering apply as for single copies. A blocking transfer synchronizes each stream it used once,
// at the end; a non-blocking one never waits for a copy.
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
  // Staged host-to-device sources of at most this many bytes are packed: they cross in their
  // batch's single copy and are scattered on the device; larger ones are copied from their slot.
  size_t small_tensor_bytes = size_t{1} << 20;
  // A staging buffer holds at most this many bytes (a larger set becomes several batches; a
  // single larger tensor gets a buffer of its own size).
  size_t max_batch_bytes = size_t{64} << 20;
  // Whether pageable sources above small_tensor_bytes are staged too (copied from their slot)
  // rather than copied directly. Off by default: a direct pageable copy moves the bytes once on the
  // sim devices (the runtime reads pageable memory itself) where staging moves them twice, and
  // bench-load measured it faster there. A driver that stages pageable copies internally (CUDA)
  // may prefer it on: it overlaps the staging with the link and saves one wait per tensor.
  bool stage_large_tensors = false;
};

// What a transfer did (for tests and the benchmark).
struct TransferReport {
  int64_t direct_copies = 0;   // pairs copied with a copy_ of their own (from a slot or not)
  int64_t staged_tensors = 0;  // pageable host-to-device pairs that went through staging
  int64_t packed_tensors = 0;  // of those, the small ones that crossed in a packed copy
  int64_t batches = 0;         // staging buffers used
  int64_t packed_bytes = 0;    // bytes the packed copies moved
  int64_t synchronizations = 0;
};

// Copies every pair (src broadcast to dst as copy_ does) with autograd off. With non_blocking,
// returns once every copy is queued; the destinations may be used on their device's current
// stream at once. Host destinations of a non-blocking device-to-host copy should be pinned (as
// Tensor::to makes them), or the runtime completes that copy before returning.
TransferReport batched_copy(const std::vector<CopyPair>& pairs, bool non_blocking,
                            const TransferOptions& options = {});

}  // namespace ferry::nn
