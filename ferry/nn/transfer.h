// batched_copy: many dst.copy_(src) as one planned transfer, for Module::to, load_state_dict and
// Module::load. Small host-to-device copies from pageable memory go through pinned staging
// buffers of at most max_batch_bytes: the CPU copy engine writes each source into a 64-byte
// aligned slot, the slots cross together with one copy and are scattered (converted where dtypes
// differ) by device-side copies; with stage_large_tensors, large pageable sources are staged too
// and copied from their slot straight into their destination, queued without waiting, so staging
// the next one overlaps that copy. Every other pair is one non-blocking copy_. Nothing bypasses the
// copy engine: each step is a copy_, so the device copy policy, pinned-block events and stream
// ordering apply as for single copies. A blocking transfer synchronizes each stream it used once,
// at the end; a non-blocking one never waits for a copy. batched_move, behind Module::to, makes
// the destinations too, so that small pageable sources can land in place: one device block per
// staging batch, each destination a storage of its own aliasing its range of the block.
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
  // batched_move only: whether small, contiguous pageable sources going to a device land in place
  // (one device block for their batch, each destination a storage aliasing its range of it)
  // rather than each in a device allocation of its own filled by a device-side copy.
  bool land_in_place = true;
  // A landing batch's staged bytes are queued for its block in copies of about this many bytes,
  // each as soon as it is staged, so that staging the rest overlaps them.
  size_t landing_chunk_bytes = size_t{8} << 20;
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
  int64_t landing_copies = 0;  // host-to-device copies that filled them (landing_chunk_bytes)
};

// Copies every pair (src broadcast to dst as copy_ does) with autograd off. With non_blocking,
// returns once every copy is queued; the destinations may be used on their device's current
// stream at once. Host destinations of a non-blocking device-to-host copy should be pinned (as
// Tensor::to makes them), or the runtime completes that copy before returning.
TransferReport batched_copy(const std::vector<CopyPair>& pairs, bool non_blocking,
                            const TransferOptions& options = {});

// Module::to's transfer: makes each move's destination and copies src into it, as batched_copy
// (same stream and non_blocking rules). With land_in_place, the small contiguous pageable sources
// going to a device are packed into pinned staging as batched_copy packs them, the packed bytes
// cross with one copy_ into ONE device block allocated on the device's current stream, and each
// destination is a contiguous tensor over a storage of its own (memory::device_view_storage) that
// aliases its 256-byte aligned range of the block: no device allocation and no device-side copy
// per tensor. Each destination keeps its own version counter and may be replaced (set_data) or
// freed independently; the block is freed when the last of them is gone, and record_stream on any
// of them protects the whole block. Every other move gets its own empty_like destination and goes
// through batched_copy's paths (device-to-host and device-to-device moves always do).
TransferReport batched_move(std::vector<MovePair>& moves, bool non_blocking,
                            const TransferOptions& options = {});

}  // namespace ferry::nn
