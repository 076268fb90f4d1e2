// The caching allocator as a MemoryResource, and its per-device management functions: each call
// goes to the device's DeviceAllocator (device_allocator.h), picked by the stream or device.
#include "ferry/memory/caching_allocator.h"

#include <algorithm>
#include <functional>

#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/device_allocator.h"
#include "ferry/memory/shared_region.h"

namespace ferry::memory {

namespace detail {

Device resolve_device(Device device, const char* what) {
  FERRY_CHECK_AS(DeviceError, !device.is_cpu(), what,
                 ": expected a sim or cuda device (the caching allocator serves device memory), "
                 "but got cpu");
  return checked_device(device);
}

}  // namespace detail

CachingAllocator& CachingAllocator::instance() {
  // Never destroyed: storages released by static destructors at exit still reach it.
  static CachingAllocator* allocator = new CachingAllocator();
  return *allocator;
}

void* CachingAllocator::do_allocate(size_t bytes, const Stream& stream) {
  return detail::device_allocator(stream.device()).malloc(bytes, stream);
}

void CachingAllocator::do_deallocate(void* ptr, size_t bytes, const Stream& stream) {
  detail::device_allocator(stream.device()).free(ptr, bytes, stream);
}

bool CachingAllocator::do_record_stream(void* ptr, const Stream& allocation_stream,
                                        const Stream& stream) {
  FERRY_CHECK_AS(DeviceError,
                 stream.is_cpu() || stream.device_type() == allocation_stream.device_type(),
                 "record_stream: expected a stream of the memory's device type (",
                 allocation_stream.device_type(), "), but got ", stream);
  detail::device_allocator(allocation_stream.device()).record_stream(ptr, stream);
  return true;
}

Stats CachingAllocator::stats(Device device) const {
  return detail::device_allocator(detail::resolve_device(device, "stats")).stats();
}

void CachingAllocator::reset_peak_stats(Device device) {
  detail::device_allocator(detail::resolve_device(device, "reset_peak_stats")).reset_peak_stats();
}

void CachingAllocator::reset_accumulated_stats(Device device) {
  detail::device_allocator(detail::resolve_device(device, "reset_accumulated_stats"))
      .reset_accumulated_stats();
}

void CachingAllocator::empty_cache(Device device) {
  detail::device_allocator(detail::resolve_device(device, "empty_cache")).empty_cache();
}

void CachingAllocator::set_memory_fraction(double fraction, Device device) {
  detail::device_allocator(detail::resolve_device(device, "set_memory_fraction"))
      .set_memory_fraction(fraction);
}

std::optional<double> CachingAllocator::memory_fraction(Device device) const {
  return detail::device_allocator(detail::resolve_device(device, "memory_fraction"))
      .memory_fraction();
}

Snapshot CachingAllocator::snapshot(Device device) const {
  const Device d = detail::resolve_device(device, "snapshot");
  Snapshot snap = detail::device_allocator(d).snapshot();
  // Sub-regions are resources of their own; the snapshot shows them beside the segments.
  for (SegmentInfo& seg : detail::shared_region_segments(d))
    snap.segments.push_back(std::move(seg));
  std::sort(snap.segments.begin(), snap.segments.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) {
              return std::less<void*>()(a.address, b.address);
            });
  return snap;
}

void CachingAllocator::check_invariants(Device device) const {
  const Device d = detail::resolve_device(device, "check_invariants");
  detail::device_allocator(d).check_invariants();
  detail::check_shared_region_invariants(d);
}

MemoryResource* caching_allocator() { return &CachingAllocator::instance(); }

Stats stats(Device device) { return CachingAllocator::instance().stats(device); }
void reset_peak_stats(Device device) { CachingAllocator::instance().reset_peak_stats(device); }
void reset_accumulated_stats(Device device) {
  CachingAllocator::instance().reset_accumulated_stats(device);
}
void empty_cache(Device device) { CachingAllocator::instance().empty_cache(device); }
void set_memory_fraction(double fraction, Device device) {
  CachingAllocator::instance().set_memory_fraction(fraction, device);
}
std::optional<double> memory_fraction(Device device) {
  return CachingAllocator::instance().memory_fraction(device);
}
Snapshot snapshot(Device device) { return CachingAllocator::instance().snapshot(device); }
void check_invariants(Device device) { CachingAllocator::instance().check_invariants(device); }

}  // namespace ferry::memory
