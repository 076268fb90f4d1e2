// The caching pinned host allocator: free lists per power-of-two size class below 1 MiB and one
// size-ordered list of exact, page-rounded large blocks, events recorded at free for the streams a
// block was used on, polled on later allocations. Backend calls that may
// block (malloc_host, free_host) run without the lock held; looking a block up and recording a
// stream on it happen under one lock hold, so a block cannot be freed or deleted in between.
#include "ferry/memory/pinned_allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <unistd.h>

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
  bool large = false;  // an exact-size block (a request of at least kPinnedLargeRequest)
  bool allocated = false;
  int event_count = 0;          // pending entries while freed
  std::vector<Stream> streams;  // recorded while allocated
};

int class_of(size_t size) { return std::countr_zero(size); }

size_t page_size() {
  static const size_t size = [] {
    const long n = ::sysconf(_SC_PAGESIZE);
    return n > 0 ? static_cast<size_t>(n) : size_t{4096};
  }();
  return size;
}

// A cached large block serves a request of `rounded` bytes when it wastes at most 1/8 of that.
bool large_block_fits(size_t block_size, size_t rounded) {
  return block_size >= rounded && block_size - rounded <= rounded / 8;
}

void release_pinned(void* context);

// The release hooks; the mutex is held while they run, so that removing one waits for its calls.
std::mutex& hooks_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<uint64_t, PinnedReleaseHook>& hooks() {
  static auto* h = new std::map<uint64_t, PinnedReleaseHook>();
  return *h;
}
void run_release_hooks(const PinnedBlockRange& block) {
  std::lock_guard<std::mutex> lock(hooks_mutex());
  for (const auto& [id, hook] : hooks()) {
    try {
      hook(block);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ferry: a pinned block release hook failed: %s\n", e.what());
    }
  }
}

// The context of a view storage (pinned_view_storage): the block's own storage, kept alive.
struct PinnedView {
  Storage block;
};
void release_pinned_view(void* context) { delete static_cast<PinnedView*>(context); }

