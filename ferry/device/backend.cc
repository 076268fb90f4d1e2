// The backend registry: one lazily created backend per device type.
#include "ferry/device/backend.h"

#include <array>
#include <atomic>
#include <mutex>

#include "ferry/core/error.h"
#include "ferry/device/raw_device_allocator.h"

namespace ferry {
namespace {

struct Slot {
  BackendFactory factory = nullptr;  // written during static initialization only
  std::atomic<Backend*> backend{nullptr};
  std::atomic<Backend*> replacement{nullptr};  // replace_backend_for_testing
  std::mutex create_mutex;
};

std::array<Slot, kNumDeviceTypes>& slots() {
  static std::array<Slot, kNumDeviceTypes> registry;
  return registry;
}

Slot& slot(DeviceType type) {
  const auto index = static_cast<size_t>(type);
  FERRY_CHECK_AS(DeviceError, index < kNumDeviceTypes, "expected a device type below ",
                 kNumDeviceTypes, ", but got ", static_cast<int>(type));
  return slots()[index];
}

}  // namespace

std::string_view copy_kind_name(CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice:
      return "host-to-device";
    case CopyKind::DeviceToHost:
      return "device-to-host";
    case CopyKind::DeviceToDevice:
      return "device-to-device";
  }
  return "unknown copy kind";
}

void register_backend(DeviceType type, BackendFactory factory) {
  FERRY_CHECK_AS(DeviceError, type != DeviceType::CPU && factory != nullptr,
                 "expected a non-CPU device type and a factory, but got ", type);
  Slot& s = slot(type);
  FERRY_CHECK_AS(DeviceError, s.factory == nullptr, "a ", type,
                 " backend is already registered; expected one per device type");
  s.factory = factory;
  install_raw_device_allocator(type);
}

bool Backend::is_pinned_range(const void* ptr, size_t nbytes) {
  if (!is_pinned(ptr)) return false;
  return nbytes <= 1 || is_pinned(static_cast<const char*>(ptr) + (nbytes - 1));
}

void Backend::unsupported(const char* call) const {
  FERRY_FAIL_AS(DeviceError, display_name(), ": ", call,
                ": expected a backend that supports it, but this one does not");
}

void Backend::host_register(void* /*ptr*/, size_t /*nbytes*/) { unsupported("host_register"); }
void Backend::host_unregister(void* /*ptr*/) { unsupported("host_unregister"); }
void* Backend::host_device_pointer(int /*device*/, void* /*ptr*/, size_t /*nbytes*/) {
  unsupported("host_device_pointer");
}
void Backend::release_host_device_pointer(int /*device*/, void* /*device_ptr*/) {
  unsupported("release_host_device_pointer");
}
void Backend::memcpy_batch_async(int device, std::span<const CopyRange> ranges, CopyKind kind,
                                 RawStream stream) {
  for (const CopyRange& r : ranges) memcpy_async(device, r.dst, r.src, r.nbytes, kind, stream);
}
MemoryRange Backend::memory_range(int /*device*/, const void* /*ptr*/) {
  unsupported("memory_range");
}
RawStream Backend::stream_create_with_priority(int device, int priority) {
  FERRY_CHECK_AS(DeviceError, priority == 0, display_name(), ":", device,
                 ": stream_create_with_priority: expected priority 0 (this backend has no stream "
                 "priorities), but got ",
                 priority);
  return stream_create(device);
}
std::pair<int, int> Backend::stream_priority_range(int /*device*/) { return {0, 0}; }
RawEvent Backend::event_create_interprocess(int /*device*/) {
  unsupported("event_create_interprocess");
}
IpcHandle Backend::event_ipc_export(int /*device*/, RawEvent /*event*/) {
  unsupported("event_ipc_export");
}
RawEvent Backend::event_ipc_import(const IpcHandle& /*handle*/) { unsupported("event_ipc_import"); }

bool has_backend(DeviceType type) {
  const Slot& s = slot(type);
  return s.factory != nullptr || s.replacement.load(std::memory_order_acquire) != nullptr;
}

Backend* replace_backend_for_testing(DeviceType type, Backend* backend) {
  FERRY_CHECK_AS(DeviceError, type != DeviceType::CPU,
                 "replace_backend_for_testing: expected a non-CPU device type, but got ", type);
  return slot(type).replacement.exchange(backend, std::memory_order_acq_rel);
}

Backend* created_backend(DeviceType type) {
  Slot& s = slot(type);
  if (Backend* b = s.replacement.load(std::memory_order_acquire)) return b;
  return s.backend.load(std::memory_order_acquire);
}

Backend* find_backend(DeviceType type) {
  if (Backend* b = created_backend(type)) return b;
  Slot& s = slot(type);
  if (s.factory == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(s.create_mutex);
  if (Backend* b = s.backend.load(std::memory_order_acquire)) return b;
  // Leaked on purpose: backends own worker threads and driver state that must outlive every
  // static destructor that might still free device memory at exit.
  Backend* created = s.factory().release();
  s.backend.store(created, std::memory_order_release);
  return created;
}

Backend& get_backend(DeviceType type) {
  Backend* b = find_backend(type);
  FERRY_CHECK_AS(DeviceError, b != nullptr, "expected a ", type,
                 " backend, but ferry was built without one",
                 type == DeviceType::CPU ? " (the CPU needs no backend)" : "");
  return *b;
}

}  // namespace ferry
