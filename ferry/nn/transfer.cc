// The planned transfer behind Module::to and load_state_dict. Pageable host-to-device pairs (the
// small ones, or all with stage_large_tensors) are grouped by destination device and cut into
// batches of at most max_batch_bytes; each batch gets one pinned staging buffer. Small pairs take
// 64-byte aligned slots at its start: each source is copied there by the CPU copy engine (which
// applies its layout and lazy bits), that region crosses with one copy_ into a device scratch
// buffer, and each destination takes its slot with a device-side copy_ (a memcpy, or a conversion
// kernel when the dtypes differ). Large pairs follow: each is staged into its slot and at once
// copied from there into its destination, so staging the next one overlaps that copy. The staging
// buffer carries the events of the copies that read it (copy_'s pinned rule) and the scratch buffer
// is freed on the stream that used it, so both may go as soon as the copies are queued.
// batched_move reads its plain sources in place: a pageable, contiguous host source going to a
// device in its own dtype is one range of a single batched copy per device
// (Backend::memcpy_batch_async, cudaMemcpyBatchAsync on CUDA), which lands each small one in its
// 256-byte aligned slot of one device block per batch, and each large one in its own allocation.
// The bytes move once, as in one contiguous copy, and the link pays one per-copy cost. Small
// sources that need converting are converted into pinned staging slots and cross with one
// batched copy from there. Each landed destination gets a memory::device_view_storage of its
// range of the block.
#include "ferry/nn/transfer.h"

#include <algorithm>
#include <cstring>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/core/memory_format.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/ops/factories.h"

