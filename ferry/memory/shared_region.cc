// Shared regions: adopting external memory, binding sub-regions to streams, and dropping their
// bookkeeping all-or-nothing (never freeing the memory).
#include "ferry/memory/shared_region.h"

#include <algorithm>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/device_allocator.h"

namespace ferry::memory {
namespace detail {
namespace {

bool overlaps(const char* a, size_t a_size, const char* b, size_t b_size) {
  return a < b + b_size && b < a + a_size;
}

}  // namespace

Region* DeviceAllocator::find_region(const std::string& name) const {
  for (const auto& r : regions_) {
    if (r->name == name) return r.get();
  }
  return nullptr;
}

void DeviceAllocator::adopt_region(const std::string& name, void* base, size_t size) {
  auto* start = static_cast<char*>(base);
  FERRY_CHECK(!name.empty(), device_, ": adopt_shared_region: expected a non-empty name");
  FERRY_CHECK(base != nullptr && reinterpret_cast<uintptr_t>(base) % kMinBlockSize == 0, device_,
              ": adopt_shared_region('", name, "'): expected a base address aligned to ",
              kMinBlockSize, " bytes, but got ", base);
  FERRY_CHECK(size > 0 && reinterpret_cast<uintptr_t>(base) <= UINTPTR_MAX - size, device_,
              ": adopt_shared_region('", name, "'): expected a positive size that fits after ",
              base, ", but got ", size);
  Lock lock(mutex_);
  FERRY_CHECK(find_region(name) == nullptr, device_, ": adopt_shared_region: expected a new name, ",
              "but region '", name, "' is already adopted");
  for (const auto& r : regions_) {
    FERRY_CHECK(!overlaps(start, size, r->base, r->size), device_, ": adopt_shared_region('", name,
                "'): expected memory clear of other regions, but [", base, ", +", size,
                ") overlaps region '", r->name, "'");
  }
  for (const auto& [seg_base, seg] : segments_) {
    FERRY_CHECK(seg.sub_region != nullptr || !overlaps(start, size, seg_base, seg.size), device_,
                ": adopt_shared_region('", name,
                "'): expected memory the caching allocator does not own, but it overlaps the "
                "allocator's segment at ",
                static_cast<const void*>(seg_base));
  }
  auto region = std::make_unique<Region>();
  region->name = name;
  region->base = start;
  region->size = size;
  regions_.push_back(std::move(region));
}

void DeviceAllocator::add_sub_region(const std::string& region, const std::string& name,
                                     size_t offset, size_t size, const Stream& stream) {
  Lock lock(mutex_);
  Region* r = find_region(region);
  FERRY_CHECK(r != nullptr, device_, ": add_sub_region: expected an adopted region, but '", region,
              "' is not one");
  FERRY_CHECK(!name.empty(), device_, ": add_sub_region: expected a non-empty sub-region name");
  for (const auto& sub : r->subs) {
    FERRY_CHECK(sub->name != name, device_, ": add_sub_region: expected a new name, but region '",
                region, "' already has sub-region '", name, "'");
  }
  FERRY_CHECK(offset % kMinBlockSize == 0 && size % kMinBlockSize == 0 && size > 0, device_,
              ": add_sub_region('", name, "'): expected an offset and a positive size that are ",
              "multiples of ", kMinBlockSize, " bytes, but got offset ", offset, " and size ",
              size);
  FERRY_CHECK(offset <= r->size && size <= r->size - offset, device_, ": add_sub_region('", name,
              "'): expected [offset, offset + size) inside region '", region, "' (", r->size,
              " bytes), but got offset ", offset, " and size ", size);
  for (const auto& sub : r->subs) {
    FERRY_CHECK(offset + size <= sub->offset || sub->offset + sub->size <= offset, device_,
                ": add_sub_region('", name, "'): expected bytes clear of the other sub-regions, ",
                "but [", offset, ", ", offset + size, ") overlaps sub-region '", sub->name,
                "' at [", sub->offset, ", ", sub->offset + sub->size, ")");
  }
  const SubRegion* bound = sub_region_of(stream.id());
  FERRY_CHECK(bound == nullptr, device_, ": add_sub_region('", name,
              "'): expected a stream not yet served by a sub-region, but ", stream,
              " is served by sub-region '", bound == nullptr ? "" : bound->name, "' of region '",
              bound == nullptr ? "" : bound->region->name, "'");

  auto sub = std::make_unique<SubRegion>();
  sub->name = name;
  sub->region = r;
  sub->offset = offset;
  sub->size = size;
  sub->stream = stream.id();
  sub->pool.sub_region = sub.get();
  auto* head = new Block();
  head->ptr = r->base + offset;
  head->size = size;
  head->stream = stream.id();
  head->pool = &sub->pool;
  head->free_tick = ++tick_;
  sub->pool.blocks.insert(head);
  segments_.emplace(head->ptr, Segment{size, head, &sub->pool, stream.id(), false, sub.get()});
  stats_.shared_bytes.increase(static_cast<int64_t>(size));
  stream_sub_[static_cast<size_t>(stream.id())] = sub.get();
  r->subs.push_back(std::move(sub));
}

void DeviceAllocator::drop_sub_regions(const std::string& region, const std::string& name,
                                       bool forget_region) {
  Lock lock(mutex_);
  Region* r = nullptr;
  std::vector<SubRegion*> targets;
  // Validate, wait for pending events with the lock released, and validate again: the memory
  // goes to its next user once dropped, so nothing may still be queued against it.
  for (;;) {
    r = find_region(region);
    FERRY_CHECK(r != nullptr, device_, ": dropping sub-regions: expected an adopted region, but '",
                region, "' is not one");
    targets.clear();
    for (const auto& sub : r->subs) {
      if (name.empty() || sub->name == name) targets.push_back(sub.get());
    }
    FERRY_CHECK(name.empty() || !targets.empty(), device_, ": drop_sub_region: region '", region,
                "' has no sub-region '", name, "'");
    std::ostringstream live;
    int live_count = 0;
    bool awaiting = false;
    for (SubRegion* sub : targets) {
      for (const Block* b = segments_.at(r->base + sub->offset).head; b != nullptr; b = b->next) {
        if (b->state == BlockState::kAllocated) {
          live << (live_count++ == 0 ? "" : ", ") << static_cast<const void*>(b->ptr) << " ("
               << format_bytes(b->size) << ", sub-region '" << sub->name << "')";
        }
        awaiting = awaiting || b->state == BlockState::kAwaitingEvents;
      }
    }
    FERRY_CHECK(live_count == 0, device_, ": dropping sub-regions of '", region,
                "': expected no live allocations in them, but ", live_count,
                live_count == 1 ? " is" : " are", " still allocated: ", live.str(),
                ". Free the tensors that use them first; nothing was dropped");
    if (!awaiting) break;
    // Every awaiting block has pending entries, and the synchronization below completes every
    // entry it finds or raises: the loop goes round again only for blocks freed meanwhile.
    FERRY_CHECK(pending_count_ > 0, device_, ": internal error: a block of region '", region,
                "' awaits recorded streams, but nothing is pending");
    synchronize_pending_events(lock);
  }
  for (SubRegion* sub : targets) {
    auto it = segments_.find(r->base + sub->offset);
    Block* head = it->second.head;
    // Every block is free, so the merge rule has folded them all into the head.
    FERRY_CHECK(head->state == BlockState::kFree && head->next == nullptr, device_,
                ": internal error: sub-region '", sub->name, "' is not one free block");
    sub->pool.blocks.erase(head);
    delete head;
    segments_.erase(it);
    stats_.shared_bytes.decrease(static_cast<int64_t>(sub->size));
    stream_sub_[static_cast<size_t>(sub->stream)] = nullptr;
  }
  std::erase_if(r->subs, [&](const std::unique_ptr<SubRegion>& s) {
    return std::find(targets.begin(), targets.end(), s.get()) != targets.end();
  });
  if (forget_region) {
    std::erase_if(regions_, [r](const std::unique_ptr<Region>& p) { return p.get() == r; });
  }
}

std::vector<SharedRegionInfo> DeviceAllocator::shared_regions() const {
  Lock lock(mutex_);
  std::vector<SharedRegionInfo> out;
  for (const auto& r : regions_) {
    SharedRegionInfo info;
    info.name = r->name;
    info.device = device_;
    info.base = r->base;
    info.size = r->size;
    for (const auto& sub : r->subs) {
      SubRegionInfo s;
      s.name = sub->name;
      s.offset = sub->offset;
      s.size = sub->size;
      s.stream = Stream(device_, sub->stream);
      for (const Block* b = segments_.at(r->base + sub->offset).head; b != nullptr; b = b->next) {
        if (b->state == BlockState::kAllocated) {
          s.allocated_bytes += b->size;
          ++s.allocations;
        }
        if (b->state != BlockState::kFree) s.active_bytes += b->size;
      }
      info.sub_regions.push_back(std::move(s));
    }
    std::sort(info.sub_regions.begin(), info.sub_regions.end(),
              [](const SubRegionInfo& a, const SubRegionInfo& b) { return a.offset < b.offset; });
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const SharedRegionInfo& a, const SharedRegionInfo& b) {
    return std::less<void*>()(a.base, b.base);
  });
  return out;
}

}  // namespace detail

