// SimBackend: settings, devices, memory, copies, peer access and IPC; registration; sim.h.
// Streams and events are in sim_backend_streams.cc.
#include "ferry/backends/sim/sim_backend.h"

#include <cstdio>

#include "ferry/backends/sim/sim_access.h"
#include "ferry/core/error.h"
#include "ferry/device/runtime.h"

namespace ferry::sim::detail {
namespace {

thread_local int tls_current_device = 0;

bool get_bit(const std::array<std::array<std::atomic<uint64_t>, 2>, kMaxSimDevices>& bits, int row,
             int column) {
  return (bits[row][column / 64].load(std::memory_order_acquire) >> (column % 64)) & 1;
}

void set_bit(std::array<std::array<std::atomic<uint64_t>, 2>, kMaxSimDevices>& bits, int row,
             int column, bool value) {
  const uint64_t mask = uint64_t{1} << (column % 64);
  if (value) {
    bits[row][column / 64].fetch_or(mask, std::memory_order_acq_rel);
  } else {
    bits[row][column / 64].fetch_and(~mask, std::memory_order_acq_rel);
  }
}

std::string describe(const void* ptr, int device) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%p", ptr);
  return std::string(buffer) + (device < 0 ? std::string(" (host memory)")
                                           : " (memory of sim:" + std::to_string(device) + ")");
}

std::unique_ptr<Backend> make_sim_backend() { return std::make_unique<SimBackend>(); }

}  // namespace

FERRY_REGISTER_BACKEND(DeviceType::Sim, &make_sim_backend);

SimBackend& sim_backend() { return static_cast<SimBackend&>(get_backend(DeviceType::Sim)); }

SimBackend::SimBackend() {
  SimConfig initial;
  try {
    initial = SimConfig::from_env();
  } catch (const Error& e) {
    // A bad setting must not make device_count() throw: the sim reports no devices and says
    // why whenever one is used, until configure() installs valid settings.
    env_error_ = e.what();
    initial.devices = 0;
  }
  std::lock_guard<std::mutex> lock(config_mutex_);
  apply(initial);
}

// ---- settings ------------------------------------------------------------------------------

void SimBackend::apply(const SimConfig& c) {
  config_ = c;
  memory_limit_.store(c.memory, std::memory_order_release);
  for (int i = 0; i < kNumLinks; ++i) {
    bandwidth_[i].store(c.bandwidth[i], std::memory_order_relaxed);
    latency_ns_[i].store(c.latency[i].count(), std::memory_order_relaxed);
  }
  for (int i = 0; i < kMaxSimDevices; ++i) {
    for (int j = 0; j < kMaxSimDevices; ++j) {
      set_bit(peer_allowed_, i, j, i < c.devices && j < c.devices && c.peer_allowed(i, j));
      set_bit(peer_enabled_, i, j, false);
    }
  }
  knobs_.chaos_seed.store(c.chaos_seed.value_or(0), std::memory_order_relaxed);
  knobs_.chaos_max_delay_ns.store(c.chaos_max_delay.count(), std::memory_order_relaxed);
  knobs_.chaos_generation.fetch_add(1, std::memory_order_relaxed);
  knobs_.chaos.store(c.chaos_seed.has_value(), std::memory_order_relaxed);
  knobs_.hide_device_memory.store(!c.tsan_sees_device_memory, std::memory_order_relaxed);
  compute_rate_.store(c.compute_rate, std::memory_order_relaxed);
  compute_timing_only_.store(c.compute_timing_only, std::memory_order_relaxed);
  device_count_.store(c.devices, std::memory_order_release);
}

SimConfig SimBackend::config() const {
  std::lock_guard<std::mutex> lock(config_mutex_);
  return config_;
}

