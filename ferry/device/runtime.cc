// Device counts, current devices, validation, synchronization, peer access, pinned memory.
#include "ferry/device/runtime.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "ferry/core/error.h"

namespace ferry {
namespace {

constexpr int kMaxDevices = 128;  // DeviceIndex is int8_t

// Which peer accesses this process has enabled: one bit per (device, peer) pair. Policy kept
// above the contract so that both backends report it the same way.
struct PeerTable {
  std::array<std::array<std::atomic<uint64_t>, 2>, kMaxDevices> bits{};

  bool get(int device, int peer) const {
    return (bits[device][peer / 64].load(std::memory_order_acquire) >> (peer % 64)) & 1;
  }
  void set(int device, int peer) {
    bits[device][peer / 64].fetch_or(uint64_t{1} << (peer % 64), std::memory_order_acq_rel);
  }
};

PeerTable& peer_table(DeviceType type) {
  static std::array<PeerTable, kNumDeviceTypes> tables;
  return tables[static_cast<size_t>(type)];
}

// How messages name a device type when no backend is there to say it ("CUDA", "sim").
std::string display_name(DeviceType type) {
  return type == DeviceType::CUDA ? std::string("CUDA") : std::string(device_type_name(type));
}

}  // namespace

int device_count(DeviceType type) {
  if (type == DeviceType::CPU) return 1;
  Backend* b = find_backend(type);
  return b == nullptr ? 0 : b->device_count();
}

std::string device_unavailable_reason(DeviceType type) {
  if (type == DeviceType::CPU) return {};
  if (!has_backend(type)) {
    return "ferry was built without the " + display_name(type) + " backend";
  }
  Backend& b = get_backend(type);
  return b.device_count() > 0 ? std::string() : b.unavailable_reason();
}

Device checked_device(Device device) {
  if (device.is_cpu()) return device;
  FERRY_CHECK_AS(DeviceError, has_backend(device.type()), device, ": no ",
                 display_name(device.type()), " device (", device_unavailable_reason(device.type()),
                 ")");
  Backend& b = get_backend(device.type());
  const int count = b.device_count();
  FERRY_CHECK_AS(DeviceError, count > 0, device, ": no ", b.display_name(), " device (",
                 b.unavailable_reason(), ")");
  if (!device.has_index()) {
    return Device(device.type(), static_cast<DeviceIndex>(b.current_device()));
  }
  FERRY_CHECK_AS(DeviceError, device.index() < count, device, ": expected a device index below ",
                 count, " (there ", count == 1 ? "is " : "are ", count, " ", b.display_name(),
                 count == 1 ? " device" : " devices", "), but got ",
                 static_cast<int>(device.index()));
  return device;
}

Device current_device(DeviceType type) {
  if (type == DeviceType::CPU) return Device(DeviceType::CPU);
  return checked_device(Device(type));
}

void set_device(Device device) {
  if (device.is_cpu()) return;
  const Device d = checked_device(device);
  get_backend(d.type()).set_current_device(d.index());
}

void device_synchronize(Device device) {
  if (device.is_cpu()) return;
  const Device d = checked_device(device);
  get_backend(d.type()).device_synchronize(d.index());
}

MemoryInfo memory_info(Device device) {
  if (device.is_cpu()) return {};
  const Device d = checked_device(device);
  return get_backend(d.type()).memory_info(d.index());
}

bool can_access_peer(Device device, Device peer) {
  const Device d = checked_device(device);
  const Device p = checked_device(peer);
  if (d == p) return true;
  if (d.type() != p.type() || d.is_cpu()) return false;
  return get_backend(d.type()).can_access_peer(d.index(), p.index());
}

bool enable_peer_access(Device device, Device peer) {
  const Device d = checked_device(device);
  const Device p = checked_device(peer);
  if (d == p) return true;
  if (d.type() != p.type() || d.is_cpu()) return false;
  PeerTable& table = peer_table(d.type());
  if (table.get(d.index(), p.index())) return true;
  Backend& b = get_backend(d.type());
  if (!b.can_access_peer(d.index(), p.index())) return false;
  b.enable_peer_access(d.index(), p.index());
  table.set(d.index(), p.index());
  return true;
}

bool peer_access_enabled(Device device, Device peer) {
  const Device d = checked_device(device);
  const Device p = checked_device(peer);
  if (d == p) return true;
  if (d.type() != p.type() || d.is_cpu()) return false;
  return peer_table(d.type()).get(d.index(), p.index());
}

void forget_peer_access(DeviceType type) {
  for (auto& row : peer_table(type).bits) {
    for (auto& word : row) word.store(0, std::memory_order_release);
  }
}

void* pinned_malloc(DeviceType type, size_t nbytes) {
  FERRY_CHECK_AS(DeviceError, type != DeviceType::CPU,
                 "expected the device type whose copies the pinned memory serves (sim or cuda), "
                 "but got cpu");
  checked_device(Device(type));  // raises when the type has no device
  return get_backend(type).malloc_host(nbytes);
}

void pinned_free(DeviceType type, void* ptr) {
  if (ptr == nullptr) return;
  get_backend(type).free_host(ptr);
}

bool is_pinned(const void* ptr, size_t nbytes) {
  if (ptr == nullptr) return false;
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    const auto type = static_cast<DeviceType>(i);
    if (type == DeviceType::CPU) continue;
    Backend* b = find_backend(type);
    if (b != nullptr && b->device_count() > 0 && b->is_pinned_range(ptr, nbytes)) return true;
  }
  return false;
}

namespace {

// The backends that have devices, in DeviceType order.
std::vector<Backend*> backends_with_devices() {
  std::vector<Backend*> out;
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    const auto type = static_cast<DeviceType>(i);
    if (type == DeviceType::CPU) continue;
    Backend* b = find_backend(type);
    if (b != nullptr && b->device_count() > 0) out.push_back(b);
  }
  return out;
}

}  // namespace

bool register_host(void* ptr, size_t nbytes) {
  const std::vector<Backend*> backends = backends_with_devices();
  for (size_t i = 0; i < backends.size(); ++i) {
    try {
      backends[i]->host_register(ptr, nbytes);
    } catch (...) {
      for (size_t j = 0; j < i; ++j) backends[j]->host_unregister(ptr);
      throw;
    }
  }
  return !backends.empty();
}

void unregister_host(void* ptr) {
  for (Backend* b : backends_with_devices()) b->host_unregister(ptr);
}

MemoryRange memory_range(Device device, const void* ptr) {
  const Device d = checked_device(device);
  FERRY_CHECK_AS(DeviceError, !d.is_cpu(),
                 "memory_range: expected a device address, but the device given is the cpu");
  return get_backend(d.type()).memory_range(d.index(), ptr);
}

}  // namespace ferry
