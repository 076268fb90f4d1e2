// The pinned host allocator: caches page-locked host blocks (the device backend's malloc_host), in
// power-of-two size classes below 1 MiB and in exact, page-rounded sizes from 1 MiB up, for
// `pinned_memory` tensors, Tensor::pin_memory() and staging buffers.
// Invariants: a block is handed out to one storage at a time; a block freed after
// pinned_record_event is reused only once the work queued on each recorded stream before the
// free is done (for events recorded through a view storage too); cached blocks go back to the
// backend only in pinned_empty_cache, after the release hooks have heard of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "ferry/core/storage.h"
#include "ferry/device/stream.h"
#include "ferry/memory/stats.h"

namespace ferry::memory {

struct PinnedStats {
  Stat allocation;       // blocks handed out
  Stat allocated_bytes;  // their (size-class or page-rounded) bytes
  Stat requested_bytes;  // the bytes asked for
  // Of those, the large blocks (requests of at least kPinnedLargeRequest): exact, page-rounded
  // sizes rather than powers of two, so large_allocated_bytes - large_requested_bytes stays below
  // a page per block plus the reuse slack (see pinned_size_class).
  Stat large_allocation;
  Stat large_allocated_bytes;
  Stat large_requested_bytes;
  Stat segment;                // blocks held from the backend, handed out or cached
  Stat reserved_bytes;         // their bytes
  int64_t num_cache_hits = 0;  // allocations served from the cache
  int64_t num_host_alloc = 0;  // backend malloc_host calls that succeeded
  int64_t num_host_free = 0;   // backend free_host calls
  int64_t pending_events = 0;  // entries made at free (one per stream) not yet seen complete
  // Events that could not be recorded at free; the block then waited for the stream to be idle.
  int64_t num_event_record_failures = 0;
};

// Requests of at least this many bytes get a block of their own size rounded up to whole pages
// instead of the next power of two (which wastes up to half of a gigabyte weight buffer).
inline constexpr size_t kPinnedLargeRequest = size_t{1} << 20;

// The block size a new block for a request gets: below kPinnedLargeRequest the next power of
// two, at least 512 bytes; from kPinnedLargeRequest up the request rounded up to the page size.
// A cached large block is reused for a later large request when it is at least the request's
// rounded size and at most 1/8 larger (so a block never wastes more than 1/9 of itself).
size_t pinned_size_class(size_t nbytes);

// The allocator behind pinned host tensors (installed with set_pinned_host_allocator when the
// library loads). Memory comes from the first of the CUDA and sim backends that has a device;
// it raises DeviceError when neither has one.
Allocator* pinned_host_allocator();

// After an asynchronous copy from or to `host_storage` on `stream`: if the storage is a block of
// the pinned allocator, keeps it from being reused until the work queued on `stream` when the
// storage is freed is done, and returns true; otherwise does nothing and returns false. A CPU
// stream needs no recording (true for a pinned block).
bool pinned_record_event(const Storage& host_storage, const Stream& stream);
// The same by address: `ptr` must be the start of a live pinned block to return true. Safe
// against concurrent frees, reuse and pinned_empty_cache: the block is looked up and recorded in
// one step, so the call records on whatever block is live at `ptr` at that moment, or on none.
bool pinned_record_event(const void* ptr, const Stream& stream);

// A storage of its own (own version counter, own nbytes) for the bytes [offset, offset + nbytes)
// of `storage`, which must be a pinned block or such a view; it keeps the block alive, and
// pinned_record_event / record_stream on it record on the whole block. What a file loaded into one
// pinned block hands out per tensor, so that each tensor is an independent object whose
// asynchronous copies still protect the block.
Storage pinned_view_storage(const Storage& storage, size_t offset, size_t nbytes);

// The pinned block holding `storage`'s bytes (the storage's own block, or the block a view
// storage was cut from): its start and size. Nothing for a storage of another allocator.
struct PinnedBlockRange {
  void* ptr = nullptr;
  size_t size = 0;
};
std::optional<PinnedBlockRange> pinned_block_of(const Storage& storage);

// Hooks told of each block just before pinned_empty_cache hands it back to the backend (called
// without the allocator's lock, one block at a time), for caches keyed by block such as the
// transport's memory registrations. remove_pinned_release_hook returns once no call of that hook
// is running; it must not be called from a hook, nor while holding a lock a hook takes.
using PinnedReleaseHook = std::function<void(const PinnedBlockRange& block)>;
uint64_t add_pinned_release_hook(PinnedReleaseHook hook);
void remove_pinned_release_hook(uint64_t id);

PinnedStats pinned_stats();
void pinned_reset_peak_stats();
// Returns every cached (free, event-free) block to the backend.
void pinned_empty_cache();

}  // namespace ferry::memory
