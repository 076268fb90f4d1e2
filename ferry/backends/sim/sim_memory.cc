// Sim device memory: memfd double mappings, the address table, pinned blocks and IPC.
#include "ferry/backends/sim/sim_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "ferry/core/error.h"

namespace ferry::sim::detail {
namespace {

constexpr char kIpcMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'S', 'I', 'M'};
constexpr uint32_t kIpcVersion = 1;
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

// The bytes of a sim IpcHandle; the memfd travels next to them.
struct IpcHeader {
  char magic[8];
  uint32_t version;
  int32_t device;
  uint64_t requested;
  uint64_t mapped;
};

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

size_t round_to_pages(size_t n) { return (n + page_size() - 1) / page_size() * page_size(); }

// Reads one byte of every page of [begin, end), as a driver's pinning (cudaHostRegister) faults
// every page in: the first copy from registered memory then pays no first access per page. On
// virtual machines that cost is large (about 6 to 13 us per 4 KiB page and process on the VMs this
// project runs on, measured with a memset of a fresh mapping against a second memset).
void touch_pages(uintptr_t begin, uintptr_t end) {
  unsigned char sink = 0;
  for (uintptr_t p = begin; p < end; p += page_size()) {
    sink ^= *reinterpret_cast<const volatile unsigned char*>(p);
  }
  static_cast<void>(sink);
}

std::string hex(const void* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%p", p);
  return buffer;
}

std::string gib(size_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buffer;
}

}  // namespace

void* SimMemory::map_allocation(int device, size_t mapped, size_t requested, UniqueFd fd,
                                bool keep_fd, const std::string& call) {
  void* device_view = ::mmap(nullptr, mapped, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd.get(), 0);
  FERRY_CHECK_AS(OutOfMemoryError, device_view != MAP_FAILED, "sim:", device, ": ", call,
                 ": mmap of ", mapped, " bytes (device view) failed: ", std::strerror(errno));
  void* host_view = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (host_view == MAP_FAILED) {
    const int error = errno;
    ::munmap(device_view, mapped);
    FERRY_FAIL_AS(OutOfMemoryError, "sim:", device, ": ", call, ": mmap of ", mapped,
                  " bytes (host view) failed: ", std::strerror(error));
  }
  Allocation a;
  a.device_base = reinterpret_cast<uintptr_t>(device_view);
  a.host_base = static_cast<char*>(host_view);
  a.mapped = mapped;
  a.requested = requested;
  a.device = device;
  a.imported = !keep_fd;
  if (keep_fd) a.fd = std::move(fd);
  allocations_.emplace(a.device_base, std::move(a));
  return device_view;
}

void* SimMemory::allocate(int device, size_t nbytes, size_t limit) {
  if (nbytes == 0) return nullptr;
  const size_t mapped = round_to_pages(nbytes);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  size_t& used = used_[static_cast<size_t>(device)];
  FERRY_CHECK_AS(OutOfMemoryError, mapped <= limit && used <= limit - mapped, "sim:", device,
                 ": malloc(", nbytes, " bytes) failed: out of memory (", gib(limit), " total, ",
                 gib(used), " in use, ", gib(limit - std::min(used, limit)),
                 " free; FERRY_SIM_MEMORY sets the size)");
  const std::string name = "ferry-sim:" + std::to_string(device);
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  FERRY_CHECK_AS(OutOfMemoryError, fd.valid(), "sim:", device, ": malloc(", nbytes,
                 " bytes): memfd_create failed: ", std::strerror(errno),
                 errno == EMFILE ? " (each live sim allocation holds a file descriptor; raise "
                                   "`ulimit -n`)"
                                 : "");
  FERRY_CHECK_AS(OutOfMemoryError, ::ftruncate(fd.get(), static_cast<off_t>(mapped)) == 0,
                 "sim:", device, ": malloc(", nbytes,
                 " bytes): ftruncate failed: ", std::strerror(errno));
  // Sealed so that no process the memfd is exported to can shrink it under our mappings (a
  // worker touching a truncated page would die of SIGBUS) or grow it.
  FERRY_CHECK_AS(DeviceError, ::fcntl(fd.get(), F_ADD_SEALS, kSizeSeals) == 0, "sim:", device,
                 ": malloc(", nbytes, " bytes): sealing the memfd failed: ", std::strerror(errno));
  void* ptr = map_allocation(device, mapped, nbytes, std::move(fd), /*keep_fd=*/true,
                             "malloc(" + std::to_string(nbytes) + " bytes)");
  used += mapped;
  return ptr;
}

