// map_host_memory: a device tensor over pinned host memory (see host_mapping.h).
#include "ferry/device/host_mapping.h"

#include <utility>

#include "ferry/core/error.h"
#include "ferry/core/storage.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"

namespace ferry {
namespace {

// The mapping's owner: released (after the device's queued work) before the host storage it
// keeps alive.
struct HostMappingOwner {
  Storage host;
  Device device;
  void* device_ptr = nullptr;
};

void release_host_mapping(void* context) {
  auto* mapping = static_cast<HostMappingOwner*>(context);
  try {
    get_backend(mapping->device.type())
        .release_host_device_pointer(mapping->device.index(), mapping->device_ptr);
  } catch (const Error&) {
    // A deleter cannot throw; the mapping is address space only and dies with the process.
  }
  delete mapping;
}

}  // namespace

Tensor map_host_memory(const Tensor& pinned, Device device) {
  FERRY_CHECK_AS(DeviceError, !device.is_cpu(),
                 "map_host_memory: expected a device (sim or cuda) to map host memory into, but "
                 "got ",
                 device);
  FERRY_CHECK_AS(DeviceError, pinned.defined() && pinned.is_cpu(),
                 "map_host_memory: expected a CPU tensor in pinned host memory, but got ",
                 pinned.defined() ? "a tensor on " + pinned.device().str()
                                  : std::string("an undefined tensor"));
  device = checked_device(device);
  const Storage& storage = pinned.storage();
  void* data = storage.data();
  const size_t nbytes = storage.nbytes();
  FERRY_CHECK_AS(DeviceError, nbytes == 0 || is_pinned(data, nbytes),
                 "map_host_memory: expected a tensor in pinned or registered host memory (", nbytes,
                 " bytes of storage), but got pageable memory");
  auto mapping = std::make_unique<HostMappingOwner>();
  mapping->host = storage;
  mapping->device = device;
  if (nbytes > 0) {
    mapping->device_ptr =
        get_backend(device.type()).host_device_pointer(device.index(), data, nbytes);
  }
  void* device_ptr = mapping->device_ptr;
  DataPtr data_ptr = nbytes == 0
                         ? DataPtr(nullptr, device)
                         : DataPtr(device_ptr, mapping.release(), &release_host_mapping, device);
  Tensor out = make_tensor(Storage(std::move(data_ptr), nbytes), pinned.dtype(), pinned.sizes(),
                           pinned.strides(), pinned.storage_offset());
  out.impl()->set_conj(pinned.is_conj());
  out.impl()->set_neg(pinned.is_neg());
  return out;
}

bool is_host_mapped(const Tensor& t) {
  return t.defined() && !t.is_cpu() && t.storage().data_ptr().deleter() == &release_host_mapping;
}

}  // namespace ferry
