// batched_copy: many dst.copy_(src) as one planned transfer, for Module::to, load_state_dict and
// Module::load. Small host-to-device copies from pageable memory go through pinned staging
// buffers of at most max_batch_bytes: the CPU copy engine writes each source into a 64-byte
// aligned slot, the slots cross together with one copy and are scattered (converted where dtypes
// differ) by device-side copies; with stage_large_tensors, large pageable sources are staged too
// and copied from their slot straight into their destination, queued without waiting, so staging
// the next one overlaps that copy. Every other pair is one non-blocking copy_, so the device copy
// policy, pinned-block events and stream ordering apply as for single copies. A blocking transfer
// synchronizes each stream it used once, at the end; a non-blocking one never waits for a copy.
// batched_move, behind Module::to, makes the destinations too, so that its contiguous pageable
// sources are read in place by one batched copy per device (Backend::memcpy_batch_async; the
// bytes move once, as in one contiguous copy): the small ones land in one device block per batch,
// each destination a storage of its own aliasing its range of the block, and the large ones in
// allocations of their own.
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
  // batched_move only: whether small contiguous pageable sources going to a device land in one
  // device block per batch (each destination a storage aliasing its range of it), and, for a
  // blocking move, whether the contiguous pageable sources are read in place by one batched copy
  // per device (Backend::memcpy_batch_async), rather than staged (small) or copied one by one
  // (large) as batched_copy does. A non-blocking move stages its landing sources in pinned memory
  // instead: reading pageable memory would wait for the stream.
  bool land_in_place = true;
};

// A source to move: batched_move sets dst to a new tensor with src's values, dtype `options`'s
// dtype, on `options`'s device (pinned host memory if options asks for it).
struct MovePair {
  Tensor src;
  TensorOptions options;
  Tensor dst;
};

// What a transfer did (for tests and the benchmark).
struct TransferReport {
  int64_t direct_copies = 0;   // pairs copied with a copy_ of their own (from a slot or not)
  int64_t staged_tensors = 0;  // pageable host-to-device pairs that went through staging
  int64_t packed_tensors = 0;  // of those, the small ones that crossed in a packed copy
  int64_t batches = 0;         // staging buffers used
  int64_t packed_bytes = 0;    // bytes the packed copies moved
  int64_t synchronizations = 0;
  int64_t landed_tensors = 0;  // batched_move: destinations that alias a shared device block
  int64_t landed_blocks = 0;   // the device blocks they alias (one per staging batch)
  int64_t landing_copies = 0;  // batched copies into them from pinned staging (converted sources)
  int64_t batched_copies = 0;  // batched copies reading pageable sources in place (one per device)
  int64_t batched_ranges = 0;  // the sources they read
};

// Copies every pair (src broadcast to dst as copy_ does) with autograd off. With non_blocking,
// returns once every copy is queued; the destinations may be used on their device's current
// stream at once. Host destinations of a non-blocking device-to-host copy should be pinned (as
// Tensor::to makes them), or the runtime completes that copy before returning.
TransferReport batched_copy(const std::vector<CopyPair>& pairs, bool non_blocking,
                            const TransferOptions& options = {});

// Module::to's transfer: makes each move's destination and copies src into it, as batched_copy
// (same stream and non_blocking rules). With land_in_place and blocking, the contiguous pageable
// sources going to a device in their own dtype are read in place by ONE batched copy per device
// on its current stream, which returns once done (pageable memory); non-blocking, the small ones
// are written into pinned staging and cross with one batched copy that only enqueues. The small
// ones (and small ones being converted, always through staging) land in ONE device block per
// batch allocated on that stream, each destination a contiguous tensor over a storage of its own
// (memory::device_view_storage) that aliases its 256-byte aligned range of the block: no device
// allocation and no device-side copy per tensor. Each destination keeps its own version counter and
// may be replaced (set_data) or freed independently; the block is freed when the last of them is
// gone, and record_stream on any of them protects the whole block. Every other move gets its own
// empty_like destination and goes through batched_copy's paths (device-to-host and device-to-device
// moves always do).
TransferReport batched_move(std::vector<MovePair>& moves, bool non_blocking,
                            const TransferOptions& options = {});

}  // namespace ferry::nn
