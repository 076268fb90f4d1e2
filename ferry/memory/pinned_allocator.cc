// The caching pinned host allocator: free lists per power-of-two size class, events recorded at
// free for the streams a block was used on, polled on later allocations. Backend calls that may
// block (malloc_host, free_host) run without the lock held.
#include "ferry/memory/pinned_allocator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/device_allocator.h"

namespace ferry::memory {
namespace {

constexpr size_t kMinPinnedBlock = 512;
constexpr size_t kMaxPinnedRequest = size_t{1} << 62;
constexpr int kNumClasses = 64;

struct PinnedBlock {
  void* ptr = nullptr;
  size_t size = 0;
  size_t requested = 0;
  DeviceType backend = DeviceType::Sim;
  bool allocated = false;
  int event_count = 0;
  std::vector<Stream> streams;  // recorded while allocated
};

int class_of(size_t size) { return std::countr_zero(size); }

void release_pinned(void* context);

class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    FERRY_CHECK_AS(DeviceError, device.is_cpu(),
                   "pinned host allocator: expected a cpu device, but got ", device);
    FERRY_CHECK_AS(OutOfMemoryError, nbytes <= kMaxPinnedRequest,
                   "pinned host allocator: cannot allocate ", nbytes, " bytes");
    const size_t size = pinned_size_class(nbytes);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!pending_.empty()) process_events();
    PinnedBlock* block = nullptr;
    auto& list = free_[class_of(size)];
    if (!list.empty()) {
      block = list.back();
      list.pop_back();
      ++stats_.num_cache_hits;
    } else {
      lock.unlock();
      block = new_block(size);
      lock.lock();
      blocks_.emplace(block->ptr, block);
      stats_.segment.increase(1);
      stats_.reserved_bytes.increase(static_cast<int64_t>(size));
      ++stats_.num_host_alloc;
    }
    block->allocated = true;
    block->requested = nbytes;
    stats_.allocation.increase(1);
    stats_.allocated_bytes.increase(static_cast<int64_t>(size));
    stats_.requested_bytes.increase(static_cast<int64_t>(nbytes));
    return DataPtr(block->ptr, block, &release_pinned, Device(DeviceType::CPU));
  }

  void free(PinnedBlock* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    stats_.allocation.decrease(1);
    stats_.allocated_bytes.decrease(static_cast<int64_t>(block->size));
    stats_.requested_bytes.decrease(static_cast<int64_t>(block->requested));
    block->requested = 0;
    std::vector<Stream> streams;
    streams.swap(block->streams);
    // A failure part way keeps the events already recorded; with none the block is never
    // reused (leaked rather than handed out while a copy may still use it).
    for (const Stream& s : streams) {
      RawStream raw = s.raw();
      RawEvent event = detail::acquire_event(s.device());
      try {
        get_backend(s.device_type()).event_record(s.device_index(), event, raw);
      } catch (...) {
        detail::release_event(s.device(), event);
        if (block->event_count == 0) block->event_count = -1;  // never reused
        throw;
      }
      pending_.push_back(Pending{s, event, block});
      ++block->event_count;
      ++stats_.pending_events;
    }
    if (block->event_count == 0) free_[class_of(block->size)].push_back(block);
  }

  bool record(PinnedBlock* block, const Stream& stream) {
    if (stream.is_cpu()) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    FERRY_CHECK(block->allocated, "pinned_record_event: expected a live pinned block, but ",
                block->ptr, " is free");
    if (std::find(block->streams.begin(), block->streams.end(), stream) == block->streams.end()) {
      block->streams.push_back(stream);
    }
    return true;
  }

  PinnedBlock* find_live(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ptr);
    return it != blocks_.end() && it->second->allocated ? it->second : nullptr;
  }

  PinnedStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Stat* s : {&stats_.allocation, &stats_.allocated_bytes, &stats_.requested_bytes,
                    &stats_.segment, &stats_.reserved_bytes}) {
      s->reset_peak();
    }
  }

  void empty_cache() {
    std::vector<PinnedBlock*> victims;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!pending_.empty()) process_events();
      for (auto& list : free_) {
        victims.insert(victims.end(), list.begin(), list.end());
        list.clear();
      }
      for (PinnedBlock* b : victims) {
        blocks_.erase(b->ptr);
        stats_.segment.decrease(1);
        stats_.reserved_bytes.decrease(static_cast<int64_t>(b->size));
        ++stats_.num_host_free;
      }
    }
    std::exception_ptr error;
    for (PinnedBlock* b : victims) {
      try {
        get_backend(b->backend).free_host(b->ptr);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
      delete b;
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  struct Pending {
    Stream stream;
    RawEvent event;
    PinnedBlock* block;
  };

  // Outside the lock: page-locking memory is slow.
  PinnedBlock* new_block(size_t size) {
    const DeviceType type = backend_type();
    void* ptr = nullptr;
    try {
      ptr = get_backend(type).malloc_host(size);
    } catch (const OutOfMemoryError&) {
      empty_cache();
      ptr = get_backend(type).malloc_host(size);
    }
    FERRY_CHECK_AS(DeviceError, ptr != nullptr, "pinned host allocator: malloc_host(", size,
                   ") returned null");
    auto* block = new PinnedBlock();
    block->ptr = ptr;
    block->size = size;
    block->backend = type;
    return block;
  }

  // The first of CUDA and sim with a device, chosen once (the pinned blocks of one process all
  // come from one runtime).
  DeviceType backend_type() {
    std::call_once(backend_once_, [this] {
      for (DeviceType t : {DeviceType::CUDA, DeviceType::Sim}) {
        if (device_count(t) > 0) {
          backend_ = t;
          return;
        }
      }
    });
    FERRY_CHECK_AS(DeviceError, backend_.has_value(),
                   "pinned host allocator: expected a sim or CUDA device to provide page-locked "
                   "memory, but there is none (sim: ",
                   device_unavailable_reason(DeviceType::Sim),
                   "; cuda: ", device_unavailable_reason(DeviceType::CUDA), ")");
    return *backend_;
  }

  void process_events() {
    std::erase_if(pending_, [this](const Pending& p) {
      if (!get_backend(p.stream.device_type()).event_query(p.stream.device_index(), p.event)) {
        return false;
      }
      detail::release_event(p.stream.device(), p.event);
      --stats_.pending_events;
      if (--p.block->event_count == 0) free_[class_of(p.block->size)].push_back(p.block);
      return true;
    });
  }

  std::mutex mutex_;
  std::array<std::vector<PinnedBlock*>, kNumClasses> free_;
  std::unordered_map<const void*, PinnedBlock*> blocks_;  // every block held, by address
  std::vector<Pending> pending_;
  PinnedStats stats_;
  std::once_flag backend_once_;
  std::optional<DeviceType> backend_;
};

PinnedAllocator& instance() {
  // Never destroyed: pinned storages released by static destructors still reach it.
  static PinnedAllocator* allocator = new PinnedAllocator();
  return *allocator;
}

void release_pinned(void* context) {
  auto* block = static_cast<PinnedBlock*>(context);
  try {
    instance().free(block);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: failed to release a pinned host block of %zu bytes: %s\n",
                 block->size, e.what());
  }
}

const bool kInstalled = [] {
  set_pinned_host_allocator(&instance());
  return true;
}();

}  // namespace

size_t pinned_size_class(size_t nbytes) {
  return std::max(kMinPinnedBlock, std::bit_ceil(std::max<size_t>(nbytes, 1)));
}

Allocator* pinned_host_allocator() { return &instance(); }

bool pinned_record_event(const Storage& host_storage, const Stream& stream) {
  if (!host_storage.defined() || host_storage.data_ptr().deleter() != &release_pinned) {
    return false;
  }
  return instance().record(static_cast<PinnedBlock*>(host_storage.data_ptr().context()), stream);
}

bool pinned_record_event(const void* ptr, const Stream& stream) {
  if (ptr == nullptr) return false;
  PinnedBlock* block = instance().find_live(ptr);
  return block != nullptr && instance().record(block, stream);
}

PinnedStats pinned_stats() { return instance().stats(); }
void pinned_reset_peak_stats() { instance().reset_peak_stats(); }
void pinned_empty_cache() { instance().empty_cache(); }

}  // namespace ferry::memory
