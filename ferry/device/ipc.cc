// The IPC channel over Unix-domain stream sockets, and exporting/importing allocations.
#include "ferry/device/ipc.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHandleMagic = 0x4c444846;  // "FHDL"
constexpr uint16_t kHandleVersion = 1;
constexpr uint64_t kMaxHandleBytes = uint64_t{1} << 20;
constexpr int kMaxFdsPerMessage = 4;

// The fixed-size part of a handle on the wire; the backend bytes follow it.
struct WireHeader {
  uint32_t magic;
  uint16_t version;
  int8_t device_type;
  int8_t device_index;
  uint8_t has_fd;
  uint8_t reserved[7];
  uint64_t size;
  uint64_t nbytes;
};
static_assert(sizeof(WireHeader) == 32);

std::string errno_text() { return std::strerror(errno); }

struct SocketAddress {
  sockaddr_un addr{};
  socklen_t length = 0;
  bool abstract = false;
};

SocketAddress make_address(const std::string& path) {
  SocketAddress a;
  a.addr.sun_family = AF_UNIX;
  a.abstract = !path.empty() && path[0] == '@';
  const size_t name_length = a.abstract ? path.size() - 1 : path.size();
  // A file path needs room for its terminating NUL; an abstract name starts after a NUL byte.
  const size_t capacity = sizeof(a.addr.sun_path) - 1;
  FERRY_CHECK_AS(DeviceError, name_length > 0 && name_length <= capacity,
                 "ipc: expected a socket path of 1 to ", capacity,
                 " characters (\"@name\" for the abstract namespace), but got \"", path, "\"");
  if (a.abstract) {
    a.addr.sun_path[0] = '\0';
    std::memcpy(a.addr.sun_path + 1, path.data() + 1, name_length);
    a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_length);
  } else {
    std::memcpy(a.addr.sun_path, path.data(), name_length);
    a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_length + 1);
  }
  return a;
}

UniqueFd make_socket(const char* what) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  FERRY_CHECK_AS(DeviceError, fd.valid(), "ipc: ", what,
                 ": socket(AF_UNIX) failed: ", errno_text());
  return fd;
}

// Waits until `fd` is readable, for at most `timeout` (forever when none).
bool poll_readable(int fd, std::optional<std::chrono::milliseconds> timeout) {
  const auto deadline = timeout ? Clock::now() + *timeout : Clock::time_point::max();
  for (;;) {
    int wait_ms = -1;
    if (timeout) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r > 0) return true;
    if (r == 0) return false;
    FERRY_CHECK_AS(DeviceError, errno == EINTR, "ipc: poll failed: ", errno_text());
  }
}

void close_fds(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

// Collects every descriptor carried by `msg` into `fds`; reports truncation.
void collect_fds(msghdr& msg, std::vector<int>& fds) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    close_fds(fds);
    FERRY_FAIL_AS(DeviceError, "ipc: receive_handle: expected at most ", kMaxFdsPerMessage,
                  " file descriptors with a handle, but the control data was truncated");
  }
}

}  // namespace

// ---- exporting and importing ---------------------------------------------------------------

IpcHandle export_ipc_handle(Device device, void* ptr, size_t size) {
  const Device d = checked_device(device);
  FERRY_CHECK_AS(DeviceError, !d.is_cpu(),
                 "export_ipc_handle: expected a device allocation, but got a cpu device");
  FERRY_CHECK_AS(DeviceError, ptr != nullptr, d,
                 ": export_ipc_handle: expected the start of an allocation, but got nullptr");
  IpcHandle handle = get_backend(d.type()).ipc_export(d.index(), ptr);
  if (handle.size == 0) {
    handle.size = size;
  } else {
    FERRY_CHECK_AS(DeviceError, size <= handle.size, d, ": export_ipc_handle: expected at most ",
                   handle.size, " bytes (the allocation's size), but got size ", size);
  }
  return handle;
}

IpcMapping::IpcMapping(const IpcHandle& handle) {
  const Device d = checked_device(handle.device);
  FERRY_CHECK_AS(DeviceError, !d.is_cpu(),
                 "IpcMapping: expected a handle for a device allocation, but got a cpu device");
  ptr_ = get_backend(d.type()).ipc_import(handle);
  size_ = handle.size;
  device_ = d;
}

