// One device's caching allocator: allocation (best fit on the stream, split), free (merge),
// segments from the backend with retries and garbage collection, the out-of-memory error,
// empty_cache and the memory fraction. record_stream's events are in device_allocator_events.cc,
// snapshots and invariant checks in device_allocator_debug.cc.
#include "ferry/memory/device_allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <exception>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/memory/caching_allocator.h"

namespace ferry::memory::detail {
namespace {

// Larger requests cannot be rounded without overflow and exceed any device anyway.
constexpr size_t kMaxRequest = size_t{1} << 62;

size_t round_size(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

bool should_split(const Block& block, size_t size, size_t max_split) {
  const size_t remaining = block.size - size;
  if (block.pool->is_small) return remaining >= kMinBlockSize;
  return size < max_split && remaining > kSmallSize;
}

}  // namespace

DeviceAllocator::DeviceAllocator(Device device) : device_(device) { small_.is_small = true; }

// ---- allocation ------------------------------------------------------------------------------

void* DeviceAllocator::malloc(size_t requested, const Stream& stream) {
  const AllocConfig config = alloc_config();
  Lock lock(mutex_);
  if (!pending_.empty()) process_events();
  if (requested > kMaxRequest) {
    ++stats_.num_ooms;
    FERRY_FAIL_AS(OutOfMemoryError, oom_message(requested, stream));
  }
  const size_t size = round_size(requested);
  BlockPool& pool = size <= kSmallSize ? small_ : large_;
  Block* block = find_free_block(pool, stream.id(), size, config.max_split_size);
  if (block == nullptr) {
    block = allocate_from_backend(lock, pool, stream, size, requested, config);
  }
  return hand_out(block, size, requested, config.max_split_size)->ptr;
}

Block* DeviceAllocator::find_free_block(BlockPool& pool, StreamId stream, size_t size,
                                        size_t max_split) {
  auto it = pool.blocks.lower_bound(BlockKey{stream, size, 0});
  if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
  if (!pool.is_small) {
    // Oversize blocks stay whole for oversize requests, and only serve those that nearly fill
    // them (PyTorch's slack rule): otherwise a 1 GiB block would go to a 300 MiB request.
    if (size < max_split && (*it)->size >= max_split) return nullptr;
    if (size >= max_split && (*it)->size >= size + kLargeBuffer) return nullptr;
  }
  Block* block = *it;
  pool.blocks.erase(it);
  return block;
}

Block* DeviceAllocator::allocate_from_backend(Lock& lock, BlockPool& pool, const Stream& stream,
                                              size_t size, size_t requested,
                                              const AllocConfig& config) {
  const size_t bytes = segment_size(size);
  const StreamId id = stream.id();
  const size_t max_split = config.max_split_size;
  // Every step that releases the lock lets other threads free blocks: look in the pool again.
  if (config.garbage_collection_threshold > 0.0 &&
      collect_garbage(lock, bytes, config.garbage_collection_threshold)) {
    if (Block* b = find_free_block(pool, id, size, max_split)) return b;
  }
  if (Block* b = new_segment(pool, id, bytes, max_split)) return b;

  // The backend (or the memory fraction) said no: give back what the cache holds, and retry.
  ++stats_.num_alloc_retries;
  release_segments(lock, free_segments());
  if (Block* b = find_free_block(pool, id, size, max_split)) return b;
  if (Block* b = new_segment(pool, id, bytes, max_split)) return b;
  if (!pending_.empty()) {
    synchronize_pending_events(lock);
    if (Block* b = find_free_block(pool, id, size, max_split)) return b;
    release_segments(lock, free_segments());
    if (Block* b = find_free_block(pool, id, size, max_split)) return b;
    if (Block* b = new_segment(pool, id, bytes, max_split)) return b;
  }
  if (Block* b = retry_after_releases(lock, pool, id, size, bytes, max_split)) return b;
  ++stats_.num_ooms;
  FERRY_FAIL_AS(OutOfMemoryError, oom_message(requested, stream));
}

Block* DeviceAllocator::retry_after_releases(Lock& lock, BlockPool& pool, StreamId stream,
                                             size_t size, size_t segment_bytes, size_t max_split) {
  // Another thread's release_segments has taken segments off the books and is freeing them with
  // the lock released (the backend's free waits for queued work): the backend's refusal may only
  // mean that their bytes are not back yet. Each release finishes in bounded time, so this ends.
  while (releases_in_flight_ > 0) {
    ++stats_.num_release_waits;
    const uint64_t generation = release_generation_;
    released_.wait(lock, [&] { return release_generation_ != generation; });
    if (Block* b = find_free_block(pool, stream, size, max_split)) return b;
    if (Block* b = new_segment(pool, stream, segment_bytes, max_split)) return b;
  }
  return nullptr;
}

Block* DeviceAllocator::new_segment(BlockPool& pool, StreamId stream, size_t size,
                                    size_t max_split) {
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes.current);
  if (fraction_.has_value() && reserved + size > allowed_) return nullptr;
  void* ptr = nullptr;
  try {
    ptr = backend().malloc(device_.index(), size);
  } catch (const OutOfMemoryError&) {
    return nullptr;
  }
  FERRY_CHECK_AS(DeviceError, ptr != nullptr && reinterpret_cast<uintptr_t>(ptr) % 512 == 0,
                 device_, ": expected the backend to return 512-byte aligned memory for ", size,
                 " bytes, but got ", ptr);
  auto* block = new Block();
  block->ptr = static_cast<char*>(ptr);
  block->size = size;
  block->stream = stream;
  block->pool = &pool;
  const bool oversize = size >= max_split;
  segments_.emplace(block->ptr, Segment{size, block, &pool, stream, oversize});
  stats_.segment.increase(1);
  stats_.reserved_bytes.increase(static_cast<int64_t>(size));
  if (oversize) stats_.oversize_segments.increase(1);
  ++stats_.num_device_alloc;
  return block;
}

Block* DeviceAllocator::hand_out(Block* block, size_t size, size_t requested, size_t max_split) {
  if (should_split(*block, size, max_split)) {
    auto* rest = new Block();
    rest->ptr = block->ptr + size;
    rest->size = block->size - size;
    rest->stream = block->stream;
    rest->pool = block->pool;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    rest->free_tick = ++tick_;
    rest->pool->blocks.insert(rest);
  }
  block->state = BlockState::kAllocated;
  block->requested = requested;
  block->oversize = block->size >= max_split;
  allocated_.emplace(block->ptr, block);
  const auto bytes = static_cast<int64_t>(block->size);
  stats_.allocation.increase(1);
  stats_.allocated_bytes.increase(bytes);
  stats_.requested_bytes.increase(static_cast<int64_t>(requested));
  stats_.active.increase(1);
  stats_.active_bytes.increase(bytes);
  if (block->oversize) stats_.oversize_allocations.increase(1);
  return block;
}

// ---- free ------------------------------------------------------------------------------------

void DeviceAllocator::free(void* ptr, size_t bytes, const Stream& stream) {
  Lock lock(mutex_);
  auto it = allocated_.find(ptr);
  FERRY_CHECK(it != allocated_.end(), device_,
              ": deallocate: expected a pointer that the caching allocator handed out and that "
              "is not freed yet, but got ",
              ptr);
  Block* block = it->second;
  FERRY_CHECK(bytes == block->requested, device_, ": deallocate(", ptr, "): expected ",
              block->requested, " bytes (the size allocated), but got ", bytes);
  if (stream.id() != block->stream &&
      std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
  allocated_.erase(it);
  stats_.allocation.decrease(1);
  stats_.allocated_bytes.decrease(static_cast<int64_t>(block->size));
  stats_.requested_bytes.decrease(static_cast<int64_t>(block->requested));
  if (block->oversize) stats_.oversize_allocations.decrease(1);
  block->requested = 0;
  block->oversize = false;
  if (block->uses.empty()) {
    free_block(block);
  } else {
    insert_events(block);
  }
}

void DeviceAllocator::free_block(Block* block) {
  block->state = BlockState::kFree;
  stats_.active.decrease(1);
  stats_.active_bytes.decrease(static_cast<int64_t>(block->size));
  BlockPool& pool = *block->pool;
  // Merge with free neighbours. The lower block survives a merge, so a segment's head (the block
  // at its base) is never deleted.
  if (Block* next = block->next; next != nullptr && next->state == BlockState::kFree) {
    pool.blocks.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  if (Block* prev = block->prev; prev != nullptr && prev->state == BlockState::kFree) {
    pool.blocks.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    delete block;
    block = prev;
  }
  block->free_tick = ++tick_;
  pool.blocks.insert(block);
}

void DeviceAllocator::record_stream(void* ptr, const Stream& stream) {
  Lock lock(mutex_);
  auto it = allocated_.find(ptr);
  FERRY_CHECK(it != allocated_.end(), device_,
              ": record_stream: expected a live allocation of the caching allocator, but got ", ptr,
              " (not allocated, or already freed)");
  Block* block = it->second;
  if (stream.is_cpu() || (stream.device() == device_ && stream.id() == block->stream)) return;
  if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
}

// ---- releasing segments ----------------------------------------------------------------------

std::vector<char*> DeviceAllocator::free_segments() const {
  std::vector<char*> bases;
  for (const auto& [base, seg] : segments_) {
    if (seg.head->state == BlockState::kFree && seg.head->next == nullptr) {
      bases.push_back(base);
    }
  }
  return bases;
}

void DeviceAllocator::release_segments(Lock& lock, const std::vector<char*>& bases) {
  if (bases.empty()) return;
  for (char* base : bases) {
    auto it = segments_.find(base);
    Segment& seg = it->second;
    seg.pool->blocks.erase(seg.head);
    delete seg.head;
    stats_.segment.decrease(1);
    stats_.reserved_bytes.decrease(static_cast<int64_t>(seg.size));
    if (seg.oversize) stats_.oversize_segments.decrease(1);
    ++stats_.num_device_free;
    segments_.erase(it);
  }
  // The backend's free waits for queued work; never hold the lock while it does. Meanwhile the
  // bytes are in neither place: a thread whose backend allocation fails waits for us
  // (retry_after_releases) rather than report a false out-of-memory.
  ++releases_in_flight_;
  lock.unlock();
  std::exception_ptr error;
  for (char* base : bases) {
    try {
      backend().free(device_.index(), base);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  lock.lock();
  --releases_in_flight_;
  ++release_generation_;
  released_.notify_all();
  if (error) std::rethrow_exception(error);
}

bool DeviceAllocator::collect_garbage(Lock& lock, size_t segment_bytes, double threshold) {
  const size_t capacity = fraction_.has_value() ? allowed_ : total_memory();
  const double limit = threshold * static_cast<double>(capacity);
  auto reserved = static_cast<size_t>(stats_.reserved_bytes.current);
  if (static_cast<double>(reserved + segment_bytes) <= limit) return false;
  std::vector<char*> candidates = free_segments();
  std::sort(candidates.begin(), candidates.end(), [&](char* a, char* b) {
    return segments_.at(a).head->free_tick < segments_.at(b).head->free_tick;
  });
  std::vector<char*> victims;
  for (char* base : candidates) {
    if (static_cast<double>(reserved + segment_bytes) <= limit) break;
    reserved -= segments_.at(base).size;
    victims.push_back(base);
  }
  stats_.num_gc_frees += static_cast<int64_t>(victims.size());
  release_segments(lock, victims);
  return !victims.empty();
}

// ---- reporting -------------------------------------------------------------------------------

size_t DeviceAllocator::total_memory() const {
  // Not cached: the sim's memory size can be reconfigured, and this runs only on cache misses.
  return backend().memory_info(device_.index()).total;
}

size_t DeviceAllocator::largest_free_block() const {
  size_t largest = 0;
  for (const BlockPool* pool : {&small_, &large_}) {
    for (const Block* b : pool->blocks) largest = std::max(largest, b->size);
  }
  return largest;
}

std::string DeviceAllocator::oom_message(size_t requested, const Stream& stream) const {
  std::ostringstream out;
  out << device_ << ": out of memory: tried to allocate " << format_bytes(requested) << " ("
      << requested << " bytes) on " << stream << ". ";
  MemoryInfo info;
  try {
    info = backend().memory_info(device_.index());
  } catch (const std::exception&) {
    // Reported as zeros: the message matters more than the numbers.
  }
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes.current);
  const auto allocated = static_cast<size_t>(stats_.allocated_bytes.current);
  out << "The device has " << format_bytes(info.total) << " in total, of which "
      << format_bytes(info.free) << " is free. The caching allocator has reserved "
      << format_bytes(reserved) << " from the backend, of which " << format_bytes(allocated)
      << " is allocated";
  if (stats_.shared_bytes.current > 0) {
    out << " (besides, " << format_bytes(static_cast<size_t>(stats_.shared_bytes.current))
        << " of adopted shared regions serve their sub-regions' pools)";
  }
  out << "; the largest free cached block is " << format_bytes(largest_free_block()) << ".";
  if (fraction_.has_value()) {
    out << " A memory fraction of " << *fraction_ << " caps the allocator at "
        << format_bytes(allowed_) << " on this device.";
  }
  if (reserved > allocated && reserved - allocated >= requested) {
    out << " Much reserved memory is unallocated: max_split_size_mb in FERRY_ALLOC_CONF may "
           "reduce fragmentation.";
  }
  return out.str();
}

// ---- management ------------------------------------------------------------------------------

Stats DeviceAllocator::stats() const {
  Stats s;
  {
    Lock lock(mutex_);
    s = stats_;
  }
  s.max_split_size = alloc_config().max_split_size;
  return s;
}

void DeviceAllocator::reset_peak_stats() {
  Lock lock(mutex_);
  for (Stat* s : {&stats_.allocation, &stats_.allocated_bytes, &stats_.requested_bytes,
                  &stats_.active, &stats_.active_bytes, &stats_.segment, &stats_.reserved_bytes,
                  &stats_.shared_bytes, &stats_.oversize_allocations, &stats_.oversize_segments}) {
    s->reset_peak();
  }
}

void DeviceAllocator::reset_accumulated_stats() {
  Lock lock(mutex_);
  for (Stat* s : {&stats_.allocation, &stats_.allocated_bytes, &stats_.requested_bytes,
                  &stats_.active, &stats_.active_bytes, &stats_.segment, &stats_.reserved_bytes,
                  &stats_.shared_bytes, &stats_.oversize_allocations, &stats_.oversize_segments}) {
    s->reset_accumulated();
  }
  stats_.num_alloc_retries = stats_.num_ooms = stats_.num_release_waits = 0;
  stats_.num_device_alloc = stats_.num_device_free = stats_.num_gc_frees = 0;
  stats_.num_event_record_failures = 0;
}

void DeviceAllocator::empty_cache() {
  Lock lock(mutex_);
  if (!pending_.empty()) synchronize_pending_events(lock);
  release_segments(lock, free_segments());
}

const char* DeviceAllocator::overlapping_segment(const char* base, size_t size) const {
  Lock lock(mutex_);
  for (const auto& [seg_base, seg] : segments_) {
    if (base < seg_base + seg.size && seg_base < base + size) return seg_base;
  }
  return nullptr;
}

void DeviceAllocator::add_shared_bytes(int64_t delta) {
  Lock lock(mutex_);
  if (delta >= 0) {
    stats_.shared_bytes.increase(delta);
  } else {
    stats_.shared_bytes.decrease(-delta);
  }
}

void DeviceAllocator::set_memory_fraction(double fraction) {
  FERRY_CHECK(fraction > 0.0 && fraction <= 1.0, device_,
              ": set_memory_fraction: expected a fraction in (0, 1], but got ", fraction);
  Lock lock(mutex_);
  const size_t total = total_memory();
  fraction_ = fraction;
  allowed_ = static_cast<size_t>(fraction * static_cast<double>(total));
}

std::optional<double> DeviceAllocator::memory_fraction() const {
  Lock lock(mutex_);
  return fraction_;
}

// ---- the per-device table and the event pool -------------------------------------------------

namespace {
constexpr int kAllocatorTableDevices = 128;  // DeviceIndex is int8_t

template <typename T>
using DeviceTable =
    std::array<std::array<std::atomic<T*>, kAllocatorTableDevices>, kNumDeviceTypes>;

// Created on first use and never destroyed: tensors freed by static destructors at exit still
// find their allocator.
template <typename T>
T& lookup(DeviceTable<T>& table, std::mutex& mutex, Device device) {
  FERRY_CHECK_AS(DeviceError, !device.is_cpu() && device.has_index(),
                 "expected a device with an index for the caching allocator, but got ", device);
  auto& slot = table[static_cast<size_t>(device.type())][static_cast<size_t>(device.index())];
  if (T* p = slot.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(mutex);
  if (T* p = slot.load(std::memory_order_acquire)) return *p;
  T* created = new T(device);
  slot.store(created, std::memory_order_release);
  return *created;
}

struct EventPool {
  explicit EventPool(Device d) : device(d) {}
  Device device;
  std::mutex mutex;
  std::vector<RawEvent> free;
};

}  // namespace

DeviceAllocator& device_allocator(Device device) {
  static DeviceTable<DeviceAllocator> table{};
  static std::mutex mutex;
  return lookup(table, mutex, device);
}

namespace {
EventPool& event_pool(Device device) {
  static DeviceTable<EventPool> table{};
  static std::mutex mutex;
  return lookup(table, mutex, device);
}
}  // namespace

RawEvent acquire_event(Device device) {
  EventPool& pool = event_pool(device);
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.free.empty()) {
      RawEvent e = pool.free.back();
      pool.free.pop_back();
      return e;
    }
  }
  return memory_backend(device.type()).event_create(device.index(), /*enable_timing=*/false);
}

void release_event(Device device, RawEvent event) {
  EventPool& pool = event_pool(device);
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.free.push_back(event);
}

}  // namespace ferry::memory::detail
