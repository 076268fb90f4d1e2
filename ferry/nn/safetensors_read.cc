// The load paths: a private mapping handed out as zero-copy tensors, one pinned block read with
// large reads, and read_into, which reads host destinations directly and streams device
// destinations through a ring of pinned staging chunks: while the device's current stream copies
// chunk k, the host reads chunk k + 1 into the next slot; a slot is refilled only after the event
// recorded behind its copies has completed, and each copy records an event on the slot's pinned
// block (copy_'s non-blocking rule), so freeing the ring early is safe too.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "ferry/core/error.h"
#include "ferry/core/memory_format.h"
#include "ferry/device/event.h"
#include "ferry/device/stream.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/nn/safetensors_io.h"
#include "ferry/ops/factories.h"

namespace ferry::safetensors::detail {
namespace {

uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

Tensor over_storage(Storage storage, const TensorInfo& info) {
  return make_tensor(std::move(storage), info.dtype, info.shape, contiguous_strides(info.shape), 0);
}

bool aligned_for(const void* p, ScalarType dtype) {
  return reinterpret_cast<uintptr_t>(p) % element_size(dtype) == 0;
}

// A copy of `nbytes` at `p` in new memory (pinned or not) with the tensor's dtype and shape.
Tensor copied_out(const void* p, const TensorInfo& info, bool pinned) {
  Tensor t = empty(info.shape, TensorOptions(info.dtype).pinned_memory(pinned));
  if (info.nbytes() > 0) std::memcpy(t.data_ptr(), p, info.nbytes());
  return t;
}

// A BOOL tensor's bytes must be 0 or 1: any other byte is not a bool, and the kernels that read
// it as one would misbehave. `bytes` holds the tensor's bytes [offset, offset + n).
void check_bool_bytes(const File& file, const TensorInfo& info, const void* bytes, uint64_t n,
                      uint64_t offset = 0) {
  if (info.dtype != kBool) return;
  const auto* b = static_cast<const unsigned char*>(bytes);
  const auto* bad = std::find_if(b, b + n, [](unsigned char v) { return v > 1; });
  FERRY_CHECK(bad == b + n, "safetensors: ", file.path(), ": tensor '", info.name,
              "': expected BOOL bytes of 0 or 1, found ", static_cast<int>(*bad), " at element ",
              offset + static_cast<uint64_t>(bad - b));
}

struct Mapping {
  void* address = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (address != nullptr) ::munmap(address, length);
  }
};

void release_mapping(void* context) { delete static_cast<std::shared_ptr<Mapping>*>(context); }

void check_target(const ReadTarget& t, const std::string& path) {
  const TensorInfo& info = *t.info;
  FERRY_CHECK(t.dst.defined() && t.dst.dtype() == info.dtype && t.dst.is_contiguous() &&
                  t.dst.nbytes() == info.nbytes() && !t.dst.is_conj() && !t.dst.is_neg(),
              "safetensors: ", path, ": tensor '", info.name,
              "': expected a contiguous destination of ", info.dtype, " holding ", info.nbytes(),
              " bytes");
}

void read_to_host(const File& file, const ReadTarget& t, uint64_t chunk,
                  ProgressReporter& progress) {
  const TensorInfo& info = *t.info;
  auto* dst = static_cast<char*>(t.dst.data_ptr());
  for (uint64_t off = 0; off < info.nbytes(); off += chunk) {
    const uint64_t len = std::min(chunk, info.nbytes() - off);
    file.read(dst + off, file.header().data_offset + info.begin + off, len);
    check_bool_bytes(file, info, dst + off, len, off);
    progress.advance(len);
  }
  t.dst.storage().bump_version();
}

// Device targets of one device, sorted by offset, streamed through the staging ring.
void stream_to_device(const File& file, const std::vector<const ReadTarget*>& targets,
                      Device device, const LoadOptions& options, ProgressReporter& progress) {
  const uint64_t align = file.direct() ? kDirectAlignment : 1;
  const uint64_t chunk = align_up(std::max<uint64_t>(options.chunk_bytes, 4096), align);
  const uint64_t base = file.header().data_offset;
  const Stream stream = current_stream(device);
  struct Slot {
    Tensor buffer;
    Event done;
    bool used = false;
  };
  std::vector<Slot> slots(static_cast<size_t>(std::max(1, options.staging_chunks)));
  size_t next_slot = 0;

  size_t i = 0;
  while (i < targets.size()) {
    // A run of targets adjacent in the file: [run_begin, run_end) of the data buffer.
    const uint64_t run_begin = targets[i]->info->begin;
    size_t j = i;
    uint64_t run_end = run_begin;
    while (j < targets.size() && targets[j]->info->begin == run_end)
      run_end = targets[j++]->info->end;
    if (run_end == run_begin) {  // zero-size tensors only
      i = j;
      continue;
    }
    const uint64_t span = align_up(base + run_end, align) - align_down(base + run_begin, align);
    const uint64_t buffer_bytes = std::min(chunk, span);
    size_t first = i;  // the first target of the run not yet fully copied
    for (uint64_t cs = align_down(base + run_begin, align); cs < base + run_end; cs += chunk) {
      const uint64_t ce = std::min(cs + chunk, base + run_end);
      Slot& slot = slots[next_slot++ % slots.size()];
      if (slot.used) slot.done.synchronize();
      if (!slot.buffer.defined() || slot.buffer.nbytes() < buffer_bytes) {
        slot.buffer =
            empty({static_cast<int64_t>(buffer_bytes)}, TensorOptions(kUInt8).pinned_memory(true));
      }
      file.read_direct(slot.buffer.data_ptr(), cs, ce - cs);
      // The chunk holds data bytes [cs - base, ce - base) (less any aligned-down head).
      const uint64_t lo = std::max(cs, base + run_begin) - base;
      const uint64_t hi = ce - base;
      for (size_t k = first; k < j && targets[k]->info->begin < hi; ++k) {
        const TensorInfo& info = *targets[k]->info;
        const uint64_t b = std::max(info.begin, lo);
        const uint64_t e = std::min(info.end, hi);
        if (e > b) {
          check_bool_bytes(file, info,
                           static_cast<const char*>(slot.buffer.data_ptr()) + base + b - cs, e - b,
                           b - info.begin);
          Tensor dst = byte_view(targets[k]->dst, b - info.begin, e - b);
          dst.copy_(byte_view(slot.buffer, base + b - cs, e - b), /*non_blocking=*/true);
        }
        if (info.end <= hi) first = k + 1;
      }
      slot.done.record(stream);
      slot.used = true;
      progress.advance(hi - lo);
    }
    i = j;
  }
}

}  // namespace