class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    FERRY_CHECK_AS(DeviceError, device.is_cpu(),
                   "pinned host allocator: expected a cpu device, but got ", device);
    FERRY_CHECK_AS(OutOfMemoryError, nbytes <= kMaxPinnedRequest,
                   "pinned host allocator: cannot allocate ", nbytes, " bytes");
    const size_t size = pinned_size_class(nbytes);
    const bool large = nbytes >= kPinnedLargeRequest;
    std::unique_lock<std::mutex> lock(mutex_);
    if (!pending_.empty()) process_events();
    PinnedBlock* block = take_cached(size, large);
    if (block != nullptr) {
      ++stats_.num_cache_hits;
    } else {
      lock.unlock();
      block = new_block(size);
      lock.lock();
      block->large = large;
      blocks_.emplace(block->ptr, block);
      stats_.segment.increase(1);
      stats_.reserved_bytes.increase(static_cast<int64_t>(size));
      ++stats_.num_host_alloc;
    }
    block->allocated = true;
    block->requested = nbytes;
    stats_.allocation.increase(1);
    stats_.allocated_bytes.increase(static_cast<int64_t>(block->size));
    stats_.requested_bytes.increase(static_cast<int64_t>(nbytes));
    if (block->large) {
      stats_.large_allocation.increase(1);
      stats_.large_allocated_bytes.increase(static_cast<int64_t>(block->size));
      stats_.large_requested_bytes.increase(static_cast<int64_t>(nbytes));
    }
    return DataPtr(block->ptr, block, &release_pinned, Device(DeviceType::CPU));
  }

  void free(PinnedBlock* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    stats_.allocation.decrease(1);
    stats_.allocated_bytes.decrease(static_cast<int64_t>(block->size));
    stats_.requested_bytes.decrease(static_cast<int64_t>(block->requested));
    if (block->large) {
      stats_.large_allocation.decrease(1);
      stats_.large_allocated_bytes.decrease(static_cast<int64_t>(block->size));
      stats_.large_requested_bytes.decrease(static_cast<int64_t>(block->requested));
    }
    block->requested = 0;
    std::vector<Stream> streams;
    streams.swap(block->streams);
    for (const Stream& s : streams) {
      const RawEvent event = detail::record_use(s);
      if (event == nullptr) ++stats_.num_event_record_failures;
      pending_.push_back(Pending{s, event, block});
      ++block->event_count;
      ++stats_.pending_events;
    }
    if (block->event_count == 0) cache(block);
  }

  // The storage keeps `block` allocated while the caller holds it.
  void record(PinnedBlock* block, const Stream& stream) {
    if (stream.is_cpu()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    FERRY_CHECK(block->allocated, "pinned_record_event: expected a live pinned block, but ",
                block->ptr, " is free");
    add_stream(block, stream);
  }

  // By address: the lookup and the record under one lock, or the block could be freed (and
  // deleted by empty_cache, or handed to another tensor) between them.
  bool record(const void* ptr, const Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ptr);
    if (it == blocks_.end() || !it->second->allocated) return false;
    if (!stream.is_cpu()) add_stream(it->second, stream);
    return true;
  }

  PinnedStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Stat* s : {&stats_.allocation, &stats_.allocated_bytes, &stats_.requested_bytes,
                    &stats_.large_allocation, &stats_.large_allocated_bytes,
                    &stats_.large_requested_bytes, &stats_.segment, &stats_.reserved_bytes}) {
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
      for (const auto& entry : large_free_) victims.push_back(entry.second);
      large_free_.clear();
      for (PinnedBlock* b : victims) {
        blocks_.erase(b->ptr);
        stats_.segment.decrease(1);
        stats_.reserved_bytes.decrease(static_cast<int64_t>(b->size));
        ++stats_.num_host_free;
      }
    }
    std::exception_ptr error;
    for (PinnedBlock* b : victims) {
      run_release_hooks({b->ptr, b->size});
      try {
        detail::memory_backend(b->backend).free_host(b->ptr);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
      delete b;
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  // `event` is null when recording it failed: the block then waits until the stream is idle.
  struct Pending {
    Stream stream;
    RawEvent event;
    PinnedBlock* block;
  };

  // A cached block for a request of block size `size` (under the lock), or null.
  PinnedBlock* take_cached(size_t size, bool large) {
    if (!large) {
      auto& list = free_[class_of(size)];
      if (list.empty()) return nullptr;
      PinnedBlock* block = list.back();
      list.pop_back();
      return block;
    }
    auto it = large_free_.lower_bound(size);
    if (it == large_free_.end() || !large_block_fits(it->first, size)) return nullptr;
    PinnedBlock* block = it->second;
    large_free_.erase(it);
    return block;
  }

  // Returns a free block with no pending events to its free list (under the lock).
  void cache(PinnedBlock* block) {
    if (block->large) {
      large_free_.emplace(block->size, block);
    } else {
      free_[class_of(block->size)].push_back(block);
    }
  }

  static void add_stream(PinnedBlock* block, const Stream& stream) {
    if (std::find(block->streams.begin(), block->streams.end(), stream) == block->streams.end()) {
      block->streams.push_back(stream);
    }
  }

  // Outside the lock: page-locking memory is slow.
  PinnedBlock* new_block(size_t size) {
    const DeviceType type = backend_type();
    void* ptr = nullptr;
    try {
      ptr = detail::memory_backend(type).malloc_host(size);
    } catch (const OutOfMemoryError&) {
      empty_cache();
      ptr = detail::memory_backend(type).malloc_host(size);
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
      if (!detail::use_complete(p.stream, p.event)) return false;
      if (p.event != nullptr) detail::release_event(p.stream.device(), p.event);
      --stats_.pending_events;
      if (--p.block->event_count == 0) cache(p.block);
      return true;
    });
  }

  std::mutex mutex_;
  std::array<std::vector<PinnedBlock*>, kNumClasses> free_;
  std::multimap<size_t, PinnedBlock*> large_free_;        // cached large blocks, by size
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

const bool kPinnedAllocatorInstalled = [] {
  set_pinned_host_allocator(&instance());
  return true;
}();

}  // namespace