namespace ferry::nn {
namespace {

constexpr size_t kSlotAlignment = 64;
// Landed tensors start on the device allocator's alignment, as tensors of their own would.
constexpr size_t kLandAlignment = memory::kDeviceAlignment;

size_t align_up(size_t v, size_t alignment = kSlotAlignment) {
  return (v + alignment - 1) / alignment * alignment;
}

// A contiguous tensor of `dtype` and `sizes` at byte `offset` of the uint8 buffer `buffer`.
Tensor slot(const Tensor& buffer, ScalarType dtype, IntArrayRef sizes, size_t offset) {
  return make_tensor(buffer.storage(), dtype, sizes, contiguous_strides(sizes),
                     static_cast<int64_t>(offset / element_size(dtype)));
}

void add_stream(std::vector<Stream>& streams, const Stream& s) {
  if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
}

// One batch of staged pairs to `device`.
void run_batch(const std::vector<const CopyPair*>& batch, Device device,
               const TransferOptions& options, TransferReport& report) {
  std::vector<const CopyPair*> order;  // the small pairs first, then the large ones
  for (const CopyPair* p : batch) {
    if (p->src.nbytes() <= options.small_tensor_bytes) order.push_back(p);
  }
  const size_t num_small = order.size();
  for (const CopyPair* p : batch) {
    if (p->src.nbytes() > options.small_tensor_bytes) order.push_back(p);
  }
  std::vector<size_t> offsets;
  size_t total = 0, packed = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    offsets.push_back(total);
    total += align_up(order[i]->src.nbytes());
    if (i + 1 == num_small) packed = total;
  }
  const Tensor staging =
      empty({static_cast<int64_t>(total)}, TensorOptions(kUInt8).pinned_memory(true));
  if (num_small > 0) {
    for (size_t i = 0; i < num_small; ++i) {
      const Tensor& src = order[i]->src;
      slot(staging, src.dtype(), src.sizes(), offsets[i]).copy_(src);
    }
    Tensor scratch = empty({static_cast<int64_t>(packed)}, TensorOptions(kUInt8).device(device));
    scratch.copy_(staging.narrow(0, 0, static_cast<int64_t>(packed)), /*non_blocking=*/true);
    for (size_t i = 0; i < num_small; ++i) {
      const Tensor& src = order[i]->src;
      Tensor dst = order[i]->dst;
      dst.copy_(slot(scratch, src.dtype(), src.sizes(), offsets[i]), /*non_blocking=*/true);
    }
    report.packed_tensors += static_cast<int64_t>(num_small);
    report.packed_bytes += static_cast<int64_t>(packed);
  }
  for (size_t i = num_small; i < order.size(); ++i) {
    const Tensor& src = order[i]->src;
    Tensor s = slot(staging, src.dtype(), src.sizes(), offsets[i]);
    s.copy_(src);
    Tensor dst = order[i]->dst;
    dst.copy_(s, /*non_blocking=*/true);
    ++report.direct_copies;
  }
  ++report.batches;
  report.staged_tensors += static_cast<int64_t>(order.size());
}

// What is collected per destination device, in the order the devices first appear.
template <typename T>
using PerDevice = std::vector<std::pair<Device, T>>;

// `all`'s entry for `device`, added empty when it has none yet.
template <typename T>
T& group_of(PerDevice<T>& all, Device device) {
  auto it = std::find_if(all.begin(), all.end(), [&](const auto& g) { return g.first == device; });
  if (it == all.end()) it = all.insert(all.end(), {device, T{}});
  return it->second;
}

// Whether land_in_place applies to a move: a contiguous, non-empty pageable host source going to
// a device (into device memory, not pinned host memory).
bool pageable_upload(const MovePair& m, Device device, const TransferOptions& options) {
  return options.land_in_place && m.src.is_cpu() && !device.is_cpu() && m.src.numel() > 0 &&
         m.src.is_contiguous() && !m.options.pinned_memory() && !m.src.is_pinned();
}

// Whether a move's source may land in place: a small pageable upload.
bool lands_in_place(const MovePair& m, Device device, ScalarType dtype,
                    const TransferOptions& options) {
  return pageable_upload(m, device, options) &&
         static_cast<size_t>(m.src.numel()) * element_size(dtype) <= options.small_tensor_bytes;
}

// Whether a source's bytes are its destination's: its own dtype, nothing lazy to apply.
bool reads_in_place(const Tensor& src, ScalarType dtype) {
  return dtype == src.dtype() && !src.is_conj() && !src.is_neg();
}

// Whether a move that does not land is still one range of its device's batched copy: a large
// pageable upload in its own dtype.
bool batches_in_place(const MovePair& m, Device device, ScalarType dtype,
                      const TransferOptions& options) {
  return pageable_upload(m, device, options) && reads_in_place(m.src, dtype);
}

// One batched host-to-device copy on `device`'s current stream.
void copy_batch(Device device, const std::vector<CopyRange>& ranges) {
  get_backend(device.type())
      .memcpy_batch_async(device.index(), ranges, CopyKind::HostToDevice,
                          current_stream(device).raw());
}

// One batch of landing moves to `device`: one device block, a 256-byte aligned slot per move, and
// each destination made over a view storage of its slot. With `in_place`, sources in their own
// dtype become ranges of the device's batched copy (`direct`, issued later); the others (all of
// them for a non-blocking move, which must not wait for the stream as a pageable copy does) are
// written into pinned staging slots, which cross now with one batched copy that only enqueues.
void run_landing_batch(const std::vector<MovePair*>& batch, Device device, bool in_place,
                       std::vector<CopyRange>& direct, TransferReport& report) {
  const auto staged_here = [&](const MovePair& m) {
    return !in_place || !reads_in_place(m.src, m.options.dtype());
  };
  std::vector<size_t> offsets, staged_offsets(batch.size(), 0);
  size_t total = 0, staged_total = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const MovePair* m = batch[i];
    const size_t bytes = static_cast<size_t>(m->src.numel()) * element_size(m->options.dtype());
    offsets.push_back(total);
    total += align_up(bytes, kLandAlignment);
    if (staged_here(*m)) {
      staged_offsets[i] = staged_total;
      staged_total += align_up(bytes);
    }
  }
  const Tensor block = empty({static_cast<int64_t>(total)}, TensorOptions(kUInt8).device(device));
  auto* block_base = static_cast<char*>(block.data_ptr());
  Tensor staging;
  std::vector<CopyRange> staged;
  if (staged_total > 0) {
    staging =
        empty({static_cast<int64_t>(staged_total)}, TensorOptions(kUInt8).pinned_memory(true));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const Tensor& src = batch[i]->src;
    const ScalarType dtype = batch[i]->options.dtype();
    const size_t nbytes = static_cast<size_t>(src.numel()) * element_size(dtype);
    if (!staged_here(*batch[i])) {
      direct.push_back({block_base + offsets[i], src.data_ptr(), nbytes});
    } else {
      if (reads_in_place(src, dtype)) {
        // Contiguous, its own dtype: the bytes as they are (the copy engine's dispatch costs
        // more than the copy for most of these).
        std::memcpy(static_cast<char*>(staging.data_ptr()) + staged_offsets[i], src.data_ptr(),
                    nbytes);
      } else {
        slot(staging, dtype, src.sizes(), staged_offsets[i]).copy_(src);
      }
      staged.push_back({block_base + offsets[i],
                        static_cast<const char*>(staging.data_ptr()) + staged_offsets[i], nbytes});
    }
  }
  if (!staged.empty()) {
    copy_batch(device, staged);
    // The staging block is reused only once the copy has read it (copy_'s pinned rule).
    memory::pinned_record_event(staging.storage(), current_stream(device));
    ++report.landing_copies;
    report.staged_tensors += static_cast<int64_t>(staged.size());
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    MovePair& m = *batch[i];
    const ScalarType dtype = m.options.dtype();
    const size_t nbytes = static_cast<size_t>(m.src.numel()) * element_size(dtype);
    m.dst = make_tensor(memory::device_view_storage(block.storage(), offsets[i], nbytes), dtype,
                        m.src.sizes(), contiguous_strides(m.src.sizes()), 0);
  }
  report.landed_tensors += static_cast<int64_t>(batch.size());
  report.packed_tensors += static_cast<int64_t>(batch.size());
  report.packed_bytes += static_cast<int64_t>(total);
  ++report.landed_blocks;
  ++report.batches;
}

