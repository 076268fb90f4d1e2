// FixedRangeResource: a MemoryResource that serves every allocation from one fixed byte range of
// one device and never asks anyone for more. The range is either adopted (memory the resource
// does not own, such as a region imported from another process: never freed) or taken from an
// upstream resource in one allocation and given back when the resource is destroyed (RMM's
// adaptor pattern). Shared sub-regions (shared_region.h) are fixed ranges over an adopted region.
// Guarantees: best fit; a remainder of at least 512 bytes is split off; free neighbours merge; a
// full range raises OutOfMemoryError naming the range, the request and what is free (it never
// falls back to other memory); stream-ordered reuse as the caching allocator's contract says
// (caching_allocator.h), extended to many streams over one range (see below). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/backend.h"
#include "ferry/device/stream.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/memory/stats.h"
#include "ferry/memory/stream_event_queues.h"

namespace ferry::memory {

// What a fixed range holds now. Byte counts are block sizes (requests rounded up to 512 bytes).
struct FixedRangeStats {
  size_t size = 0;        // the range
  Stat allocation;        // live allocations
  Stat allocated_bytes;   // their bytes
  Stat active_bytes;      // allocated, plus freed blocks still waiting for recorded streams
  size_t free_bytes = 0;  // in free blocks (reusable now or after a stream synchronization)
  size_t largest_free_block = 0;
  int64_t num_ooms = 0;  // OutOfMemoryErrors raised
  // Events that could not be recorded when a record_stream'ed block was freed; the block then
  // waited for the whole stream instead (as in the caching allocator's Stats).
  int64_t num_event_record_failures = 0;
};

// Stream ordering over one range. A free block either is idle (no queued work uses it) or
// belongs to the stream whose queued work may still use it:
// - an allocation on stream S takes the best fit among the idle blocks and S's own blocks, with
//   no host synchronization (S's order makes reusing S's blocks safe);
// - a block freed on its allocation stream S becomes S's; one that was record_stream'ed on other
//   streams (or deallocated on another stream) waits for an event on each of them first, and
//   then becomes S's;
// - when nothing fits, the resource waits (with its lock released) for the pending recorded
//   streams, then for the streams that own free blocks (an event recorded on each now), makes
//   those blocks idle, merges them and retries (up to kReclaimRounds times, as other threads
//   may free blocks meanwhile); only then does it raise OutOfMemoryError;
// - a free merges neighbours unless they belong to two different streams (an idle block merges
//   with anything, and the result belongs to the other block's stream, if any); a reclaim for
//   stream S merges blocks with the same owner and idle blocks with S's, never an idle block
//   into another stream's, so the blocks it made idle stay usable by S's retry.
// The range's first block is idle for an adopted range (its owner orders its use, as the memory
// came from outside), and belongs to the upstream allocation's stream for an upstream range.
class FixedRangeResource final : public MemoryResource {
 public:
  // Adopts [base, base + size) of `device`: base aligned to 512 bytes, size a positive multiple
  // of 512. The resource never frees it; the caller keeps it valid until the resource is
  // destroyed. `name` appears in errors ("sub-region 'parameters' of region 'model'").
  FixedRangeResource(Device device, void* base, size_t size, std::string name);
  // Takes `size` bytes (rounded up to 512) from `upstream` on `stream`, in one allocation, and
  // gives them back on `stream` when destroyed, after ordering `stream` after every stream that
  // used the range. `upstream` must outlive this resource (the shared_ptr form keeps it alive).
  FixedRangeResource(MemoryResource* upstream, size_t size, const Stream& stream, std::string name);
  FixedRangeResource(std::shared_ptr<MemoryResource> upstream, size_t size, const Stream& stream,
                     std::string name);
  // With allocations still live (a contract violation) the range is not given back to the
  // upstream: it is reported on stderr and leaked rather than reused under live tensors.
  ~FixedRangeResource() override;

  Device device() const { return device_; }
  void* base() const { return base_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Whether the range came from an upstream resource (and goes back to it).
  bool has_upstream() const { return upstream_ != nullptr; }

  FixedRangeStats stats() const;
  // The blocks in address order (one snapshot segment).
  std::vector<BlockInfo> blocks() const;
  // Raises ferry::Error describing the first violated invariant: the blocks tile the range, free
  // blocks are in the free set and not mergeable with a free neighbour, the allocated table
  // holds exactly the allocated blocks, awaiting blocks have pending entries, stats add up.
  void check_invariants() const;
  // Waits (lock released) until every recorded-stream entry pending now is complete; raises the
  // backend's error (DeviceError) if a wait fails, after marking what did complete.
  void synchronize_pending();

  // All or nothing, for an owner retiring ranges (drop_sub_regions): waits for the pending
  // entries of every range, then, if no block of any of them is allocated, closes them all (a
  // closed range raises ferry::Error on allocate); otherwise raises ferry::Error starting with
  // `what`, listing every live block (address, size, range), and closes none.
  static void close_all(const std::vector<FixedRangeResource*>& ranges, const std::string& what);
  bool closed() const;

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;  // while allocated
    // Allocated or awaiting: the allocation's stream. Free: the stream whose queued work may
    // still use it, or kIdle.
    StreamId owner = 0;
    Block* prev = nullptr;
    Block* next = nullptr;
    BlockState state = BlockState::kFree;
    int event_count = 0;       // pending entries while kAwaitingEvents
    uint64_t free_tick = 0;    // when it last became free or changed owner
    std::vector<Stream> uses;  // record_stream'ed streams other than `owner`, while allocated
  };
  static constexpr StreamId kIdle = -1;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Lock = std::unique_lock<std::mutex>;

  void* do_allocate(size_t bytes, const Stream& stream) override;
  void do_deallocate(void* ptr, size_t bytes, const Stream& stream) override;
  bool do_record_stream(void* ptr, const Stream& allocation_stream, const Stream& stream) override;

  void init_range(StreamId first_owner);
  Block* find_free(StreamId stream, size_t size);
  Block* hand_out(Block* block, size_t size, size_t requested, StreamId stream);
  void free_block(Block* block, StreamId owner);
  void insert_free(Block* block);
  void note_stream(const Stream& stream);
  // fixed_range_events.cc
  void insert_events(Block* block);
  void process_events();
  void synchronize_pending_locked(Lock& lock);
  // Makes idle the free blocks that belong to streams other than `stream`, after waiting for
  // those streams; false when there were none. Blocks freed while it waits stay their streams'.
  bool reclaim_other_streams(Lock& lock, StreamId stream);
  // How many times an allocation reclaims other streams' blocks before it reports out of memory.
  static constexpr int kReclaimRounds = 32;
  std::string oom_message(size_t requested, const Stream& stream) const;
  void check_invariants_locked() const;

  const Device device_;
  char* base_ = nullptr;
  size_t size_ = 0;
  const std::string name_;
  std::shared_ptr<MemoryResource> upstream_owned_;
  MemoryResource* upstream_ = nullptr;
  Stream upstream_stream_;

  mutable std::mutex mutex_;
  Block* head_ = nullptr;
  std::set<Block*, BlockOrder> free_;
  std::unordered_map<void*, Block*> allocated_;
  detail::StreamEventQueues<Block> pending_;  // record_stream'ed streams freed blocks wait for
  uint64_t tick_ = 0;
  std::vector<Stream> streams_seen_;  // every stream that allocated, freed or recorded a block
  Stat allocation_;
  Stat allocated_bytes_;
  Stat active_bytes_;
  int64_t num_ooms_ = 0;
  int64_t num_event_record_failures_ = 0;
  bool closed_ = false;
};

}  // namespace ferry::memory
