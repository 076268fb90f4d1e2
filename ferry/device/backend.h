// The device contract: the primitives a backend (sim, CUDA) offers, and the registry that maps
// a DeviceType to its backend. The contract holds no policy: no caching, no copy decisions, no
// implicit ordering beyond what a GPU runtime gives. Everything above (Stream, Event, guards,
// allocators, copies) is shared by all backends and talks to them only through this interface.
//
// Invariants every backend keeps:
// - Every method is thread-safe. Device indices passed in are valid (the caller checks them
//   with checked_device() in ferry/device/runtime.h); backends still check cheaply.
// - Failures raise ferry::DeviceError (OutOfMemoryError for allocations) whose message starts
//   with the device and names the call, e.g. "sim:1: memcpy_async: ..." or
//   "cuda:0: cudaMalloc(1048576 bytes) failed: out of memory".
// - Work enqueued on one stream runs in order; work on different streams is unordered unless a
//   stream waits on an event. Nothing synchronizes implicitly with the host except the calls
//   documented as synchronous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/ipc_handle.h"

namespace ferry {

// Opaque backend handles. CUDA: cudaStream_t / cudaEvent_t (the legacy default stream is null);
// sim: pointers to its own stream and event objects.
using RawStream = void*;
using RawEvent = void*;

enum class CopyKind : uint8_t { HostToDevice, DeviceToHost, DeviceToDevice };

// One range of a batched copy (Backend::memcpy_batch_async).
struct CopyRange {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t nbytes = 0;
};
// "host-to-device", "device-to-host", "device-to-device".
std::string_view copy_kind_name(CopyKind kind);

struct MemoryInfo {
  size_t free = 0;
  size_t total = 0;
};

// The allocation holding a device address: its first byte and its size in bytes.
struct MemoryRange {
  void* base = nullptr;
  size_t size = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceType type() const = 0;
  // How error messages name the device kind: "sim", "CUDA".
  virtual std::string_view display_name() const = 0;

  // ---- devices -------------------------------------------------------------------------------
  // Never throws: 0 when the runtime is unusable (no driver, no GPU).
  virtual int device_count() = 0;
  // Why device_count() is 0 (e.g. "cudaGetDeviceCount: CUDA driver version is insufficient
  // ..."); empty when devices exist.
  virtual std::string unavailable_reason() = 0;
  // The calling thread's current device (like cudaGetDevice / cudaSetDevice).
  virtual int current_device() = 0;
  virtual void set_current_device(int device) = 0;
  // Blocks until all work queued on every stream of `device` is done.
  virtual void device_synchronize(int device) = 0;
  virtual MemoryInfo memory_info(int device) = 0;
  // The backend's active settings as (name, value) pairs, for `ferry devices`.
  virtual std::vector<std::pair<std::string, std::string>> settings() { return {}; }
  // Whether the device's copies and kernels are carried out by host threads (the sim) rather
  // than by engines of their own (a GPU's copy engines and SMs): work overlapping a transfer then
  // needs a host CPU the transfer does not use.
  virtual bool runs_on_host_cpus() const { return false; }

  // ---- memory --------------------------------------------------------------------------------
  // Device memory; nbytes == 0 returns nullptr. Freeing waits for queued work that may still
  // use the memory (as cudaFree does).
  virtual void* malloc(int device, size_t nbytes) = 0;
  virtual void free(int device, void* ptr) = 0;
  // Page-locked host memory, usable by asynchronous copies without staging.
  virtual void* malloc_host(size_t nbytes) = 0;
  virtual void free_host(void* ptr) = 0;
  // True for any address inside a live malloc_host block of this backend.
  virtual bool is_pinned(const void* ptr) = 0;
  // True when all of [ptr, ptr + nbytes) is page-locked memory of this backend (nbytes 0: as
  // is_pinned(ptr)). The default asks about the first and the last byte, for runtimes that do not
  // report block extents; a backend that knows its blocks overrides it with an exact answer.
  virtual bool is_pinned_range(const void* ptr, size_t nbytes);
  // Page-locks [ptr, ptr + nbytes) of host memory this backend did not allocate (a memfd mapping,
  // a file mapping), so that is_pinned reports it and asynchronous copies take the pinned path
  // (CUDA: cudaHostRegister, portable). Raises DeviceError when the range is empty, not mapped,
  // or overlaps memory already pinned or registered. host_unregister takes the `ptr` given to
  // host_register, waits for queued work (as free_host does), and raises for anything else.
  // The defaults raise "not supported".
  virtual void host_register(void* ptr, size_t nbytes);
  virtual void host_unregister(void* ptr);
  // Mapped pinned memory (direct host access): an address on `device` for [ptr, ptr + nbytes) of
  // pinned or registered host memory, which kernels on `device` take as a device operand and
  // read (and write) in place over the host link, without a copy (CUDA: cudaHostGetDevicePointer;
  // the memory is allocated and registered mapped). Raises DeviceError when the range is empty or
  // not wholly pinned/registered memory of this backend. release_host_device_pointer takes an
  // address host_device_pointer returned, waits for queued work (as free does), and invalidates
  // it; the host memory stays the caller's and must outlive the mapping. The defaults raise
  // "not supported".
  virtual void* host_device_pointer(int device, void* ptr, size_t nbytes);
  virtual void release_host_device_pointer(int device, void* device_ptr);