void SimBackend::configure(const SimConfig& c) {
  c.validate();
  FERRY_CHECK_AS(DeviceError, !SimStream::on_worker_thread(),
                 "sim::configure: expected to be called from a host thread, not from a host "
                 "function running on a sim stream");
  drain_all_streams();
  {
    std::lock_guard<std::mutex> lock(config_mutex_);
    const bool topology_changes = c.devices != config_.devices || c.memory != config_.memory;
    const size_t live = memory_.live_allocations();
    FERRY_CHECK_AS(DeviceError, !topology_changes || live == 0,
                   "sim::configure: expected no live sim allocations when changing the device "
                   "count or memory size, but ",
                   live, " are live");
    apply(c);
    env_error_.clear();
  }
  forget_peer_access(DeviceType::Sim);
}

std::vector<std::pair<std::string, std::string>> SimBackend::settings() {
  return config().settings();
}

// ---- devices -------------------------------------------------------------------------------

std::string SimBackend::unavailable_reason() {
  std::lock_guard<std::mutex> lock(config_mutex_);
  if (!env_error_.empty()) return env_error_;
  return config_.devices == 0 ? "FERRY_SIM_DEVICES=0" : "";
}

void SimBackend::check_device(int device, const char* call) const {
  const int count = device_count_.load(std::memory_order_acquire);
  FERRY_CHECK_AS(DeviceError, device >= 0 && device < count, "sim:", device, ": ", call,
                 ": expected a device index below ", count, " (FERRY_SIM_DEVICES), but got ",
                 device);
}

int SimBackend::current_device() {
  // A reconfiguration may have removed the device a thread had selected.
  return tls_current_device < device_count() ? tls_current_device : 0;
}

void SimBackend::set_current_device(int device) {
  check_device(device, "set_current_device");
  tls_current_device = device;
}

MemoryInfo SimBackend::memory_info(int device) {
  check_device(device, "memory_info");
  const size_t total = memory_limit_.load(std::memory_order_acquire);
  const size_t used = memory_.used(device);
  return MemoryInfo{used < total ? total - used : 0, total};
}

// ---- memory --------------------------------------------------------------------------------

void* SimBackend::malloc(int device, size_t nbytes) {
  check_device(device, "malloc");
  return memory_.allocate(device, nbytes, memory_limit_.load(std::memory_order_acquire));
}

void SimBackend::free(int device, void* ptr) {
  if (ptr == nullptr) return;
  check_device(device, "free");
  // Like cudaFree, wait for queued work that may still use the memory. A worker thread (a host
  // function dropping the last reference to a tensor) must not wait for streams, itself included;
  // work ordered after it cannot be using memory it is freeing.
  if (!SimStream::on_worker_thread()) drain_all_streams();
  memory_.release(device, ptr, /*imported=*/false);
}

void* SimBackend::malloc_host(size_t nbytes) { return memory_.allocate_pinned(nbytes); }

void SimBackend::free_host(void* ptr) {
  if (ptr == nullptr) return;
  if (!SimStream::on_worker_thread()) drain_all_streams();
  memory_.release_pinned(ptr);
}

void SimBackend::host_register(void* ptr, size_t nbytes) { memory_.register_host(ptr, nbytes); }

void SimBackend::host_unregister(void* ptr) {
  // As free_host: queued copies may still read the range.
  if (!SimStream::on_worker_thread()) drain_all_streams();
  memory_.unregister_host(ptr);
}

void* SimBackend::host_device_pointer(int device, void* ptr, size_t nbytes) {
  check_device(device, "host_device_pointer");
  return memory_.map_host(device, ptr, nbytes);
}

void SimBackend::release_host_device_pointer(int device, void* device_ptr) {
  check_device(device, "release_host_device_pointer");
  // As free: queued kernels may still read through the mapping.
  if (!SimStream::on_worker_thread()) drain_all_streams();
  memory_.unmap_host(device, device_ptr);
}

MemoryRange SimBackend::memory_range(int device, const void* ptr) {
  check_device(device, "memory_range");
  const auto [base, size] = memory_.range_of(device, ptr);
  return MemoryRange{base, size};
}

