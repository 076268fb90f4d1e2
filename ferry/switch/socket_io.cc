// Deadline-bounded socket I/O for the serving front end (socket_io.h).
#include "ferry/switch/socket_io.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "ferry/switch/types.h"

namespace ferry::switch_ {
namespace {

int millis_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left.count() + 1, 60'000));
}

template <typename Connect>
UniqueFd connect_retrying(const std::string& what, std::chrono::milliseconds timeout,
                          Connect&& connect_once) {
  const auto deadline = Clock::now() + timeout;
  int last_errno = 0;
  while (true) {
    int err = 0;
    UniqueFd fd = connect_once(&err);
    if (fd.valid()) return fd;
    last_errno = err;
    const bool retry = err == ENOENT || err == ECONNREFUSED || err == EAGAIN || err == EINTR;
    if (!retry || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw SwitchError(ErrorCode::internal,
                    detail::str_cat("connect to ", what, " failed within ", timeout.count(),
                                    " ms: ", std::strerror(last_errno)));
}

}  // namespace

ReadStatus read_full(int fd, std::span<std::byte> out, Clock::time_point deadline, int stop_fd,
                     size_t* received) {
  size_t got = 0;
  ReadStatus status = ReadStatus::ok;
  while (got < out.size()) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const nfds_t n = (stop_fd >= 0 && got == 0) ? 2 : 1;
    const int r = ::poll(fds, n, millis_until(deadline));
    if (r < 0) {
      if (errno == EINTR) continue;
      status = ReadStatus::error;
      break;
    }
    if (r == 0) {
      if (Clock::now() >= deadline) {
        status = ReadStatus::timeout;
        break;
      }
      continue;
    }
    if (n == 2 && (fds[1].revents & POLLIN) && !(fds[0].revents & (POLLIN | POLLHUP))) {
      status = ReadStatus::stopped;
      break;
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t k = ::recv(fd, out.data() + got, out.size() - got, 0);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      status = ReadStatus::error;
      break;
    }
    if (k == 0) {
      status = ReadStatus::closed;
      break;
    }
    got += static_cast<size_t>(k);
  }
  if (received != nullptr) *received = got;
  return status;
}

bool write_full(int fd, std::span<const std::byte> bytes, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t k =
        ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      sent += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, millis_until(deadline));
      if (r < 0 && errno != EINTR) return false;
      if (r == 0 && Clock::now() >= deadline) return false;
      if (r > 0 && (p.revents & (POLLERR | POLLHUP)) && !(p.revents & POLLOUT)) return false;
      continue;
    }
    return false;
  }
  return true;
}

UniqueFd connect_unix(const std::string& path, std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    throw SwitchError(ErrorCode::internal,
                      detail::str_cat("socket path: expected 1 to ", sizeof(addr.sun_path) - 1,
                                      " bytes, but \"", path, "\" has ", path.size()));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return connect_retrying("\"" + path + "\"", timeout, [&](int* err) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      *err = errno;
      return UniqueFd();
    }
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      *err = errno;
      return UniqueFd();
    }
    return fd;
  });
}

UniqueFd connect_loopback_tcp(uint16_t port, std::chrono::milliseconds timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connect_retrying(detail::str_cat("127.0.0.1:", port), timeout, [&](int* err) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      *err = errno;
      return UniqueFd();
    }
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      *err = errno;
      return UniqueFd();
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  });
}

std::optional<uid_t> peer_uid(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    return std::nullopt;
  }
  return cred.uid;
}

}  // namespace ferry::switch_
