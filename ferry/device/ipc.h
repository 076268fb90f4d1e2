// Sharing device memory between processes: exporting and importing allocations (IpcHandle), and
// a Unix-domain socket channel that carries handles (their file descriptors travel as
// SCM_RIGHTS) and plain bytes. The channel is the transport the model-switching layer builds on.
// Guarantees: every call either completes or raises DeviceError saying what failed and why
// (EINTR is retried, partial writes and reads are completed, a peer that hangs up or sends
// garbage is reported); every descriptor is owned by an RAII object and closed exactly once;
// SIGPIPE is never raised.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "ferry/core/device.h"
#include "ferry/device/ipc_handle.h"

namespace ferry {

// ---- exporting and importing allocations ---------------------------------------------------

// A handle for the allocation that starts at `ptr` on `device` (the start of a backend malloc
// block; a caching allocator must export whole blocks and send offsets itself). The CUDA runtime
// does not report allocation sizes: pass `size` (the block's size) so that handle.size is set;
// the sim knows it and checks that `size` (when given) does not exceed it.
IpcHandle export_ipc_handle(Device device, void* ptr, size_t size = 0);

// An allocation of another process mapped into this one; unmapped when destroyed.
class IpcMapping {
 public:
  IpcMapping() = default;
  // Maps `handle` on the device with handle.device's index. Raises DeviceError.
  explicit IpcMapping(const IpcHandle& handle);
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  IpcMapping(IpcMapping&& other) noexcept;
  IpcMapping& operator=(IpcMapping&& other) noexcept;
  ~IpcMapping() { reset(); }

  void* get() const { return ptr_; }
  size_t size() const { return size_; }
  Device device() const { return device_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  // Unmaps now (waiting for queued work that may use the memory).
  void reset() noexcept;

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  Device device_;
};

// ---- the socket channel --------------------------------------------------------------------

// A connected Unix stream socket.
class IpcConnection {
 public:
  IpcConnection() = default;
  explicit IpcConnection(UniqueFd fd) : fd_(std::move(fd)) {}

  // Connects to a listener at `path` ("@name" for the abstract namespace, else a file path),
  // retrying while it does not exist yet, for up to `timeout`.
  static IpcConnection connect(const std::string& path,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Two connected ends, for threads of one process or a parent and its child.
  static std::pair<IpcConnection, IpcConnection> pair();

  // Receives wait at most this long (none: forever); a timeout raises DeviceError.
  void set_timeout(std::optional<std::chrono::milliseconds> timeout) { timeout_ = timeout; }

  void send_bytes(std::span<const std::byte> bytes);
  void send_bytes(const void* data, size_t nbytes) {
    send_bytes(std::span<const std::byte>(static_cast<const std::byte*>(data), nbytes));
  }
  // Fills `bytes` completely or raises (the peer closed the connection, timeout, error).
  void receive_bytes(std::span<std::byte> bytes);
  void receive_bytes(void* data, size_t nbytes) {
    receive_bytes(std::span<std::byte>(static_cast<std::byte*>(data), nbytes));
  }
  template <typename T>
  void send_value(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "send_value needs a trivially copyable type");
    send_bytes(&value, sizeof(T));
  }
  template <typename T>
  T receive_value() {
    static_assert(std::is_trivially_copyable_v<T>, "receive_value needs a trivially copyable type");
    T value;
    receive_bytes(&value, sizeof(T));
    return value;
  }

  // The handle's device, size, bytes and (duplicated) descriptor; the handle keeps its own.
  void send_handle(const IpcHandle& handle);
  IpcHandle receive_handle();

  int fd() const { return fd_.get(); }
  bool is_open() const { return fd_.valid(); }
  void close() { fd_.reset(); }

 private:
  void wait_readable(size_t received, size_t wanted);

  UniqueFd fd_;
  std::optional<std::chrono::milliseconds> timeout_;
};

// A listening Unix stream socket. A file path is unlinked when the listener goes away (a stale
// socket file at the path is replaced; any other file there is an error).
class IpcListener {
 public:
  explicit IpcListener(std::string path, int backlog = 16);
  IpcListener(const IpcListener&) = delete;
  IpcListener& operator=(const IpcListener&) = delete;
  IpcListener(IpcListener&& other) noexcept;
  IpcListener& operator=(IpcListener&& other) noexcept;
  ~IpcListener();

  // Waits for a connection (at most `timeout` when given).
  IpcConnection accept(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  void unlink_path() noexcept;

  std::string path_;
  UniqueFd fd_;
  bool owns_file_ = false;
};

}  // namespace ferry