  // Synchronous with respect to the host: returns when the bytes are written (and the work queued
  // before on the device's default stream is done), whatever kind of memory is involved.
  virtual void memset(int device, void* dst, int value, size_t nbytes) = 0;
  virtual void memcpy(int device, void* dst, const void* src, size_t nbytes, CopyKind kind) = 0;
  // Stream-ordered. `device` is the stream's device. With pageable (not pinned) host memory,
  // host-to-device copies return once the source has been read and device-to-host copies once
  // the destination is written, as with cudaMemcpyAsync; with pinned memory they only enqueue.
  virtual void memset_async(int device, void* dst, int value, size_t nbytes, RawStream stream) = 0;
  virtual void memcpy_async(int device, void* dst, const void* src, size_t nbytes, CopyKind kind,
                            RawStream stream) = 0;
  // Device-to-device across devices; works without peer access (the runtime stages it).
  virtual void memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                 size_t nbytes, int stream_device, RawStream stream) = 0;
  // Many copies of one kind as one stream-ordered operation (CUDA 12.8 and later:
  // cudaMemcpyBatchAsync, sources read in stream order): one per-copy cost on the link instead
  // of one per range. The ranges run in no particular order, so no range may write bytes another
  // reads or writes. memcpy_async's rule for pageable memory applies to the whole batch: it
  // returns once done when any host range is pageable. Each range is checked as memcpy_async
  // checks its one. The default issues one memcpy_async per range.
  virtual void memcpy_batch_async(int device, std::span<const CopyRange> ranges, CopyKind kind,
                                  RawStream stream);
  // The malloc() block of `device` (or the ipc_import mapping) that holds `ptr`, interior
  // addresses included; raises DeviceError for an address outside every allocation of `device`
  // (past-the-end addresses included). The default raises "not supported".
  virtual MemoryRange memory_range(int device, const void* ptr);

  // ---- streams -------------------------------------------------------------------------------
  // The device's default stream (CUDA: the legacy null stream).
  virtual RawStream default_stream(int device) = 0;
  virtual RawStream stream_create(int device) = 0;
  // A stream whose work the device prefers over lower-priority streams' (CUDA: lower numbers are
  // higher priorities, cudaStreamCreateWithPriority). `priority` must lie in
  // stream_priority_range(device). The defaults: {0, 0}, and stream_create for priority 0.
  virtual RawStream stream_create_with_priority(int device, int priority);
  // {least, greatest} priority (CUDA: e.g. {0, -5}).
  virtual std::pair<int, int> stream_priority_range(int device);
  // Waits for queued work, then releases the stream. The default stream is never destroyed (the
  // call is a no-op for it).
  virtual void stream_destroy(int device, RawStream stream) = 0;
  // True when all work queued on the stream is done.
  virtual bool stream_query(int device, RawStream stream) = 0;
  virtual void stream_synchronize(int device, RawStream stream) = 0;
  // Work queued on `stream` after this call waits until `event`'s last record completes; the
  // event may belong to another device. An event never recorded is complete.
  virtual void stream_wait_event(int device, RawStream stream, RawEvent event) = 0;
  // Runs `fn` on a host thread once the work queued before it is done, in stream order; later
  // work waits for it. `fn` must not call into the backend (as with cudaLaunchHostFunc).
  virtual void launch_host_func(int device, RawStream stream, std::function<void()> fn) = 0;