void adopt_shared_region(Device device, const std::string& name, void* base, size_t size) {
  const Device d = detail::resolve_device(device, "adopt_shared_region");
  detail::device_allocator(d).adopt_region(name, base, size);
}

void add_sub_region(Device device, const std::string& region, const std::string& name,
                    size_t offset, size_t size, const Stream& stream) {
  const Device d = detail::resolve_device(device, "add_sub_region");
  FERRY_CHECK_AS(DeviceError, stream.device() == d, "add_sub_region('", name,
                 "'): expected a stream on ", d, " (the region's device), but got ", stream);
  detail::device_allocator(d).add_sub_region(region, name, offset, size, stream);
}

void drop_sub_region(Device device, const std::string& region, const std::string& name) {
  FERRY_CHECK(!name.empty(), "drop_sub_region: expected a sub-region name, but got an empty one");
  const Device d = detail::resolve_device(device, "drop_sub_region");
  detail::device_allocator(d).drop_sub_regions(region, name, /*forget_region=*/false);
}

void drop_sub_regions(Device device, const std::string& region) {
  const Device d = detail::resolve_device(device, "drop_sub_regions");
  detail::device_allocator(d).drop_sub_regions(region, "", /*forget_region=*/false);
}

void drop_shared_region(Device device, const std::string& region) {
  const Device d = detail::resolve_device(device, "drop_shared_region");
  detail::device_allocator(d).drop_sub_regions(region, "", /*forget_region=*/true);
}

std::vector<SharedRegionInfo> shared_regions(Device device) {
  const Device d = detail::resolve_device(device, "shared_regions");
  return detail::device_allocator(d).shared_regions();
}

}  // namespace ferry::memory