Tensor byte_view(const Tensor& t, uint64_t offset, uint64_t nbytes) {
  const auto start =
      static_cast<int64_t>(static_cast<uint64_t>(t.storage_offset()) * t.itemsize() + offset);
  return make_tensor(t.storage(), kUInt8, {static_cast<int64_t>(nbytes)}, {1}, start);
}

void read_into(const File& file, const std::vector<ReadTarget>& targets, const LoadOptions& options,
               ProgressReporter& progress) {
  std::vector<const ReadTarget*> host;
  std::vector<std::pair<Device, std::vector<const ReadTarget*>>> devices;
  for (const ReadTarget& t : targets) {
    check_target(t, file.path());
    if (t.dst.is_cpu()) {
      host.push_back(&t);
    } else {
      auto it = std::find_if(devices.begin(), devices.end(),
                             [&](const auto& d) { return d.first == t.dst.device(); });
      if (it == devices.end()) it = devices.insert(devices.end(), {t.dst.device(), {}});
      it->second.push_back(&t);
    }
  }
  const auto by_offset = [](const ReadTarget* a, const ReadTarget* b) {
    return a->info->begin < b->info->begin;
  };
  std::sort(host.begin(), host.end(), by_offset);
  const uint64_t chunk = std::max<uint64_t>(options.chunk_bytes, 4096);
  for (const ReadTarget* t : host) read_to_host(file, *t, chunk, progress);
  for (auto& [device, list] : devices) {
    std::sort(list.begin(), list.end(), by_offset);
    stream_to_device(file, list, device, options, progress);
  }
}

TensorDict load_mapped(const File& file) {
  auto mapping = std::make_shared<Mapping>();
  mapping->length = file.size();
  // Private and writable: writes to a tensor stay in this process and never reach the file.
  void* p = ::mmap(nullptr, mapping->length, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd(), 0);
  FERRY_CHECK(p != MAP_FAILED, "safetensors: ", file.path(), ": mmap of ", mapping->length,
              " bytes failed: ", std::strerror(errno));
  mapping->address = p;
  TensorDict out;
  out.reserve(file.header().tensors.size());
  for (const TensorInfo& info : file.header().tensors) {
    char* data = static_cast<char*>(p) + file.header().data_offset + info.begin;
    check_bool_bytes(file, info, data, info.nbytes());
    if (!aligned_for(data, info.dtype)) {
      out.insert(info.name, copied_out(data, info, false));
      continue;
    }
    Storage storage(DataPtr(data, new std::shared_ptr<Mapping>(mapping), &release_mapping,
                            Device(DeviceType::CPU)),
                    info.nbytes());
    out.insert(info.name, over_storage(std::move(storage), info));
  }
  return out;
}

TensorDict load_pinned(const File& file, const LoadOptions& options, ProgressReporter& progress) {
  const Header& h = file.header();
  const uint64_t align = file.direct() ? kDirectAlignment : 1;
  const uint64_t start = align_down(h.data_offset, align);
  const uint64_t skew = h.data_offset - start;
  const uint64_t span = file.size() - start;
  const Storage block(std::max<uint64_t>(align_up(span, align), 1), memory::pinned_host_allocator(),
                      Device(DeviceType::CPU));
  const uint64_t chunk = align_up(std::max<uint64_t>(options.chunk_bytes, 4096), align);
  auto* base = static_cast<char*>(block.data());
  for (uint64_t off = 0; off < span; off += chunk) {
    const uint64_t len = std::min(chunk, span - off);
    file.read_direct(base + off, start + off, len);
    progress.advance(len - (off == 0 ? std::min(skew, len) : 0));
  }
  TensorDict out;
  out.reserve(h.tensors.size());
  for (const TensorInfo& info : h.tensors) {
    const uint64_t at = skew + info.begin;
    check_bool_bytes(file, info, base + at, info.nbytes());
    if (!aligned_for(base + at, info.dtype)) {
      out.insert(info.name, copied_out(base + at, info, true));
      continue;
    }
    out.insert(info.name,
               over_storage(memory::pinned_view_storage(block, at, info.nbytes()), info));
  }
  return out;
}

}  // namespace ferry::safetensors::detail
