// UniqueFd: closing and duplicating owned descriptors.
#include "ferry/device/ipc_handle.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ferry/core/error.h"

namespace ferry {

void UniqueFd::reset(int fd) {
  // close() is not retried on EINTR: on Linux the descriptor is released either way, and a
  // retry could close a descriptor another thread has just been given.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

UniqueFd UniqueFd::duplicate() const {
  FERRY_CHECK_AS(DeviceError, fd_ >= 0, "UniqueFd::duplicate: expected an open descriptor");
  const int copy = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  FERRY_CHECK_AS(DeviceError, copy >= 0, "fcntl(F_DUPFD_CLOEXEC) of descriptor ", fd_,
                 " failed: ", std::strerror(errno));
  return UniqueFd(copy);
}

}  // namespace ferry
