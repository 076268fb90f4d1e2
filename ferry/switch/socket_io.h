// Socket helpers for the serving front end: deadline-bounded reads and writes (poll, EINTR
// retried, MSG_NOSIGNAL so SIGPIPE is never raised), connecting to a Unix socket or to a loopback
// TCP port with a timeout, and the peer's uid (SO_PEERCRED). Every failure raises
// SwitchError(internal) or reports through the return value as documented; no call blocks past
// its deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ferry/device/ipc_handle.h"

namespace ferry::switch_ {

using Clock = std::chrono::steady_clock;

enum class ReadStatus {
  ok,       // the buffer is full
  closed,   // the peer closed the connection (possibly after part of the buffer)
  timeout,  // the deadline passed
  stopped,  // `stop_fd` became readable before any byte arrived (only when nothing was read)
  error,    // a socket error
};

// Fills `out`; gives up at `deadline`. When `stop_fd` >= 0 and it becomes readable while no byte
// of `out` has arrived yet, returns stopped. `received` says how many bytes were read.
ReadStatus read_full(int fd, std::span<std::byte> out, Clock::time_point deadline, int stop_fd,
                     size_t* received);

// Writes all of `bytes` by `deadline`; false on timeout, a closed peer or an error.
bool write_full(int fd, std::span<const std::byte> bytes, Clock::time_point deadline);

// Connects to a Unix stream socket at `path`, retrying while it does not exist or refuses, until
// `timeout`; raises SwitchError(internal) naming the path and the last error.
UniqueFd connect_unix(const std::string& path, std::chrono::milliseconds timeout);
// Connects to 127.0.0.1:`port`, retrying until `timeout`.
UniqueFd connect_loopback_tcp(uint16_t port, std::chrono::milliseconds timeout);

// The uid of the process at the other end of a Unix socket, or nullopt when the kernel cannot say.
std::optional<uid_t> peer_uid(int fd);

}  // namespace ferry::switch_