  // ---- events --------------------------------------------------------------------------------
  virtual RawEvent event_create(int device, bool enable_timing) = 0;
  virtual void event_destroy(int device, RawEvent event) = 0;
  // `stream` must be on `device`, the event's device.
  virtual void event_record(int device, RawEvent event, RawStream stream) = 0;
  virtual bool event_query(int device, RawEvent event) = 0;
  virtual void event_synchronize(int device, RawEvent event) = 0;
  // Milliseconds between two completed timing events of `device`.
  virtual float event_elapsed_ms(int device, RawEvent start, RawEvent end) = 0;

  // Events shared between processes (never timing events). The exporter creates one with
  // event_create_interprocess and sends event_ipc_export's handle over the IPC channel; the
  // importer's event_ipc_import returns an event of handle.device that every event call accepts
  // (destroy it with event_destroy). A record in either process is seen by both: waits, queries
  // and synchronizes cover the last record made before them in any process. The defaults raise
  // "not supported". What happens when the recording process dies with a record pending is the
  // backend's to document (sim: the wait ends with a DeviceError naming the event).
  virtual RawEvent event_create_interprocess(int device);
  virtual IpcHandle event_ipc_export(int device, RawEvent event);
  virtual RawEvent event_ipc_import(const IpcHandle& handle);

  // ---- peer access ---------------------------------------------------------------------------
  virtual bool can_access_peer(int device, int peer) = 0;
  // Lets kernels on `device` read and write `peer`'s memory. Idempotent.
  virtual void enable_peer_access(int device, int peer) = 0;

  // ---- IPC -----------------------------------------------------------------------------------
  // `ptr` must be the start of a malloc() block of `device`.
  virtual IpcHandle ipc_export(int device, void* ptr) = 0;
  // Maps an exported allocation into this process on handle.device; returns its address.
  virtual void* ipc_import(const IpcHandle& handle) = 0;
  // Unmaps an ipc_import() address (after waiting for queued work, as free does).
  virtual void ipc_close(int device, void* ptr) = 0;

 private:
  [[noreturn]] void unsupported(const char* call) const;
};

// ---- the registry --------------------------------------------------------------------------

using BackendFactory = std::unique_ptr<Backend> (*)();

// Called from a static initializer in the backend's own .cc. Registering also installs a
// non-caching allocator for `type` (ferry/device/raw_device_allocator.h) unless one is set.
void register_backend(DeviceType type, BackendFactory factory);

// True when a backend for `type` is compiled in (CPU has none: it needs no runtime).
bool has_backend(DeviceType type);

// The backend for `type`, created on first use (thread-safe; creation errors such as a bad
// FERRY_SIM_* setting propagate and are retried on the next call). Raises DeviceError when no
// backend is registered. Backends live until the process exits.
Backend& get_backend(DeviceType type);

// Like get_backend but returns nullptr when no backend is registered.
Backend* find_backend(DeviceType type);

// The backend for `type` if it has been created (or replaced for testing), without creating it:
// for work that concerns only backends already in use, such as draining them at exit.
Backend* created_backend(DeviceType type);

// For tests only: makes `backend` (not owned; nullptr removes the replacement) serve `type` in
// place of the registered backend, also when none is registered, and returns the replacement it
// displaces. Backend handles cached above the contract (streams, events, peer access) are not
// reset, so a test replaces a backend only for a device type that is otherwise unused.
Backend* replace_backend_for_testing(DeviceType type, Backend* backend);

struct BackendRegistrar {
  BackendRegistrar(DeviceType type, BackendFactory factory) { register_backend(type, factory); }
};

}  // namespace ferry

#define FERRY_BACKEND_CONCAT_INNER(a, b) a##b
#define FERRY_BACKEND_CONCAT(a, b) FERRY_BACKEND_CONCAT_INNER(a, b)
// FERRY_REGISTER_BACKEND(DeviceType::Sim, &make_sim_backend); at namespace scope in a .cc.
#define FERRY_REGISTER_BACKEND(type, factory)                                                      \
  static const ::ferry::BackendRegistrar FERRY_BACKEND_CONCAT(ferry_backend_registrar_, __LINE__)( \
      type, factory)
