// SharedHostBuffer: host memory shared between processes and pinned in each of them, for model
// weights that N worker processes read without N copies. The memory is a memfd sealed against
// shrinking and growing, mapped MAP_SHARED and registered as pinned (register_host in
// ferry/device/runtime.h) in every process that maps it; its handle travels over the IPC
// channel (IpcConnection::send_handle) as the memfd.
// Guarantees: the pages are the same physical pages in every process (a write in one is seen by
// the others; no process holds a private copy); an import checks the descriptor is such a sealed
// memfd of the size the handle states (a peer cannot hand over a file that later shrinks under
// the mapping); destruction (RAII, move-only) unregisters and unmaps, after queued copies that
// may read the memory are done. Registration happens only when some backend has devices; with
// none the buffer is shared but not pinned (is_pinned() says which).
#pragma once

#include <cstddef>
#include <string>

#include "ferry/device/ipc_handle.h"

namespace ferry::memory {

class SharedHostBuffer {
 public:
  SharedHostBuffer() = default;
  // A new zero-filled buffer of `nbytes` (> 0) bytes; `name` shows in /proc/<pid>/maps.
  explicit SharedHostBuffer(size_t nbytes, const std::string& name = "ferry-shared-host");
  // Maps another process's buffer (from its export_handle()). Raises DeviceError for a handle
  // that is not a sealed SharedHostBuffer memfd of the stated size.
  static SharedHostBuffer import(const IpcHandle& handle);
  SharedHostBuffer(const SharedHostBuffer&) = delete;
  SharedHostBuffer& operator=(const SharedHostBuffer&) = delete;
  SharedHostBuffer(SharedHostBuffer&& other) noexcept;
  SharedHostBuffer& operator=(SharedHostBuffer&& other) noexcept;
  ~SharedHostBuffer() { reset(); }

  // A handle owning a duplicate of the memfd (device: cpu, size: size()).
  IpcHandle export_handle() const;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // Whether this process registered the mapping as pinned.
  bool is_pinned() const { return registered_; }
  explicit operator bool() const { return data_ != nullptr; }
  // Unregisters and unmaps now (waiting for queued work, as pinned_free does).
  void reset() noexcept;

 private:
  // Maps `fd` (`size` bytes, page-rounded to `mapped`) and registers the mapping.
  void map(UniqueFd fd, size_t size, const char* call);

  UniqueFd fd_;
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
  bool registered_ = false;
};

}  // namespace ferry::memory