size_t pinned_size_class(size_t nbytes) {
  if (nbytes >= kPinnedLargeRequest) {
    const size_t page = page_size();
    FERRY_CHECK_AS(OutOfMemoryError, nbytes <= kMaxPinnedRequest,
                   "pinned host allocator: cannot allocate ", nbytes, " bytes");
    return (nbytes + page - 1) / page * page;
  }
  return std::max(kMinPinnedBlock, std::bit_ceil(std::max<size_t>(nbytes, 1)));
}

Allocator* pinned_host_allocator() { return &instance(); }

bool pinned_record_event(const Storage& host_storage, const Stream& stream) {
  if (!host_storage.defined()) return false;
  const Storage* block = &host_storage;
  if (host_storage.data_ptr().deleter() == &release_pinned_view) {
    block = &static_cast<const PinnedView*>(host_storage.data_ptr().context())->block;
  }
  if (block->data_ptr().deleter() != &release_pinned) return false;
  instance().record(static_cast<PinnedBlock*>(block->data_ptr().context()), stream);
  return true;
}

Storage pinned_view_storage(const Storage& storage, size_t offset, size_t nbytes) {
  FERRY_CHECK(storage.defined(), "pinned_view_storage: expected a defined storage");
  Storage block = storage;
  if (storage.data_ptr().deleter() == &release_pinned_view) {
    block = static_cast<const PinnedView*>(storage.data_ptr().context())->block;
    offset += static_cast<size_t>(static_cast<const char*>(storage.data()) -
                                  static_cast<const char*>(block.data()));
  }
  FERRY_CHECK(block.data_ptr().deleter() == &release_pinned,
              "pinned_view_storage: expected a storage of the pinned host allocator (or a view of "
              "one), but got one that is not");
  FERRY_CHECK(offset <= block.nbytes() && nbytes <= block.nbytes() - offset,
              "pinned_view_storage: expected bytes [", offset, ", ", offset + nbytes,
              ") to lie inside the pinned block of ", block.nbytes(), " bytes");
  void* data = static_cast<char*>(block.data()) + offset;
  auto* view = new PinnedView{std::move(block)};
  return Storage(DataPtr(data, view, &release_pinned_view, Device(DeviceType::CPU)), nbytes);
}

std::optional<PinnedBlockRange> pinned_block_of(const Storage& storage) {
  if (!storage.defined()) return std::nullopt;
  const Storage* block = &storage;
  if (storage.data_ptr().deleter() == &release_pinned_view) {
    block = &static_cast<const PinnedView*>(storage.data_ptr().context())->block;
  }
  if (block->data_ptr().deleter() != &release_pinned) return std::nullopt;
  const auto* b = static_cast<const PinnedBlock*>(block->data_ptr().context());
  return PinnedBlockRange{b->ptr, b->size};
}

uint64_t add_pinned_release_hook(PinnedReleaseHook hook) {
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id.fetch_add(1);
  std::lock_guard<std::mutex> lock(hooks_mutex());
  hooks().emplace(id, std::move(hook));
  return id;
}

void remove_pinned_release_hook(uint64_t id) {
  std::lock_guard<std::mutex> lock(hooks_mutex());
  hooks().erase(id);
}

bool pinned_record_event(const void* ptr, const Stream& stream) {
  return ptr != nullptr && instance().record(ptr, stream);
}

PinnedStats pinned_stats() { return instance().stats(); }
void pinned_reset_peak_stats() { instance().reset_peak_stats(); }
void pinned_empty_cache() { instance().empty_cache(); }

}  // namespace ferry::memory