void SimMemory::release(int device, void* ptr, bool imported) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  const char* call = imported ? "ipc_close" : "free";
  FERRY_CHECK_AS(DeviceError, it != allocations_.end(), "sim:", device, ": ", call,
                 ": expected the start of a live sim allocation, but got ", hex(ptr));
  Allocation& a = it->second;
  FERRY_CHECK_AS(DeviceError, !a.host_mapped, "sim:", device, ": ", call,
                 ": expected device memory, but ", hex(ptr),
                 " maps pinned host memory (release it with release_host_device_pointer)");
  FERRY_CHECK_AS(DeviceError, a.device == device && a.imported == imported, "sim:", device, ": ",
                 call, ": expected ", imported ? "an IPC mapping" : "an allocation",
                 " of sim:", device, ", but ", hex(ptr), " is ",
                 a.imported ? "an IPC mapping" : "an allocation", " of sim:", a.device);
  ::munmap(reinterpret_cast<void*>(a.device_base), a.mapped);
  ::munmap(a.host_base, a.mapped);
  if (!a.imported) used_[static_cast<size_t>(device)] -= a.mapped;
  allocations_.erase(it);  // closes the memfd
}

const Allocation* SimMemory::find(uintptr_t address) const {
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  return address < a.device_base + a.mapped ? &a : nullptr;
}

Resolved SimMemory::resolve(const void* ptr, size_t nbytes, int device, const char* call,
                            const char* operand) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const Allocation* a = find(address);
  if (a == nullptr) return {};
  const size_t offset = address - a->device_base;
  FERRY_CHECK_AS(DeviceError, offset <= a->requested && nbytes <= a->requested - offset,
                 "sim:", device, ": ", call, ": expected the ", operand, "'s ", nbytes,
                 " bytes inside one allocation, but ", hex(ptr), " is at offset ", offset,
                 " of an allocation of ", a->requested, " bytes on sim:", a->device);
  return Resolved{a->host_base + offset, a->device, a->host_mapped};
}

char* SimMemory::host_address(const void* ptr) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const Allocation* a = find(address);
  FERRY_CHECK_AS(DeviceError, a != nullptr,
                 "sim::host_address: expected an address inside a live sim allocation, but ",
                 hex(ptr), " is not one");
  return a->host_base + (address - a->device_base);
}

int SimMemory::device_of(const void* ptr) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const Allocation* a = find(reinterpret_cast<uintptr_t>(ptr));
  return a == nullptr ? -1 : a->device;
}

size_t SimMemory::used(int device) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return used_[static_cast<size_t>(device)];
}

size_t SimMemory::live_allocations() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return allocations_.size() + pinned_.size();
}

void* SimMemory::allocate_pinned(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t mapped = round_to_pages(nbytes);
  // Page-locking is simulated: the memory behaves like pinned memory for the sim's copies.
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  FERRY_CHECK_AS(OutOfMemoryError, p != MAP_FAILED, "sim: malloc_host(", nbytes,
                 " bytes) failed: ", std::strerror(errno));
  std::unique_lock<std::shared_mutex> lock(mutex_);
  pinned_.emplace(reinterpret_cast<uintptr_t>(p), PinnedRange{mapped, false});
  return p;
}

void SimMemory::release_pinned(void* ptr) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const auto it = pinned_.find(reinterpret_cast<uintptr_t>(ptr));
  FERRY_CHECK_AS(DeviceError, it != pinned_.end() && !it->second.registered,
                 "sim: free_host: expected the start of a live pinned block, but got ", hex(ptr),
                 it != pinned_.end() ? " (a range registered with host_register: unregister it "
                                       "with host_unregister)"
                                     : "");
  ::munmap(ptr, it->second.size);
  pinned_.erase(it);
}

bool SimMemory::is_pinned(const void* ptr, size_t nbytes) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = pinned_.upper_bound(address);
  if (it == pinned_.begin()) return false;
  --it;
  const size_t size = it->second.size;
  return address - it->first < size && nbytes <= size - (address - it->first);
}

