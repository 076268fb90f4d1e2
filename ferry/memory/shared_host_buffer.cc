// SharedHostBuffer: creating, sealing, mapping, registering, exporting and importing the memfd.
#include "ferry/memory/shared_host_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/device/runtime.h"

namespace ferry::memory {
namespace {

constexpr char kSharedHostMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'S', 'H', 'B'};
constexpr int kSharedHostSeals = F_SEAL_SHRINK | F_SEAL_GROW;

size_t shared_host_round_to_pages(size_t n) {
  static const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

}  // namespace

SharedHostBuffer::SharedHostBuffer(size_t nbytes, const std::string& name) {
  FERRY_CHECK_AS(DeviceError, nbytes > 0,
                 "SharedHostBuffer: expected a size above 0 bytes, but got 0");
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  FERRY_CHECK_AS(DeviceError, fd.valid(), "SharedHostBuffer(", nbytes,
                 " bytes): memfd_create failed: ", std::strerror(errno));
  const size_t mapped = shared_host_round_to_pages(nbytes);
  FERRY_CHECK_AS(DeviceError, ::ftruncate(fd.get(), static_cast<off_t>(mapped)) == 0,
                 "SharedHostBuffer(", nbytes, " bytes): ftruncate failed: ", std::strerror(errno));
  // No process may resize the file under another's mapping (a shrink would kill it with SIGBUS).
  FERRY_CHECK_AS(DeviceError, ::fcntl(fd.get(), F_ADD_SEALS, kSharedHostSeals | F_SEAL_SEAL) == 0,
                 "SharedHostBuffer(", nbytes,
                 " bytes): sealing the memfd failed: ", std::strerror(errno));
  map(std::move(fd), nbytes, "SharedHostBuffer");
}

SharedHostBuffer SharedHostBuffer::import(const IpcHandle& handle) {
  const char* call = "SharedHostBuffer::import";
  FERRY_CHECK_AS(
      DeviceError,
      handle.bytes.size() == sizeof(kSharedHostMagic) &&
          std::memcmp(handle.bytes.data(), kSharedHostMagic, sizeof(kSharedHostMagic)) == 0,
      call, ": expected a SharedHostBuffer handle (8 bytes, FERRYSHB), but got ",
      handle.bytes.size(), " bytes of something else");
  FERRY_CHECK_AS(DeviceError, handle.fd.valid() && handle.size > 0, call,
                 ": expected a handle carrying the buffer's file descriptor and size, but got ",
                 handle.fd.valid() ? "size 0" : "no descriptor");
  struct stat st {};
  FERRY_CHECK_AS(DeviceError, ::fstat(handle.fd.get(), &st) == 0, call,
                 ": fstat failed: ", std::strerror(errno));
  const int seals = ::fcntl(handle.fd.get(), F_GET_SEALS);
  FERRY_CHECK_AS(DeviceError, seals >= 0 && (seals & kSharedHostSeals) == kSharedHostSeals, call,
                 ": expected a memory file sealed against shrinking and growing, but ",
                 seals < 0 ? "the descriptor is not a sealable memfd" : "its seals allow resizing");
  FERRY_CHECK_AS(
      DeviceError, static_cast<uint64_t>(st.st_size) == shared_host_round_to_pages(handle.size),
      call, ": expected a memory file of ", shared_host_round_to_pages(handle.size),
      " bytes (the handle's ", handle.size, " bytes, page-rounded), but it has ", st.st_size);
  SharedHostBuffer buffer;
  buffer.map(handle.fd.duplicate(), handle.size, call);
  return buffer;
}

void SharedHostBuffer::map(UniqueFd fd, size_t size, const char* call) {
  const size_t mapped = shared_host_round_to_pages(size);
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  FERRY_CHECK_AS(DeviceError, p != MAP_FAILED, call, ": mmap of ", mapped,
                 " bytes failed: ", std::strerror(errno));
  try {
    registered_ = register_host(p, mapped);
  } catch (...) {
    ::munmap(p, mapped);
    throw;
  }
  fd_ = std::move(fd);
  data_ = p;
  size_ = size;
  mapped_ = mapped;
}

SharedHostBuffer::SharedHostBuffer(SharedHostBuffer&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)),
      registered_(std::exchange(other.registered_, false)) {}

SharedHostBuffer& SharedHostBuffer::operator=(SharedHostBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    registered_ = std::exchange(other.registered_, false);
  }
  return *this;
}

IpcHandle SharedHostBuffer::export_handle() const {
  FERRY_CHECK_AS(DeviceError, data_ != nullptr,
                 "SharedHostBuffer::export_handle: expected a live buffer, but it is empty");
  IpcHandle handle;
  handle.device = Device(DeviceType::CPU);
  handle.size = size_;
  handle.bytes.assign(
      reinterpret_cast<const std::byte*>(kSharedHostMagic),
      reinterpret_cast<const std::byte*>(kSharedHostMagic) + sizeof(kSharedHostMagic));
  handle.fd = fd_.duplicate();
  return handle;
}

void SharedHostBuffer::reset() noexcept {
  if (data_ == nullptr) return;
  if (registered_) {
    try {
      unregister_host(data_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ferry: SharedHostBuffer: unregistering %zu bytes failed: %s\n", mapped_,
                   e.what());
    }
  }
  ::munmap(data_, mapped_);
  fd_.reset();
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
  registered_ = false;
}

}  // namespace ferry::memory
