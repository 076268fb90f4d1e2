// The sim device's memory: every device allocation is a memfd mapped twice, PROT_NONE at the
// address handed out (so host code that dereferences it faults) and read-write for the backend's
// workers; an ordered map from device address ranges to allocations translates any address,
// interior ones included. Pinned host memory is ordinary page-aligned memory tracked by range.
// IPC export hands out the memfd, sealed against shrinking and growing; import checks the seal
// and maps it twice again.
// Invariants: the tables change only under the exclusive lock; a translation is valid until the
// allocation is released, and callers release only after the work using it is done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "ferry/device/ipc_handle.h"

namespace ferry::sim::detail {

inline constexpr int kMaxSimDevices = 128;

struct Allocation {
  uintptr_t device_base = 0;  // the PROT_NONE mapping: the address users see
  char* host_base = nullptr;  // the read-write mapping of the same pages
  size_t mapped = 0;          // page-rounded size of both mappings
  size_t requested = 0;       // size the user asked for: copies must stay inside it
  int device = 0;
  UniqueFd fd;  // the memfd; not kept for imported allocations
  bool imported = false;
  bool host_mapped = false;  // host_base is pinned host memory (map_host), not ours to unmap
};

// Where an address lives.
struct Resolved {
  char* host = nullptr;      // read-write address for the given pointer
  int device = -1;           // -1: not sim device memory (a host address)
  bool host_mapped = false;  // a device address of pinned host memory (map_host)
};

class SimMemory {
 public:
  SimMemory() = default;
  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;
  ~SimMemory() = default;  // the backend is never destroyed; mappings die with the process

  // Raises OutOfMemoryError when `limit` bytes per device would be exceeded.
  void* allocate(int device, size_t nbytes, size_t limit);
  // `ptr` must be the start of a live allocation of `device`, imported or not as said.
  void release(int device, void* ptr, bool imported);

  // Resolves [ptr, ptr + nbytes). Returns device -1 for an address outside every allocation;
  // raises DeviceError when the range starts inside an allocation but runs past its end. The
  // error names the calling device, the call and the operand ("destination", "source").
  Resolved resolve(const void* ptr, size_t nbytes, int device, const char* call,
                   const char* operand) const;
  // The host mapping of any address inside an allocation (up to its page-rounded end).
  char* host_address(const void* ptr) const;
  // The device owning the allocation that holds `ptr`, or -1.
  int device_of(const void* ptr) const;

  size_t used(int device) const;
  size_t live_allocations() const;  // device, pinned and imported

  void* allocate_pinned(size_t nbytes);
  void release_pinned(void* ptr);
  // Whether [ptr, ptr + nbytes) lies inside one pinned block or registered range.
  bool is_pinned(const void* ptr, size_t nbytes = 1) const;
  // Records host memory the sim did not allocate as pinned (host_register): the range must be
  // mapped, non-empty, outside sim device memory and disjoint from every pinned block and
  // registered range. unregister_host takes exactly a registered range's start.
  void register_host(void* ptr, size_t nbytes);
  void unregister_host(void* ptr);
  // A device address of `device` for [ptr, ptr + nbytes) of pinned or registered host memory
  // (host_device_pointer): a PROT_NONE reservation whose translation is the host memory itself,
  // so kernels read the host bytes in place. unmap_host takes exactly such an address.
  void* map_host(int device, void* ptr, size_t nbytes);
  void unmap_host(int device, void* device_ptr);
  // Whether `ptr` lies in a map_host range.
  bool is_host_mapped(const void* ptr) const;
  // The allocation of `device` (own or imported) holding `ptr`: [base, base + requested size).
  std::pair<void*, size_t> range_of(int device, const void* ptr) const;

  IpcHandle export_handle(int device, void* ptr) const;
  void* import_handle(const IpcHandle& handle);

 private:
  // `call` names the backend call in errors ("malloc(4096 bytes)", "ipc_import").
  void* map_allocation(int device, size_t mapped, size_t requested, UniqueFd fd, bool keep_fd,
                       const std::string& call);
  const Allocation* find(uintptr_t address) const;  // caller holds the lock

  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Allocation> allocations_;  // by device_base
  struct PinnedRange {
    size_t size = 0;          // malloc_host: the mapped size; registered: the size given
    bool registered = false;  // host_register (not ours to unmap) rather than malloc_host
  };
  std::map<uintptr_t, PinnedRange> pinned_;  // by base
  std::vector<size_t> used_ = std::vector<size_t>(kMaxSimDevices, 0);
};

}  // namespace ferry::sim::detail