void SimMemory::register_host(void* ptr, size_t nbytes) {
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  FERRY_CHECK_AS(DeviceError, ptr != nullptr && nbytes > 0 && begin + nbytes > begin,
                 "sim: host_register(", hex(ptr), ", ", nbytes,
                 " bytes): expected a non-empty range of host memory, but got ",
                 ptr == nullptr ? "a null pointer" : "an empty or wrapping range");
  // msync fails with ENOMEM on unmapped pages: the range must be memory this process can use.
  const uintptr_t page_begin = begin / page_size() * page_size();
  const bool mapped = ::msync(reinterpret_cast<void*>(page_begin),
                              round_to_pages(begin + nbytes - page_begin), MS_ASYNC) == 0;
  FERRY_CHECK_AS(DeviceError, mapped, "sim: host_register(", hex(ptr), ", ", nbytes,
                 " bytes): expected mapped host memory, but part of the range is not mapped");
  std::unique_lock<std::shared_mutex> lock(mutex_);
  // Device memory: any allocation starting before the end whose mapping reaches past the start.
  auto device_it = allocations_.lower_bound(begin + nbytes);
  if (device_it != allocations_.begin()) {
    --device_it;
    const Allocation& a = device_it->second;
    FERRY_CHECK_AS(DeviceError, a.device_base + a.mapped <= begin, "sim: host_register(", hex(ptr),
                   ", ", nbytes, " bytes): expected host memory, but the range overlaps ",
                   "sim:", a.device, " device memory at ",
                   hex(reinterpret_cast<void*>(a.device_base)));
  }
  auto it = pinned_.lower_bound(begin + nbytes);
  if (it != pinned_.begin()) {
    --it;
    FERRY_CHECK_AS(DeviceError, it->first + it->second.size <= begin, "sim: host_register(",
                   hex(ptr), ", ", nbytes,
                   " bytes): expected memory not pinned yet, but the range overlaps ",
                   it->second.registered ? "the registered range " : "the malloc_host block ",
                   hex(reinterpret_cast<void*>(it->first)), " of ", it->second.size, " bytes");
  }
  pinned_.emplace(begin, PinnedRange{nbytes, true});
  lock.unlock();
  touch_pages(page_begin, begin + nbytes);
}

void SimMemory::unregister_host(void* ptr) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const auto it = pinned_.find(reinterpret_cast<uintptr_t>(ptr));
  FERRY_CHECK_AS(DeviceError, it != pinned_.end() && it->second.registered,
                 "sim: host_unregister: expected the start of a range registered with "
                 "host_register, but got ",
                 hex(ptr),
                 it == pinned_.end() ? ", which is not the start of a registered range"
                                     : ", a malloc_host block (free it with free_host)");
  pinned_.erase(it);
}

void* SimMemory::map_host(int device, void* ptr, size_t nbytes) {
  FERRY_CHECK_AS(
      DeviceError, ptr != nullptr && nbytes > 0, "sim:", device,
      ": host_device_pointer: expected a non-empty range of pinned host memory, but got ",
      ptr == nullptr ? "a null pointer" : "0 bytes");
  FERRY_CHECK_AS(DeviceError, is_pinned(ptr, nbytes), "sim:", device, ": host_device_pointer(",
                 hex(ptr), ", ", nbytes,
                 " bytes): expected pinned or registered host memory, but the range is ",
                 device_of(ptr) >= 0 ? "sim device memory" : "pageable (not pinned) memory");
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t page_begin = begin / page_size() * page_size();
  const size_t mapped = round_to_pages(begin + nbytes - page_begin);
  // Address space only: the device view faults on host access, like every sim device address.
  void* view =
      ::mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  FERRY_CHECK_AS(OutOfMemoryError, view != MAP_FAILED, "sim:", device,
                 ": host_device_pointer: mmap of ", mapped,
                 " bytes (device view) failed: ", std::strerror(errno));
  Allocation a;
  a.device_base = reinterpret_cast<uintptr_t>(view);
  a.host_base = reinterpret_cast<char*>(page_begin);
  a.mapped = mapped;
  a.requested = begin - page_begin + nbytes;
  a.device = device;
  a.host_mapped = true;
  std::unique_lock<std::shared_mutex> lock(mutex_);
  allocations_.emplace(a.device_base, std::move(a));
  return static_cast<char*>(view) + (begin - page_begin);
}

void SimMemory::unmap_host(int device, void* device_ptr) {
  const auto address = reinterpret_cast<uintptr_t>(device_ptr);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const Allocation* a = find(address);
  FERRY_CHECK_AS(DeviceError,
                 a != nullptr && a->host_mapped && a->device == device &&
                     address - a->device_base < page_size(),
                 "sim:", device,
                 ": release_host_device_pointer: expected an address host_device_pointer returned "
                 "for sim:",
                 device, ", but got ", hex(device_ptr));
  const uintptr_t base = a->device_base;
  ::munmap(reinterpret_cast<void*>(base), a->mapped);
  allocations_.erase(base);
}

bool SimMemory::is_host_mapped(const void* ptr) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const Allocation* a = find(reinterpret_cast<uintptr_t>(ptr));
  return a != nullptr && a->host_mapped;
}

