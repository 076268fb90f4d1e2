// Internal to the safetensors loader and Module::load: an open, validated file, the read
// primitives (buffered pread and O_DIRECT) and read_into, which fills destination tensors (host
// or device) with their bytes from the file. Guarantees: nothing outside the file is read; every
// short read or I/O error raises a ferry::Error naming the file and the offsets; device
// destinations are written only by copies queued on the device's current stream, from pinned
// staging chunks that carry events for those copies (so the chunks outlive them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/nn/progress.h"
#include "ferry/nn/safetensors.h"

namespace ferry::safetensors::detail {

// O_DIRECT reads start at, and span, multiples of this (the logical block size of every Linux
// file system that supports O_DIRECT is at most the page size).
inline constexpr uint64_t kDirectAlignment = 4096;

class File {
 public:
  // Opens `path`, reads and validates the header. With `direct`, also opens an O_DIRECT
  // descriptor for the bulk reads (raising when the file system refuses O_DIRECT).
  File(std::string path, bool direct);
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  // The file's name without its directories, for progress labels.
  std::string label() const;
  const Header& header() const { return header_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }
  bool direct() const { return direct_fd_ >= 0; }

  // Reads exactly `len` bytes at `offset` through the page cache.
  void read(void* dst, uint64_t offset, uint64_t len) const;
  // O_DIRECT: `offset` and `dst` aligned to kDirectAlignment; reads whole blocks covering
  // [offset, offset + len) (dst must have room for len rounded up), at least up to the end of
  // the file. Falls back to read() when the file was not opened with direct.
  void read_direct(void* dst, uint64_t offset, uint64_t len) const;

 private:
  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;
  uint64_t size_ = 0;
  Header header_;
};

// A tensor of the file and where its bytes go: `dst` is contiguous, has the tensor's dtype and
// element count, and lives on the host (any memory) or on a device.
struct ReadTarget {
  const TensorInfo* info = nullptr;
  Tensor dst;
};

// Fills every target. Host targets are read into directly (chunk_bytes per read); device targets
// stream through options.staging_chunks pinned chunks of options.chunk_bytes, the read of one
// chunk overlapping the device copies of the ones before. Returns once every copy is queued on
// its device's current stream (it does not synchronize it). Targets need not cover the file.
void read_into(const File& file, const std::vector<ReadTarget>& targets, const LoadOptions& options,
               ProgressReporter& progress);

// The CPU load paths of load() (HostMemory::kMapped, kPinned, kPageable).
TensorDict load_mapped(const File& file);
TensorDict load_pinned(const File& file, const LoadOptions& options, ProgressReporter& progress);

// A uint8 view of `nbytes` bytes of `t`'s storage, starting `offset` bytes into t's elements.
Tensor byte_view(const Tensor& t, uint64_t offset, uint64_t nbytes);

}  // namespace ferry::safetensors::detail