// ---- copies --------------------------------------------------------------------------------

bool SimBackend::peer_enabled(int device, int peer) const {
  return device == peer || get_bit(peer_enabled_, device, peer);
}

std::chrono::nanoseconds SimBackend::cost(Link link, size_t nbytes) const {
  const auto i = static_cast<size_t>(link);
  int64_t ns = latency_ns_[i].load(std::memory_order_relaxed);
  const double bandwidth = bandwidth_[i].load(std::memory_order_relaxed);
  if (bandwidth > 0) ns += static_cast<int64_t>(static_cast<double>(nbytes) * 1e9 / bandwidth);
  return std::chrono::nanoseconds(ns);
}

void SimBackend::memset(int device, void* dst, int value, size_t nbytes) {
  RawStream stream = default_stream(device);
  memset_async(device, dst, value, nbytes, stream);
  stream_synchronize(device, stream);
}

void SimBackend::memcpy(int device, void* dst, const void* src, size_t nbytes, CopyKind kind) {
  RawStream stream = default_stream(device);
  memcpy_async(device, dst, src, nbytes, kind, stream);
  stream_synchronize(device, stream);
}

void SimBackend::memset_async(int device, void* dst, int value, size_t nbytes, RawStream stream) {
  SimStream& s = stream_of(device, stream, "memset_async");
  if (nbytes == 0) return;
  const Resolved d = memory_.resolve(dst, nbytes, device, "memset_async", "destination");
  FERRY_CHECK_AS(DeviceError, d.device >= 0 && peer_enabled(device, d.device), "sim:", device,
                 ": memset_async: expected device memory of sim:", device,
                 " or of a peer with access enabled, but got ", describe(dst, d.device));
  SimOp op;
  op.kind = SimOp::Kind::kFill;
  op.dst = d.host;
  op.value = value;
  op.nbytes = nbytes;
  op.device_sides = kDstIsDevice;
  s.enqueue(std::move(op), "memset_async");
}

SimOp SimBackend::copy_op(int device, void* dst, const void* src, size_t nbytes, CopyKind kind,
                          const char* call, Link& link, bool& pinned) {
  const Resolved d = memory_.resolve(dst, nbytes, device, call, "destination");
  const Resolved r = memory_.resolve(src, nbytes, device, call, "source");
  SimOp op;
  op.kind = SimOp::Kind::kCopy;
  op.dst = d.device >= 0 ? d.host : dst;
  op.src = r.device >= 0 ? r.host : src;
  op.nbytes = nbytes;
  pinned = true;
  link = Link::DeviceToDevice;
  switch (kind) {
    case CopyKind::HostToDevice:
      FERRY_CHECK_AS(DeviceError, d.device == device && r.device < 0, "sim:", device, ": ", call,
                     "(host-to-device): expected a destination on sim:", device,
                     " (the stream's device) and a host source, but got destination ",
                     describe(dst, d.device), " and source ", describe(src, r.device));
      op.device_sides = kDstIsDevice;
      link = Link::HostToDevice;
      pinned = ferry::is_pinned(src, nbytes);  // by any runtime: CUDA's blocks count too
      break;
    case CopyKind::DeviceToHost:
      FERRY_CHECK_AS(DeviceError, r.device == device && d.device < 0, "sim:", device, ": ", call,
                     "(device-to-host): expected a source on sim:", device,
                     " (the stream's device) and a host destination, but got source ",
                     describe(src, r.device), " and destination ", describe(dst, d.device));
      op.device_sides = kSrcIsDevice;
      link = Link::DeviceToHost;
      pinned = ferry::is_pinned(dst, nbytes);
      break;
    case CopyKind::DeviceToDevice:
      FERRY_CHECK_AS(DeviceError,
                     d.device >= 0 && r.device >= 0 && peer_enabled(device, d.device) &&
                         peer_enabled(device, r.device),
                     "sim:", device, ": ", call,
                     "(device-to-device): expected both sides on sim:", device,
                     " or on peers with access enabled (or use memcpy_peer_async), but got "
                     "destination ",
                     describe(dst, d.device), " and source ", describe(src, r.device));
      op.device_sides = kDstIsDevice | kSrcIsDevice;
      link = d.device == r.device ? Link::DeviceToDevice : Link::Peer;
      // Mapped pinned host memory crosses the host link, whichever address names it.
      if (r.host_mapped) link = Link::HostToDevice;
      if (d.host_mapped) link = Link::DeviceToHost;
      break;
  }
  op.cost = cost(link, nbytes);
  return op;
}

