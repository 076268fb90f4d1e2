// safetensors files: ferry::safetensors::load and save. A load validates the whole header first
// (safetensors_format.h) and then hands out tensors in the file's order in one of four ways:
// zero-copy views of a private mapping of the file (the default on the CPU), one pinned block from
// the pinned caching allocator, ordinary host memory, or a device, reached through pinned staging
// chunks whose reads overlap the device copies. Every failure is a ferry::Error naming the file;
// a BOOL tensor holding a byte other than 0 or 1 is one (on every path, as its bytes are read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/ordered_dict.h"
#include "ferry/nn/safetensors_format.h"

namespace ferry {

using TensorDict = nn::OrderedDict<std::string, Tensor>;

namespace safetensors {

// Where CPU tensors live (LoadOptions::device is the cpu).
enum class HostMemory : uint8_t {
  // Views of a private (copy-on-write) mapping of the file: no copy at load time; each tensor's
  // storage keeps the mapping alive. Writes stay in this process. A tensor whose offset is not a
  // multiple of its element size is copied out instead (the reference writer never makes one).
  kMapped,
  // One block of the pinned caching allocator holds the whole data buffer, read with large reads;
  // each tensor has a storage of its own viewing the block (asynchronous copies from any of them
  // protect the block).
  kPinned,
  // Ordinary host memory, one allocation per tensor, read into directly.
  kPageable,
};

// How the data buffer is read (not for kMapped).
enum class ReadMode : uint8_t {
  kAuto,      // buffered reads: measured fastest here (docs/nn.md, "Reading the file")
  kBuffered,  // pread through the page cache
  kDirect,    // O_DIRECT into page-aligned pinned buffers; raises if the file system refuses it
};

// The progress of one load, reported after every read.
struct Progress {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  double seconds = 0;  // since the load started
  double gb_per_s() const {
    return seconds > 0 ? static_cast<double>(bytes_done) / seconds / 1e9 : 0;
  }
  // Estimated seconds left at the rate so far (0 when done or unknown).
  double eta_seconds() const;
};
using ProgressCallback = std::function<void(const Progress&)>;

// When the load draws a progress bar (bytes, GB/s, ETA) on stderr.
enum class ProgressBar : uint8_t {
  kAuto,    // loads above kProgressBarMinBytes, when stderr is a terminal
  kAlways,  // every load, whatever its size (still only when stderr is a terminal)
  kNever,
};
inline constexpr uint64_t kProgressBarMinBytes = uint64_t{256} << 20;

struct LoadOptions {
  // cpu, or a device ("sim:0", "cuda:0") the tensors are copied to.
  Device device = Device(DeviceType::CPU);
  HostMemory host_memory = HostMemory::kMapped;
  ReadMode read_mode = ReadMode::kAuto;
  // Device loads: the pinned staging chunks (count and bytes each; the last chunk of a file may
  // be shorter). Pinned and pageable loads read this many bytes per call.
  int staging_chunks = 4;
  size_t chunk_bytes = size_t{16} << 20;
  // Device loads: return once the last copy is queued on the device's current stream (work
  // queued there afterwards sees the tensors); otherwise that stream is synchronized first.
  bool non_blocking = false;
  ProgressCallback progress;
  ProgressBar progress_bar = ProgressBar::kAuto;
};

// What load returns: name -> Tensor in the file's (data offset) order, and __metadata__.
class LoadedTensors : public TensorDict {
 public:
  Metadata metadata;
};

// Reads a safetensors file. Tensors are contiguous, with the file's dtypes and shapes.
LoadedTensors load(const std::string& path, const LoadOptions& options = {});

// Only the validated header: names, dtypes, shapes, offsets and metadata; no data is read.
Header read_header(const std::string& path);

// Writes `tensors` (any device, layout and supported dtype) as the reference writer does: data in
// writer_order, the header padded with spaces to a multiple of 8 bytes. The file is written
// under a temporary name next to `path` and renamed over it at the end, so a failed save leaves
// no partial file. Raises ferry::Error for a dtype without a safetensors name (complex), a name
// "__metadata__" or not valid UTF-8, and for I/O errors.
void save(const std::string& path, const TensorDict& tensors, const Metadata& metadata = {});

}  // namespace safetensors
}  // namespace ferry
