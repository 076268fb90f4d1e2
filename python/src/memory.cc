// ferry._C._memory, re-exported as ferry.memory: the caching device allocator's statistics,
// snapshots and controls per device, the pinned host allocator's, and the backend's free/total
// memory. Calls that wait for queued work (empty_cache) release the GIL.
#include <string>

#include "bindings.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/memory/stats.h"

namespace ferry::python {
namespace {

py::dict stat_dict(const memory::Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

py::dict stats_dict(const memory::Stats& s) {
  py::dict d;
  d["allocation"] = stat_dict(s.allocation);
  d["allocated_bytes"] = stat_dict(s.allocated_bytes);
  d["requested_bytes"] = stat_dict(s.requested_bytes);
  d["active"] = stat_dict(s.active);
  d["active_bytes"] = stat_dict(s.active_bytes);
  d["segment"] = stat_dict(s.segment);
  d["reserved_bytes"] = stat_dict(s.reserved_bytes);
  d["shared_bytes"] = stat_dict(s.shared_bytes);
  d["oversize_allocations"] = stat_dict(s.oversize_allocations);
  d["oversize_segments"] = stat_dict(s.oversize_segments);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["num_gc_frees"] = s.num_gc_frees;
  d["num_release_waits"] = s.num_release_waits;
  d["num_event_record_failures"] = s.num_event_record_failures;
  d["max_split_size"] = s.max_split_size;
  return d;
}

py::list snapshot_list(const memory::Snapshot& snap) {
  py::list segments;
  for (const memory::SegmentInfo& seg : snap.segments) {
    py::dict s;
    s["address"] = reinterpret_cast<uintptr_t>(seg.address);
    s["size"] = seg.size;
    s["stream"] = seg.stream;
    s["is_large"] = seg.is_large;
    s["shared_region"] = seg.shared_region;
    s["sub_region"] = seg.sub_region;
    s["allocated_bytes"] = seg.allocated_bytes;
    s["active_bytes"] = seg.active_bytes;
    py::list blocks;
    for (const memory::BlockInfo& b : seg.blocks) {
      py::dict block;
      block["address"] = reinterpret_cast<uintptr_t>(b.address);
      block["size"] = b.size;
      block["requested_size"] = b.requested_size;
      block["state"] = std::string(memory::block_state_name(b.state));
      blocks.append(block);
    }
    s["blocks"] = blocks;
    segments.append(s);
  }
  return segments;
}

}  // namespace

void bind_memory(py::module_& m) {
  py::module_ mem = m.def_submodule("_memory", "ferry.memory's functions");
  using Release = py::call_guard<py::gil_scoped_release>;
  mem.def(
      "stats", [](Device d) { return stats_dict(memory::stats(d)); }, py::arg("device"),
      "The caching allocator's counters for a device, as nested dicts "
      "(stats(d)['allocated_bytes']['current']).");
  mem.def(
      "memory_allocated", [](Device d) { return memory::stats(d).allocated_bytes.current; },
      py::arg("device"));
  mem.def(
      "max_memory_allocated", [](Device d) { return memory::stats(d).allocated_bytes.peak; },
      py::arg("device"));
  mem.def(
      "memory_reserved", [](Device d) { return memory::stats(d).reserved_bytes.current; },
      py::arg("device"));
  mem.def(
      "max_memory_reserved", [](Device d) { return memory::stats(d).reserved_bytes.peak; },
      py::arg("device"));
  mem.def("reset_peak_stats", &memory::reset_peak_stats, py::arg("device"));
  mem.def("reset_accumulated_stats", &memory::reset_accumulated_stats, py::arg("device"));
  mem.def("empty_cache", &memory::empty_cache, py::arg("device"), Release());
  mem.def("set_per_process_memory_fraction", &memory::set_memory_fraction, py::arg("fraction"),
          py::arg("device"));
  mem.def("memory_fraction", &memory::memory_fraction, py::arg("device"));
  mem.def(
      "snapshot", [](Device d) { return snapshot_list(memory::snapshot(d)); }, py::arg("device"));
  mem.def("check_invariants", &memory::check_invariants, py::arg("device"));
  mem.def(
      "mem_get_info",
      [](Device d) {
        const MemoryInfo info = memory_info(d);
        return py::make_tuple(info.free, info.total);
      },
      py::arg("device"), "(free, total) bytes of the device, as its backend reports them.");
  mem.def("pinned_stats", [] {
    const memory::PinnedStats s = memory::pinned_stats();
    py::dict d;
    d["allocation"] = stat_dict(s.allocation);
    d["allocated_bytes"] = stat_dict(s.allocated_bytes);
    d["requested_bytes"] = stat_dict(s.requested_bytes);
    d["segment"] = stat_dict(s.segment);
    d["reserved_bytes"] = stat_dict(s.reserved_bytes);
    d["num_cache_hits"] = s.num_cache_hits;
    d["num_host_alloc"] = s.num_host_alloc;
    d["num_host_free"] = s.num_host_free;
    d["pending_events"] = s.pending_events;
    d["num_event_record_failures"] = s.num_event_record_failures;
    return d;
  });
  mem.def("pinned_empty_cache", &memory::pinned_empty_cache, Release());
  mem.def(
      "format_bytes", [](size_t n) { return memory::format_bytes(n); }, py::arg("bytes"));
}

}  // namespace ferry::python