IpcMapping::IpcMapping(IpcMapping&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(other.device_) {}

IpcMapping& IpcMapping::operator=(IpcMapping&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
  }
  return *this;
}

void IpcMapping::reset() noexcept {
  if (ptr_ == nullptr) return;
  try {
    get_backend(device_.type()).ipc_close(device_.index(), ptr_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: failed to unmap an IPC allocation on %s: %s\n",
                 device_.str().c_str(), e.what());
  }
  ptr_ = nullptr;
  size_ = 0;
}

// ---- connections ---------------------------------------------------------------------------

IpcConnection IpcConnection::connect(const std::string& path, std::chrono::milliseconds timeout) {
  const SocketAddress address = make_address(path);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    UniqueFd fd = make_socket("connect");
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.addr), address.length) ==
        0) {
      return IpcConnection(std::move(fd));
    }
    const int error = errno;
    // The listener may not be up yet (or its backlog is full): retry until the deadline.
    const bool retry =
        error == ENOENT || error == ECONNREFUSED || error == EAGAIN || error == EINTR;
    FERRY_CHECK_AS(DeviceError, retry && Clock::now() < deadline, "ipc: connect(\"", path,
                   "\") failed",
                   retry ? " for " + std::to_string(timeout.count()) + " ms" : std::string(), ": ",
                   std::strerror(error));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::pair<IpcConnection, IpcConnection> IpcConnection::pair() {
  int fds[2];
  FERRY_CHECK_AS(DeviceError, ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0,
                 "ipc: socketpair(AF_UNIX) failed: ", errno_text());
  return {IpcConnection(UniqueFd(fds[0])), IpcConnection(UniqueFd(fds[1]))};
}

void IpcConnection::send_bytes(std::span<const std::byte> bytes) {
  FERRY_CHECK_AS(DeviceError, fd_.valid(), "ipc: send_bytes: expected an open connection");
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      FERRY_CHECK_AS(DeviceError, errno == EINTR, "ipc: send failed after ", sent, " of ",
                     bytes.size(), " bytes: ", errno_text());
      continue;
    }
    sent += static_cast<size_t>(n);
  }
}

void IpcConnection::wait_readable(size_t received, size_t wanted) {
  if (!timeout_) return;
  FERRY_CHECK_AS(DeviceError, poll_readable(fd_.get(), timeout_), "ipc: receive timed out after ",
                 timeout_->count(), " ms with ", received, " of ", wanted, " bytes received");
}

void IpcConnection::receive_bytes(std::span<std::byte> bytes) {
  FERRY_CHECK_AS(DeviceError, fd_.valid(), "ipc: receive_bytes: expected an open connection");
  size_t received = 0;
  while (received < bytes.size()) {
    wait_readable(received, bytes.size());
    const ssize_t n = ::recv(fd_.get(), bytes.data() + received, bytes.size() - received, 0);
    if (n < 0) {
      FERRY_CHECK_AS(DeviceError, errno == EINTR, "ipc: recv failed after ", received, " of ",
                     bytes.size(), " bytes: ", errno_text());
      continue;
    }
    FERRY_CHECK_AS(DeviceError, n > 0, "ipc: the peer closed the connection after ", received,
                   " of ", bytes.size(), " bytes");
    received += static_cast<size_t>(n);
  }
}

void IpcConnection::send_handle(const IpcHandle& handle) {
  FERRY_CHECK_AS(DeviceError, fd_.valid(), "ipc: send_handle: expected an open connection");
  WireHeader header{};
  header.magic = kHandleMagic;
  header.version = kHandleVersion;
  header.device_type = static_cast<int8_t>(handle.device.type());
  header.device_index = handle.device.index();
  header.has_fd = handle.fd.valid() ? 1 : 0;
  header.size = handle.size;
  header.nbytes = handle.bytes.size();

  // The descriptor rides on the header's first sendmsg; the kernel duplicates it into the
  // receiver, so the handle keeps its own.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&header, sizeof(header)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (handle.fd.valid()) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int fd = handle.fd.get();
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  FERRY_CHECK_AS(DeviceError, n >= 0, "ipc: send_handle: sendmsg failed: ", errno_text());
  const auto* header_bytes = reinterpret_cast<const std::byte*>(&header);
  send_bytes(std::span<const std::byte>(header_bytes + n, sizeof(header) - static_cast<size_t>(n)));
  send_bytes(handle.bytes);
}