void SimBackend::enqueue_copy(SimStream& s, SimOp&& op, bool pinned, int device, CopyKind kind,
                              const void* host, const char* call) {
  if (pinned) {
    s.enqueue(std::move(op), call);
    return;
  }
  // Pageable host memory, as with cudaMemcpyAsync: the call returns once the copy is done. The
  // copy still takes its turn in the queue (after the work queued before it, before the work
  // other threads queue after it, with chaos delays) on the worker; this thread only waits.
  FERRY_CHECK_AS(DeviceError, !SimStream::on_worker_thread(), "sim:", device, ": ", call, "(",
                 copy_kind_name(kind),
                 "): expected pinned host memory when called from a host function running on a "
                 "sim stream (a pageable copy waits for the stream), but got ",
                 describe(host, -1));
  s.wait(s.enqueue(std::move(op), call));
}

void SimBackend::memcpy_async(int device, void* dst, const void* src, size_t nbytes, CopyKind kind,
                              RawStream stream) {
  SimStream& s = stream_of(device, stream, "memcpy_async");
  if (nbytes == 0) return;
  Link link{};
  bool pinned = true;
  SimOp op = copy_op(device, dst, src, nbytes, kind, "memcpy_async", link, pinned);
  enqueue_copy(s, std::move(op), pinned, device, kind, kind == CopyKind::HostToDevice ? src : dst,
               "memcpy_async");
}

void SimBackend::memcpy_batch_async(int device, std::span<const CopyRange> ranges, CopyKind kind,
                                    RawStream stream) {
  SimStream& s = stream_of(device, stream, "memcpy_batch_async");
  SimOp batch;
  batch.kind = SimOp::Kind::kCopy;
  bool all_pinned = true;
  const void* pageable = nullptr;
  std::chrono::nanoseconds latency{0};
  for (const CopyRange& r : ranges) {
    if (r.nbytes == 0) continue;
    Link link{};
    bool pinned = true;
    SimOp op = copy_op(device, r.dst, r.src, r.nbytes, kind, "memcpy_batch_async", link, pinned);
    if (!pinned && pageable == nullptr) pageable = kind == CopyKind::HostToDevice ? r.src : r.dst;
    all_pinned = all_pinned && pinned;
    // One operation on the link: its cost per copy once (the largest of the links used), and
    // each range's bytes at its link's bandwidth.
    const auto fixed = cost(link, 0);
    latency = std::max(latency, fixed);
    batch.cost += op.cost - fixed;
    batch.device_sides |= op.device_sides;
    batch.nbytes += r.nbytes;
    batch.batch.push_back({op.dst, op.src, op.nbytes});
  }
  if (batch.batch.empty()) return;
  batch.cost += latency;
  enqueue_copy(s, std::move(batch), all_pinned, device, kind, pageable, "memcpy_batch_async");
}

