// Shared regions: the per-device registry of adopted regions and their sub-regions (each a
// FixedRangeResource over the region's bytes, reached through its MemPool), and dropping them
// all or nothing without freeing the memory.
#include "ferry/memory/shared_region.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/device_allocator.h"
#include "ferry/memory/fixed_range_resource.h"

namespace ferry::memory {
namespace {

struct SubRegionEntry {
  std::string name;
  size_t offset = 0;
  size_t size = 0;
  std::shared_ptr<FixedRangeResource> range;
};

struct RegionEntry {
  std::string name;
  char* base = nullptr;
  size_t size = 0;
  std::vector<SubRegionEntry> subs;
};

// Every device's regions behind one mutex: region operations are rare, and allocations never
// take it (they go to the sub-region's resource directly).
struct RegionRegistry {
  std::mutex mutex;
  std::map<std::pair<int, int>, std::vector<std::unique_ptr<RegionEntry>>> regions;

  std::vector<std::unique_ptr<RegionEntry>>& of(Device d) {
    return regions[{static_cast<int>(d.type()), static_cast<int>(d.index())}];
  }
};

RegionRegistry& region_registry() {
  // Never destroyed: sub-region tensors freed by static destructors at exit still find theirs.
  static auto* registry = new RegionRegistry();
  return *registry;
}

RegionEntry* find_region_entry(std::vector<std::unique_ptr<RegionEntry>>& regions,
                               const std::string& name) {
  for (const auto& r : regions) {
    if (r->name == name) return r.get();
  }
  return nullptr;
}

bool ranges_overlap(const char* a, size_t a_size, const char* b, size_t b_size) {
  return a < b + b_size && b < a + a_size;
}

RegionEntry& existing_region(Device d, std::vector<std::unique_ptr<RegionEntry>>& regions,
                             const std::string& name, const char* what) {
  RegionEntry* r = find_region_entry(regions, name);
  FERRY_CHECK(r != nullptr, d, ": ", what, ": expected an adopted region, but '", name,
              "' is not one");
  return *r;
}

void drop(Device device, const std::string& region, const std::string& name, bool forget_region,
          const char* what) {
  const Device d = detail::resolve_device(device, what);
  RegionRegistry& reg = region_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto& regions = reg.of(d);
  RegionEntry& r = existing_region(d, regions, region, what);
  std::vector<FixedRangeResource*> targets;
  for (const SubRegionEntry& sub : r.subs) {
    if (name.empty() || sub.name == name) targets.push_back(sub.range.get());
  }
  FERRY_CHECK(name.empty() || !targets.empty(), d, ": ", what, ": region '", region,
              "' has no sub-region '", name, "'");
  std::ostringstream context;
  context << d << ": dropping sub-regions of '" << region << "'";
  FixedRangeResource::close_all(targets, context.str());
  int64_t dropped_bytes = 0;
  std::erase_if(r.subs, [&](const SubRegionEntry& sub) {
    const bool target = std::find(targets.begin(), targets.end(), sub.range.get()) != targets.end();
    if (target) dropped_bytes += static_cast<int64_t>(sub.size);
    return target;
  });
  detail::device_allocator(d).add_shared_bytes(-dropped_bytes);
  if (forget_region) {
    std::erase_if(regions, [&](const std::unique_ptr<RegionEntry>& p) { return p.get() == &r; });
  }
}

}  // namespace

void adopt_shared_region(Device device, const std::string& name, void* base, size_t size) {
  const Device d = detail::resolve_device(device, "adopt_shared_region");
  auto* start = static_cast<char*>(base);
  FERRY_CHECK(!name.empty(), d, ": adopt_shared_region: expected a non-empty name");
  FERRY_CHECK(base != nullptr && reinterpret_cast<uintptr_t>(base) % kMinBlockSize == 0, d,
              ": adopt_shared_region('", name, "'): expected a base address aligned to ",
              kMinBlockSize, " bytes, but got ", base);
  FERRY_CHECK(size > 0 && reinterpret_cast<uintptr_t>(base) <= UINTPTR_MAX - size, d,
              ": adopt_shared_region('", name, "'): expected a positive size that fits after ",
              base, ", but got ", size);
  RegionRegistry& reg = region_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto& regions = reg.of(d);
  FERRY_CHECK(find_region_entry(regions, name) == nullptr, d,
              ": adopt_shared_region: expected a new name, but region '", name,
              "' is already adopted");
  for (const auto& r : regions) {
    FERRY_CHECK(!ranges_overlap(start, size, r->base, r->size), d, ": adopt_shared_region('", name,
                "'): expected memory clear of other regions, but [", base, ", +", size,
                ") overlaps region '", r->name, "'");
  }
  const char* segment = detail::device_allocator(d).overlapping_segment(start, size);
  FERRY_CHECK(segment == nullptr, d, ": adopt_shared_region('", name,
              "'): expected memory the caching allocator does not own, but it overlaps the "
              "allocator's segment at ",
              static_cast<const void*>(segment));
  auto region = std::make_unique<RegionEntry>();
  region->name = name;
  region->base = start;
  region->size = size;
  regions.push_back(std::move(region));
}

MemPool add_sub_region(Device device, const std::string& region, const std::string& name,
                       size_t offset, size_t size) {
  const Device d = detail::resolve_device(device, "add_sub_region");
  RegionRegistry& reg = region_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  RegionEntry& r = existing_region(d, reg.of(d), region, "add_sub_region");
  FERRY_CHECK(!name.empty(), d, ": add_sub_region: expected a non-empty sub-region name");
  for (const SubRegionEntry& sub : r.subs) {
    FERRY_CHECK(sub.name != name, d, ": add_sub_region: expected a new name, but region '", region,
                "' already has sub-region '", name, "'");
  }
  FERRY_CHECK(offset % kMinBlockSize == 0 && size % kMinBlockSize == 0 && size > 0, d,
              ": add_sub_region('", name, "'): expected an offset and a positive size that are ",
              "multiples of ", kMinBlockSize, " bytes, but got offset ", offset, " and size ",
              size);
  FERRY_CHECK(offset <= r.size && size <= r.size - offset, d, ": add_sub_region('", name,
              "'): expected [offset, offset + size) inside region '", region, "' (", r.size,
              " bytes), but got offset ", offset, " and size ", size);
  for (const SubRegionEntry& sub : r.subs) {
    FERRY_CHECK(offset + size <= sub.offset || sub.offset + sub.size <= offset, d,
                ": add_sub_region('", name, "'): expected bytes clear of the other sub-regions, ",
                "but [", offset, ", ", offset + size, ") overlaps sub-region '", sub.name, "' at [",
                sub.offset, ", ", sub.offset + sub.size, ")");
  }
  auto range = std::make_shared<FixedRangeResource>(
      d, r.base + offset, size, "sub-region '" + name + "' of region '" + region + "'");
  r.subs.push_back(SubRegionEntry{name, offset, size, range});
  detail::device_allocator(d).add_shared_bytes(static_cast<int64_t>(size));
  return MemPool(std::move(range));
}

MemPool sub_region_pool(Device device, const std::string& region, const std::string& name) {
  const Device d = detail::resolve_device(device, "sub_region_pool");
  RegionRegistry& reg = region_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  RegionEntry& r = existing_region(d, reg.of(d), region, "sub_region_pool");
  for (const SubRegionEntry& sub : r.subs) {
    if (sub.name == name) return MemPool(sub.range);
  }
  FERRY_FAIL_AS(Error, d, ": sub_region_pool: region '", region, "' has no sub-region '", name,
                "'");
}

void drop_sub_region(Device device, const std::string& region, const std::string& name) {
  FERRY_CHECK(!name.empty(), "drop_sub_region: expected a sub-region name, but got an empty one");
  drop(device, region, name, /*forget_region=*/false, "drop_sub_region");
}

void drop_sub_regions(Device device, const std::string& region) {
  drop(device, region, "", /*forget_region=*/false, "drop_sub_regions");
}

void drop_shared_region(Device device, const std::string& region) {
  drop(device, region, "", /*forget_region=*/true, "drop_shared_region");
}

std::vector<SharedRegionInfo> shared_regions(Device device) {
  const Device d = detail::resolve_device(device, "shared_regions");
  RegionRegistry& reg = region_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::vector<SharedRegionInfo> out;
  for (const auto& r : reg.of(d)) {
    SharedRegionInfo info;
    info.name = r->name;
    info.device = d;
    info.base = r->base;
    info.size = r->size;
    for (const SubRegionEntry& sub : r->subs) {
      const FixedRangeStats st = sub.range->stats();
      info.sub_regions.push_back(SubRegionInfo{
          sub.name, sub.offset, sub.size, static_cast<size_t>(st.allocated_bytes.current),
          st.allocation.current, static_cast<size_t>(st.active_bytes.current)});
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

namespace detail {

std::vector<SegmentInfo> shared_region_segments(Device device) {
  RegionRegistry& reg = region_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::vector<SegmentInfo> out;
  for (const auto& r : reg.of(device)) {
    for (const SubRegionEntry& sub : r->subs) {
      SegmentInfo seg;
      seg.address = sub.range->base();
      seg.size = sub.size;
      seg.shared_region = r->name;
      seg.sub_region = sub.name;
      seg.blocks = sub.range->blocks();
      for (const BlockInfo& b : seg.blocks) {
        if (b.state == BlockState::kAllocated) seg.allocated_bytes += b.size;
        if (b.state != BlockState::kFree) seg.active_bytes += b.size;
      }
      out.push_back(std::move(seg));
    }
  }
  return out;
}

void check_shared_region_invariants(Device device) {
  RegionRegistry& reg = region_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  int64_t bytes = 0;
  for (const auto& r : reg.of(device)) {
    for (const SubRegionEntry& sub : r->subs) {
      sub.range->check_invariants();
      bytes += static_cast<int64_t>(sub.size);
    }
  }
  const int64_t counted = device_allocator(device).stats().shared_bytes.current;
  FERRY_CHECK(counted == bytes, device, ": shared-region invariant violated: stats say ",
              "shared_bytes = ", counted, ", but the sub-regions add up to ", bytes);
}

}  // namespace detail

}  // namespace ferry::memory