std::pair<void*, size_t> SimMemory::range_of(int device, const void* ptr) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const Allocation* a = find(address);
  FERRY_CHECK_AS(DeviceError, a != nullptr && address - a->device_base < a->requested,
                 "sim:", device,
                 ": memory_range: expected an address inside a live allocation of sim:", device,
                 ", but ", hex(ptr),
                 a == nullptr ? " is not inside any sim allocation"
                              : " lies past the end of the allocation it follows");
  FERRY_CHECK_AS(DeviceError, a->device == device, "sim:", device,
                 ": memory_range: expected an address inside a live allocation of sim:", device,
                 ", but ", hex(ptr), " belongs to sim:", a->device);
  return {reinterpret_cast<void*>(a->device_base), a->requested};
}

IpcHandle SimMemory::export_handle(int device, void* ptr) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  FERRY_CHECK_AS(DeviceError, it != allocations_.end(), "sim:", device,
                 ": ipc_export: expected the start of a live sim allocation, but got ", hex(ptr));
  const Allocation& a = it->second;
  FERRY_CHECK_AS(DeviceError, !a.host_mapped, "sim:", device,
                 ": ipc_export: expected device memory, but ", hex(ptr),
                 " maps pinned host memory (share the host memory instead)");
  FERRY_CHECK_AS(DeviceError, !a.imported && a.device == device, "sim:", device,
                 ": ipc_export: expected an allocation made on sim:", device, ", but ", hex(ptr),
                 a.imported ? " was imported from another process" : " belongs to sim:",
                 a.imported ? "" : std::to_string(a.device));
  IpcHeader header{};
  std::memcpy(header.magic, kIpcMagic, sizeof(kIpcMagic));
  header.version = kIpcVersion;
  header.device = device;
  header.requested = a.requested;
  header.mapped = a.mapped;
  IpcHandle handle;
  handle.device = Device(DeviceType::Sim, static_cast<DeviceIndex>(device));
  handle.size = a.requested;
  handle.bytes.resize(sizeof(header));
  std::memcpy(handle.bytes.data(), &header, sizeof(header));
  handle.fd = a.fd.duplicate();
  return handle;
}

void* SimMemory::import_handle(const IpcHandle& handle) {
  IpcHeader header{};
  const bool well_formed = handle.bytes.size() == sizeof(header);
  if (well_formed) std::memcpy(&header, handle.bytes.data(), sizeof(header));
  const int device = handle.device.index();
  FERRY_CHECK_AS(DeviceError,
                 well_formed && std::memcmp(header.magic, kIpcMagic, sizeof(kIpcMagic)) == 0 &&
                     header.version == kIpcVersion,
                 "sim:", device, ": ipc_import: expected a sim IPC handle (", sizeof(header),
                 " bytes starting with FERRYSIM, version ", kIpcVersion, "), but got ",
                 handle.bytes.size(), " bytes");
  FERRY_CHECK_AS(DeviceError, header.device == device, "sim:", device,
                 ": ipc_import: expected a handle exported from sim:", device,
                 " (the handle's device), but its header says sim:", header.device);
  FERRY_CHECK_AS(DeviceError, handle.fd.valid(), "sim:", device,
                 ": ipc_import: expected the handle to carry the allocation's file descriptor, "
                 "but it has none");
  struct stat st {};
  FERRY_CHECK_AS(DeviceError, ::fstat(handle.fd.get(), &st) == 0, "sim:", device,
                 ": ipc_import: fstat failed: ", std::strerror(errno));
  FERRY_CHECK_AS(DeviceError,
                 static_cast<uint64_t>(st.st_size) >= header.mapped &&
                     header.requested <= header.mapped && header.mapped % page_size() == 0,
                 "sim:", device, ": ipc_import: expected a memory file of ", header.mapped,
                 " bytes, but the descriptor refers to ", st.st_size, " bytes");
  // Unsealed, the exporter (or anyone it passed the descriptor to) could shrink the file under
  // our mappings and kill this process with SIGBUS.
  const int seals = ::fcntl(handle.fd.get(), F_GET_SEALS);
  FERRY_CHECK_AS(
      DeviceError, seals >= 0 && (seals & F_SEAL_SHRINK) != 0, "sim:", device,
      ": ipc_import: expected a memory file sealed against shrinking, but ",
      seals < 0 ? "the descriptor is not a sealable memfd" : "its seals allow shrinking");
  std::unique_lock<std::shared_mutex> lock(mutex_);
  return map_allocation(device, header.mapped, header.requested, handle.fd.duplicate(),
                        /*keep_fd=*/false, "ipc_import");
}

}  // namespace ferry::sim::detail
