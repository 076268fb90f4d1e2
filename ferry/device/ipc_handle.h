// IpcHandle: what one process needs to map another process's device allocation, and UniqueFd,
// the owning file-descriptor wrapper it (and the IPC channel) uses.
// A handle owns its file descriptor (if any) and closes it when destroyed; it is move-only so a
// descriptor is never closed twice. The bytes are backend-specific (CUDA: cudaIpcMemHandle_t;
// sim: a small header that travels with the allocation's memfd).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "ferry/core/device.h"

namespace ferry {

// Owns one file descriptor; closes it on destruction. -1 means "none".
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  // Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1);
  // A second descriptor for the same open file (dup with close-on-exec); raises DeviceError.
  UniqueFd duplicate() const;

 private:
  int fd_ = -1;
};

// An exported allocation. `size` is the allocation's size in bytes; `device` the device it lives
// on in the exporting process (the importer maps it on the device with the same index).
struct IpcHandle {
  Device device;
  size_t size = 0;
  std::vector<std::byte> bytes;
  UniqueFd fd;

  // A copy that owns its own duplicate of the descriptor.
  IpcHandle clone() const {
    return IpcHandle{device, size, bytes, fd.valid() ? fd.duplicate() : UniqueFd()};
  }
};

}  // namespace ferry