// Queues every pair (batched_copy without the final synchronization); adds the streams of its
// host<->device copies to `host_streams`.
void queue_copies(const std::vector<CopyPair>& pairs, const TransferOptions& options,
                  std::vector<Stream>& host_streams, TransferReport& report) {
  PerDevice<std::vector<const CopyPair*>> groups;
  for (const CopyPair& p : pairs) {
    FERRY_CHECK(p.dst.defined() && p.src.defined(),
                "batched_copy: expected defined tensors, but got an undefined ",
                p.dst.defined() ? "source" : "destination");
    const bool to_device = p.src.is_cpu() && !p.dst.is_cpu();
    const bool from_device = !p.src.is_cpu() && p.dst.is_cpu();
    if (to_device || from_device) {
      add_stream(host_streams, current_stream(to_device ? p.dst.device() : p.src.device()));
    }
    const bool staged =
        to_device && p.src.numel() > 0 && !p.src.is_pinned() &&
        (options.stage_large_tensors || p.src.nbytes() <= options.small_tensor_bytes);
    if (!staged) {
      Tensor dst = p.dst;
      dst.copy_(p.src, /*non_blocking=*/true);
      ++report.direct_copies;
      continue;
    }
    group_of(groups, p.dst.device()).push_back(&p);
  }
  for (const auto& [device, list] : groups) {
    std::vector<const CopyPair*> batch;
    size_t total = 0;
    for (const CopyPair* p : list) {
      const size_t bytes = align_up(p->src.nbytes());
      if (!batch.empty() && total + bytes > options.max_batch_bytes) {
        run_batch(batch, device, options, report);
        batch.clear();
        total = 0;
      }
      batch.push_back(p);
      total += bytes;
    }
    if (!batch.empty()) run_batch(batch, device, options, report);
  }
}

void finish(bool non_blocking, const std::vector<Stream>& host_streams, TransferReport& report) {
  if (!non_blocking) {
    for (const Stream& s : host_streams) {
      s.synchronize();
      ++report.synchronizations;
    }
  }
}

}  // namespace

TransferReport batched_copy(const std::vector<CopyPair>& pairs, bool non_blocking,
                            const TransferOptions& options) {
  autograd::NoGradGuard no_grad;
  TransferReport report;
  std::vector<Stream> host_streams;  // streams of host<->device copies, synchronized if blocking
  queue_copies(pairs, options, host_streams, report);
  finish(non_blocking, host_streams, report);
  return report;
}

TransferReport batched_move(std::vector<MovePair>& moves, bool non_blocking,
                            const TransferOptions& options) {
  autograd::NoGradGuard no_grad;
  TransferReport report;
  std::vector<Stream> host_streams;
  PerDevice<std::vector<MovePair*>> groups;  // landing moves per device
  PerDevice<std::vector<CopyRange>> direct;  // sources read in place by each device's batched copy
  std::vector<CopyPair> pairs;               // every other move
  for (MovePair& m : moves) {
    FERRY_CHECK(m.src.defined(), "batched_move: expected a defined source tensor");
    const Device device = m.options.device_opt().value_or(m.src.device());
    const ScalarType dtype = m.options.dtype_opt().value_or(m.src.dtype());
    m.options = m.options.dtype(dtype).device(device);
    if (lands_in_place(m, device, dtype, options)) {
      group_of(groups, device).push_back(&m);
      continue;
    }
    m.dst = empty_like(m.src, m.options);
    if (!non_blocking && batches_in_place(m, device, dtype, options)) {
      add_stream(host_streams, current_stream(device));
      group_of(direct, device).push_back({m.dst.data_ptr(), m.src.data_ptr(), m.src.nbytes()});
      continue;
    }
    pairs.push_back({m.dst, m.src});
  }
  for (const auto& [device, list] : groups) {
    add_stream(host_streams, current_stream(device));
    std::vector<CopyRange>& ranges = group_of(direct, device);
    std::vector<MovePair*> batch;
    size_t total = 0;
    for (MovePair* m : list) {
      const size_t bytes = align_up(
          static_cast<size_t>(m->src.numel()) * element_size(m->options.dtype()), kLandAlignment);
      if (!batch.empty() && total + bytes > options.max_batch_bytes) {
        run_landing_batch(batch, device, !non_blocking, ranges, report);
        batch.clear();
        total = 0;
      }
      batch.push_back(m);
      total += bytes;
    }
    if (!batch.empty()) run_landing_batch(batch, device, !non_blocking, ranges, report);
  }
  // Pageable sources: each batched copy returns once it is done (as a pageable copy_ does).
  for (const auto& [device, ranges] : direct) {
    if (ranges.empty()) continue;
    copy_batch(device, ranges);
    ++report.batched_copies;
    report.batched_ranges += static_cast<int64_t>(ranges.size());
  }
  queue_copies(pairs, options, host_streams, report);
  finish(non_blocking, host_streams, report);
  return report;
}

}  // namespace ferry::nn