IpcHandle IpcConnection::receive_handle() {
  FERRY_CHECK_AS(DeviceError, fd_.valid(), "ipc: receive_handle: expected an open connection");
  WireHeader header{};
  auto* header_bytes = reinterpret_cast<std::byte*>(&header);
  std::vector<int> fds;
  size_t received = 0;
  while (received < sizeof(header)) {
    wait_readable(received, sizeof(header));
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
    iovec iov{header_bytes + received, sizeof(header) - received};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why =
          n < 0 ? "recvmsg failed: " + errno_text() : std::string("the peer closed the connection");
      close_fds(fds);
      FERRY_FAIL_AS(DeviceError, "ipc: receive_handle: ", why, " after ", received, " of ",
                    sizeof(header), " header bytes");
    }
    collect_fds(msg, fds);
    received += static_cast<size_t>(n);
  }
  const bool valid_header = header.magic == kHandleMagic && header.version == kHandleVersion &&
                            header.device_type >= 0 && header.device_type < kNumDeviceTypes &&
                            header.nbytes <= kMaxHandleBytes;
  const size_t expected_fds = header.has_fd ? 1 : 0;
  if (!valid_header || fds.size() != expected_fds) {
    close_fds(fds);
    FERRY_CHECK_AS(DeviceError, valid_header,
                   "ipc: receive_handle: expected a ferry IPC handle (magic 0x", std::hex,
                   kHandleMagic, " version ", std::dec, kHandleVersion, "), but got magic 0x",
                   std::hex, header.magic, std::dec, " version ", header.version, " with ",
                   header.nbytes, " payload bytes");
    FERRY_FAIL_AS(DeviceError, "ipc: receive_handle: expected ", expected_fds,
                  " file descriptor(s) with the handle, but got ", fds.size());
  }
  IpcHandle handle;
  handle.fd.reset(expected_fds == 1 ? fds[0] : -1);
  handle.device = Device(static_cast<DeviceType>(header.device_type), header.device_index);
  handle.size = header.size;
  handle.bytes.resize(header.nbytes);
  receive_bytes(handle.bytes);
  return handle;
}

// ---- listeners -----------------------------------------------------------------------------

IpcListener::IpcListener(std::string path, int backlog) : path_(std::move(path)) {
  const SocketAddress address = make_address(path_);
  if (!address.abstract) {
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0) {
      FERRY_CHECK_AS(DeviceError, S_ISSOCK(st.st_mode), "ipc: listen(\"", path_,
                     "\"): expected no file or a stale socket at the path, but another kind of "
                     "file is there");
      ::unlink(path_.c_str());
    }
  }
  fd_ = make_socket("listen");
  FERRY_CHECK_AS(
      DeviceError,
      ::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&address.addr), address.length) == 0,
      "ipc: bind(\"", path_, "\") failed: ", errno_text());
  owns_file_ = !address.abstract;
  FERRY_CHECK_AS(DeviceError, ::listen(fd_.get(), backlog) == 0, "ipc: listen(\"", path_,
                 "\") failed: ", errno_text());
}

IpcListener::IpcListener(IpcListener&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::move(other.fd_)),
      owns_file_(std::exchange(other.owns_file_, false)) {}

IpcListener& IpcListener::operator=(IpcListener&& other) noexcept {
  if (this != &other) {
    unlink_path();
    path_ = std::move(other.path_);
    fd_ = std::move(other.fd_);
    owns_file_ = std::exchange(other.owns_file_, false);
  }
  return *this;
}

IpcListener::~IpcListener() { unlink_path(); }

void IpcListener::unlink_path() noexcept {
  if (owns_file_) ::unlink(path_.c_str());
  owns_file_ = false;
}

IpcConnection IpcListener::accept(std::optional<std::chrono::milliseconds> timeout) {
  FERRY_CHECK_AS(DeviceError, fd_.valid(), "ipc: accept: expected an open listener");
  for (;;) {
    FERRY_CHECK_AS(DeviceError, poll_readable(fd_.get(), timeout), "ipc: accept(\"", path_,
                   "\") timed out after ", timeout ? timeout->count() : 0, " ms");
    const int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return IpcConnection(UniqueFd(fd));
    FERRY_CHECK_AS(DeviceError, errno == EINTR || errno == ECONNABORTED || errno == EAGAIN,
                   "ipc: accept(\"", path_, "\") failed: ", errno_text());
  }
}

}  // namespace ferry