void SimBackend::memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                   size_t nbytes, int stream_device, RawStream stream) {
  SimStream& s = stream_of(stream_device, stream, "memcpy_peer_async");
  check_device(dst_device, "memcpy_peer_async");
  check_device(src_device, "memcpy_peer_async");
  if (nbytes == 0) return;
  const Resolved d =
      memory_.resolve(dst, nbytes, stream_device, "memcpy_peer_async", "destination");
  const Resolved r = memory_.resolve(src, nbytes, stream_device, "memcpy_peer_async", "source");
  FERRY_CHECK_AS(DeviceError, d.device == dst_device && r.device == src_device,
                 "sim:", stream_device,
                 ": memcpy_peer_async: expected a destination on sim:", dst_device,
                 " and a source on sim:", src_device, ", but got destination ",
                 describe(dst, d.device), " and source ", describe(src, r.device));
  SimOp op;
  op.kind = SimOp::Kind::kCopy;
  op.dst = d.host;
  op.src = r.host;
  op.nbytes = nbytes;
  op.device_sides = kDstIsDevice | kSrcIsDevice;
  if (dst_device == src_device) {
    op.cost = cost(Link::DeviceToDevice, nbytes);
  } else if (peer_enabled(src_device, dst_device) || peer_enabled(dst_device, src_device)) {
    op.cost = cost(Link::Peer, nbytes);
  } else {
    // Without peer access the runtime stages the copy through host memory.
    op.cost = cost(Link::DeviceToHost, nbytes) + cost(Link::HostToDevice, nbytes);
  }
  s.enqueue(std::move(op), "memcpy_peer_async");
}

// ---- peer access ---------------------------------------------------------------------------

bool SimBackend::can_access_peer(int device, int peer) {
  check_device(device, "can_access_peer");
  check_device(peer, "can_access_peer");
  return device == peer || get_bit(peer_allowed_, device, peer);
}

void SimBackend::enable_peer_access(int device, int peer) {
  check_device(device, "enable_peer_access");
  check_device(peer, "enable_peer_access");
  if (device == peer) return;
  FERRY_CHECK_AS(DeviceError, get_bit(peer_allowed_, device, peer), "sim:", device,
                 ": enable_peer_access(sim:", peer, "): expected a peer that sim:", device,
                 " may access, but FERRY_SIM_PEER does not allow it");
  set_bit(peer_enabled_, device, peer, true);
}

// ---- IPC -----------------------------------------------------------------------------------

IpcHandle SimBackend::ipc_export(int device, void* ptr) {
  check_device(device, "ipc_export");
  return memory_.export_handle(device, ptr);
}

void* SimBackend::ipc_import(const IpcHandle& handle) {
  FERRY_CHECK_AS(DeviceError, handle.device.is_sim() && handle.device.has_index(),
                 "sim: ipc_import: expected a handle for a sim device, but got one for ",
                 handle.device);
  check_device(handle.device.index(), "ipc_import");
  return memory_.import_handle(handle);
}

void SimBackend::ipc_close(int device, void* ptr) {
  check_device(device, "ipc_close");
  if (!SimStream::on_worker_thread()) drain_all_streams();
  memory_.release(device, ptr, /*imported=*/true);
}

}  // namespace ferry::sim::detail

namespace ferry::sim {

SimConfig config() { return detail::sim_backend().config(); }

ComputeModel compute_model() { return detail::sim_backend().compute_model(); }
bool is_host_mapped(const void* device_ptr) {
  return detail::sim_backend().is_host_mapped(device_ptr);
}

void configure(const SimConfig& config) { detail::sim_backend().configure(config); }

void reset_config() { detail::sim_backend().configure(SimConfig::from_env()); }

void* host_address(const void* device_ptr) {
  return detail::sim_backend().host_address(device_ptr);
}

int device_of(const void* device_ptr) { return detail::sim_backend().device_of(device_ptr); }

bool peer_access_enabled(int device, int peer) {
  return detail::sim_backend().peer_enabled(device, peer);
}

uint64_t pending_operations(int device, void* stream) {
  return detail::sim_backend().pending_operations(device, stream);
}

}  // namespace ferry::sim
