// FixedRangeResource: construction over an adopted or an upstream range, allocation (best fit on
// the stream's own and idle blocks, split), free (merge), the out-of-memory error, stats and the
// all-or-nothing close. Recorded-stream events and reclaiming other streams' free blocks are in
// fixed_range_events.cc, the invariant check in fixed_range_debug.cc.
#include "ferry/memory/fixed_range_resource.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/device_allocator.h"

namespace ferry::memory {
namespace {

size_t round_to_min_block(size_t bytes) {
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// Two free neighbours may merge unless they belong to two different streams.
bool mergeable(StreamId a, StreamId b, StreamId idle) { return a == b || a == idle || b == idle; }

}  // namespace

bool FixedRangeResource::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->owner != b->owner) return a->owner < b->owner;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

FixedRangeResource::FixedRangeResource(Device device, void* base, size_t size, std::string name)
    : device_(device), base_(static_cast<char*>(base)), size_(size), name_(std::move(name)) {
  FERRY_CHECK_AS(DeviceError, !device.is_cpu() && device.has_index(), "FixedRangeResource(", name_,
                 "): expected a sim or cuda device with an index, but got ", device);
  FERRY_CHECK(base != nullptr && reinterpret_cast<uintptr_t>(base) % kMinBlockSize == 0,
              "FixedRangeResource(", name_, "): expected a base address aligned to ", kMinBlockSize,
              " bytes, but got ", base);
  FERRY_CHECK(size > 0 && size % kMinBlockSize == 0 &&
                  reinterpret_cast<uintptr_t>(base) <= UINTPTR_MAX - size,
              "FixedRangeResource(", name_, "): expected a positive size that is a multiple of ",
              kMinBlockSize, " bytes and fits after ", base, ", but got ", size);
  init_range(kIdle);
}

FixedRangeResource::FixedRangeResource(MemoryResource* upstream, size_t size, const Stream& stream,
                                       std::string name)
    : device_(stream.device()), name_(std::move(name)), upstream_stream_(stream) {
  FERRY_CHECK(upstream != nullptr, "FixedRangeResource(", name_,
              "): expected an upstream resource, but got none");
  FERRY_CHECK_AS(DeviceError, !stream.is_cpu(), "FixedRangeResource(", name_,
                 "): expected a device stream for the upstream allocation, but got ", stream);
  FERRY_CHECK(size > 0 && size <= SIZE_MAX - kMinBlockSize, "FixedRangeResource(", name_,
              "): expected a positive size, but got ", size);
  size_ = round_to_min_block(size);
  base_ = static_cast<char*>(upstream->allocate(size_, stream));
  upstream_ = upstream;
  init_range(stream.id());
  note_stream(stream);
}

FixedRangeResource::FixedRangeResource(std::shared_ptr<MemoryResource> upstream, size_t size,
                                       const Stream& stream, std::string name)
    : FixedRangeResource(upstream.get(), size, stream, std::move(name)) {
  upstream_owned_ = std::move(upstream);
}

void FixedRangeResource::init_range(StreamId first_owner) {
  head_ = new Block();
  head_->ptr = base_;
  head_->size = size_;
  head_->owner = first_owner;
  head_->free_tick = ++tick_;
  free_.insert(head_);
}

FixedRangeResource::~FixedRangeResource() {
  bool live = false;
  {
    // Nobody else can reach the resource now; the lock only keeps the analysis tools content.
    Lock lock(mutex_);
    live = !allocated_.empty();
    if (live) {
      std::fprintf(stderr,
                   "ferry: fixed range %s destroyed with %zu allocations still live; its %zu "
                   "bytes are not returned to their upstream\n",
                   name_.c_str(), allocated_.size(), size_);
    }
    // Entries still pending need no wait here: an upstream range orders its stream after every
    // stream that used it below, and an adopted range's owner orders its own reuse.
    pending_.release_events();
    for (Block* b = head_; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
  if (upstream_ == nullptr || live) return;
  try {
    // Whatever any stream queued on the range is done before the upstream reuses it.
    for (const Stream& s : streams_seen_) {
      if (s != upstream_stream_) wait_stream(upstream_stream_, s);
    }
    upstream_->deallocate(base_, size_, upstream_stream_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: failed to return fixed range %s to its upstream: %s\n",
                 name_.c_str(), e.what());
  }
}

// ---- allocation ------------------------------------------------------------------------------

void* FixedRangeResource::do_allocate(size_t bytes, const Stream& stream) {
  FERRY_CHECK_AS(DeviceError, stream.device() == device_, name_, ": expected a stream on ", device_,
                 " (the range's device), but got ", stream);
  const StreamId id = stream.id();
  Lock lock(mutex_);
  const auto check_open = [&] {
    FERRY_CHECK(!closed_, name_, ": expected an open range to allocate ", bytes,
                " bytes from, but it was closed (dropped)");
  };
  check_open();
  if (!pending_.empty()) process_events();
  if (bytes > size_) {
    ++num_ooms_;
    FERRY_FAIL_AS(OutOfMemoryError, oom_message(bytes, stream));
  }
  const size_t size = round_to_min_block(bytes);
  Block* block = find_free(id, size);
  if (block == nullptr && !pending_.empty()) {
    synchronize_pending_locked(lock);
    check_open();
    block = find_free(id, size);
  }
  // Free blocks of other streams: wait for those streams and make the blocks idle. Blocks that
  // other threads free while this one waits (unlocked) belong to their streams again, so take a
  // few rounds before giving up.
  for (int round = 0; block == nullptr && round < kReclaimRounds; ++round) {
    if (!reclaim_other_streams(lock, id)) break;
    check_open();
    block = find_free(id, size);
  }
  if (block == nullptr) {
    ++num_ooms_;
    FERRY_FAIL_AS(OutOfMemoryError, oom_message(bytes, stream));
  }
  note_stream(stream);
  return hand_out(block, size, bytes, id)->ptr;
}

FixedRangeResource::Block* FixedRangeResource::find_free(StreamId stream, size_t size) {
  Block probe;
  probe.size = size;
  probe.ptr = nullptr;
  Block* best = nullptr;
  for (const StreamId owner : {stream, kIdle}) {
    probe.owner = owner;
    auto it = free_.lower_bound(&probe);
    if (it == free_.end() || (*it)->owner != owner) continue;
    if (best == nullptr || (*it)->size < best->size ||
        ((*it)->size == best->size && (*it)->ptr < best->ptr)) {
      best = *it;
    }
  }
  if (best != nullptr) free_.erase(best);
  return best;
}

FixedRangeResource::Block* FixedRangeResource::hand_out(Block* block, size_t size, size_t requested,
                                                        StreamId stream) {
  if (block->size - size >= kMinBlockSize) {
    auto* rest = new Block();
    rest->ptr = block->ptr + size;
    rest->size = block->size - size;
    rest->owner = block->owner;  // an idle remainder stays idle, a stream's stays the stream's
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    rest->free_tick = ++tick_;
    free_.insert(rest);
  }
  block->owner = stream;
  block->state = BlockState::kAllocated;
  block->requested = requested;
  allocated_.emplace(block->ptr, block);
  const auto bytes = static_cast<int64_t>(block->size);
  allocation_.increase(1);
  allocated_bytes_.increase(bytes);
  active_bytes_.increase(bytes);
  return block;
}

void FixedRangeResource::note_stream(const Stream& stream) {
  if (std::find(streams_seen_.begin(), streams_seen_.end(), stream) == streams_seen_.end()) {
    streams_seen_.push_back(stream);
  }
}

// ---- free ------------------------------------------------------------------------------------

void FixedRangeResource::do_deallocate(void* ptr, size_t bytes, const Stream& stream) {
  FERRY_CHECK_AS(DeviceError, stream.device_type() == device_.type(), name_,
                 ": deallocate: expected a stream of ", device_.type(), ", but got ", stream);
  Lock lock(mutex_);
  auto it = allocated_.find(ptr);
  FERRY_CHECK(it != allocated_.end(), name_,
              ": deallocate: expected a pointer this range handed out and that is not freed yet, "
              "but got ",
              ptr);
  Block* block = it->second;
  FERRY_CHECK(bytes == block->requested, name_, ": deallocate(", ptr, "): expected ",
              block->requested, " bytes (the size allocated), but got ", bytes);
  note_stream(stream);
  if ((stream.device() != device_ || stream.id() != block->owner) &&
      std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
  allocated_.erase(it);
  allocation_.decrease(1);
  allocated_bytes_.decrease(static_cast<int64_t>(block->size));
  block->requested = 0;
  if (block->uses.empty()) {
    free_block(block, block->owner);
  } else {
    insert_events(block);
  }
}

bool FixedRangeResource::do_record_stream(void* ptr, const Stream& allocation_stream,
                                          const Stream& stream) {
  FERRY_CHECK_AS(DeviceError, stream.device_type() == allocation_stream.device_type(),
                 "record_stream: expected a stream of the memory's device type (",
                 allocation_stream.device_type(), "), but got ", stream);
  Lock lock(mutex_);
  auto it = allocated_.find(ptr);
  FERRY_CHECK(it != allocated_.end(), name_,
              ": record_stream: expected a live allocation of this range, but got ", ptr,
              " (not allocated, or already freed)");
  Block* block = it->second;
  if (stream.device() == device_ && stream.id() == block->owner) return true;
  note_stream(stream);
  if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
  return true;
}

void FixedRangeResource::free_block(Block* block, StreamId owner) {
  if (block->state != BlockState::kFree) {
    active_bytes_.decrease(static_cast<int64_t>(block->size));
  }
  block->state = BlockState::kFree;
  block->owner = owner;
  insert_free(block);
}

void FixedRangeResource::insert_free(Block* block) {
  // Merges `upper` into its predecessor `lower`, which keeps its owner or, when idle, takes
  // upper's. The lower block survives a merge, so head_ is never deleted.
  const auto merge = [](Block* lower, Block* upper) {
    if (lower->owner == kIdle) lower->owner = upper->owner;
    lower->size += upper->size;
    lower->next = upper->next;
    if (lower->next != nullptr) lower->next->prev = lower;
    delete upper;
  };
  if (Block* next = block->next; next != nullptr && next->state == BlockState::kFree &&
                                 mergeable(block->owner, next->owner, kIdle)) {
    free_.erase(next);
    merge(block, next);
  }
  if (Block* prev = block->prev; prev != nullptr && prev->state == BlockState::kFree &&
                                 mergeable(block->owner, prev->owner, kIdle)) {
    free_.erase(prev);
    merge(prev, block);
    block = prev;
  }
  block->free_tick = ++tick_;
  free_.insert(block);
}

// ---- reporting -------------------------------------------------------------------------------

std::string FixedRangeResource::oom_message(size_t requested, const Stream& stream) const {
  size_t free_bytes = 0;
  size_t largest = 0;
  for (const Block* b : free_) {
    free_bytes += b->size;
    largest = std::max(largest, b->size);
  }
  std::ostringstream out;
  out << device_ << ": out of memory: tried to allocate " << format_bytes(requested) << " ("
      << requested << " bytes) on " << stream << " from " << name_ << " (" << format_bytes(size_)
      << ", a fixed range that never falls back to other memory), of which "
      << format_bytes(free_bytes) << " is free; its largest free block is " << format_bytes(largest)
      << ".";
  if (static_cast<size_t>(active_bytes_.current) > static_cast<size_t>(allocated_bytes_.current)) {
    out << " "
        << format_bytes(static_cast<size_t>(active_bytes_.current - allocated_bytes_.current))
        << " of freed blocks still wait for recorded streams.";
  }
  return out.str();
}

FixedRangeStats FixedRangeResource::stats() const {
  Lock lock(mutex_);
  FixedRangeStats s;
  s.size = size_;
  s.allocation = allocation_;
  s.allocated_bytes = allocated_bytes_;
  s.active_bytes = active_bytes_;
  for (const Block* b : free_) {
    s.free_bytes += b->size;
    s.largest_free_block = std::max(s.largest_free_block, b->size);
  }
  s.num_ooms = num_ooms_;
  s.num_event_record_failures = num_event_record_failures_;
  return s;
}

std::vector<BlockInfo> FixedRangeResource::blocks() const {
  Lock lock(mutex_);
  std::vector<BlockInfo> out;
  for (const Block* b = head_; b != nullptr; b = b->next) {
    out.push_back(BlockInfo{b->ptr, b->size, b->requested, b->state});
  }
  return out;
}

bool FixedRangeResource::closed() const {
  Lock lock(mutex_);
  return closed_;
}

void FixedRangeResource::synchronize_pending() {
  Lock lock(mutex_);
  if (!pending_.empty()) synchronize_pending_locked(lock);
}

void FixedRangeResource::close_all(const std::vector<FixedRangeResource*>& ranges,
                                   const std::string& what) {
  std::vector<FixedRangeResource*> sorted = ranges;
  std::sort(sorted.begin(), sorted.end(), std::less<FixedRangeResource*>());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (;;) {
    // Wait with no lock held, then check everything under every lock (taken in address order):
    // the memory goes to its next user once closed, so nothing may still be queued against it.
    for (FixedRangeResource* r : sorted) r->synchronize_pending();
    std::vector<Lock> locks;
    locks.reserve(sorted.size());
    for (FixedRangeResource* r : sorted) locks.emplace_back(r->mutex_);
    std::ostringstream live;
    int live_count = 0;
    bool awaiting = false;
    for (const FixedRangeResource* r : sorted) {
      for (const Block* b = r->head_; b != nullptr; b = b->next) {
        if (b->state == BlockState::kAllocated) {
          live << (live_count++ == 0 ? "" : ", ") << static_cast<const void*>(b->ptr) << " ("
               << format_bytes(b->size) << ", " << r->name_ << ")";
        }
      }
      awaiting = awaiting || !r->pending_.empty();
    }
    FERRY_CHECK(live_count == 0, what, ": expected no live allocations in them, but ", live_count,
                live_count == 1 ? " is" : " are", " still allocated: ", live.str(),
                ". Free the tensors that use them first; nothing was dropped");
    if (awaiting) continue;  // blocks freed with recorded streams meanwhile: wait for them too
    for (FixedRangeResource* r : sorted) r->closed_ = true;
    return;
  }
}

}  // namespace ferry::memory
