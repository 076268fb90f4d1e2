// The planned transfer behind Module::to and load_state_dict. Small pageable host-to-device pairs
// are grouped by destination device and packed: each source is copied (by the CPU copy engine,
// which applies its layout and lazy bits) into a 64-byte aligned slot of one pinned staging
// buffer, the buffer crosses with one copy_ into a device scratch buffer, and each destination
// takes its slot with a device-side copy_ (a memcpy, or a conversion kernel when the dtypes
// differ). The staging buffer carries the event of the copy that reads it (copy_'s pinned rule)
// and the scratch buffer is freed on the stream that used it, so both may go as soon as the
// copies are queued.
#include "ferry/nn/transfer.h"

#include <algorithm>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/core/memory_format.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/ops/factories.h"

namespace ferry::nn {
namespace {

constexpr size_t kSlotAlignment = 64;

size_t align_up(size_t v) { return (v + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment; }

// A contiguous tensor of `dtype` and `sizes` at byte `offset` of the uint8 buffer `buffer`.
Tensor slot(const Tensor& buffer, ScalarType dtype, IntArrayRef sizes, size_t offset) {
  return make_tensor(buffer.storage(), dtype, sizes, contiguous_strides(sizes),
                     static_cast<int64_t>(offset / element_size(dtype)));
}

void add_stream(std::vector<Stream>& streams, const Stream& s) {
  if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
}

// One packed batch of pairs to `device`: bytes [0, total) of the staging buffer.
void run_batch(const std::vector<const CopyPair*>& batch, const std::vector<size_t>& offsets,
               size_t total, Device device, TransferReport& report) {
  Tensor staging = empty({static_cast<int64_t>(total)}, TensorOptions(kUInt8).pinned_memory(true));
  for (size_t i = 0; i < batch.size(); ++i) {
    const Tensor& src = batch[i]->src;
    Tensor s = slot(staging, src.dtype(), src.sizes(), offsets[i]);
    s.copy_(src);
  }
  Tensor scratch = empty({static_cast<int64_t>(total)}, TensorOptions(kUInt8).device(device));
  scratch.copy_(staging, /*non_blocking=*/true);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Tensor& src = batch[i]->src;
    Tensor dst = batch[i]->dst;
    dst.copy_(slot(scratch, src.dtype(), src.sizes(), offsets[i]), /*non_blocking=*/true);
  }
  ++report.batches;
  report.packed_tensors += static_cast<int64_t>(batch.size());
  report.packed_bytes += static_cast<int64_t>(total);
}

}  // namespace

TransferReport batched_copy(const std::vector<CopyPair>& pairs, bool non_blocking,
                            const TransferOptions& options) {
  autograd::NoGradGuard no_grad;
  TransferReport report;
  std::vector<Stream> host_streams;  // streams of host<->device copies, synchronized if blocking
  std::vector<std::pair<Device, std::vector<const CopyPair*>>> groups;
  for (const CopyPair& p : pairs) {
    FERRY_CHECK(p.dst.defined() && p.src.defined(),
                "batched_copy: expected defined tensors, but got an undefined ",
                p.dst.defined() ? "source" : "destination");
    const bool to_device = p.src.is_cpu() && !p.dst.is_cpu();
    const bool from_device = !p.src.is_cpu() && p.dst.is_cpu();
    if (to_device || from_device) {
      add_stream(host_streams, current_stream(to_device ? p.dst.device() : p.src.device()));
    }
    const bool small = to_device && p.src.numel() > 0 &&
                       p.src.nbytes() <= options.small_tensor_bytes && !p.src.is_pinned();
    if (!small) {
      Tensor dst = p.dst;
      dst.copy_(p.src, /*non_blocking=*/true);
      ++report.direct_copies;
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == p.dst.device(); });
    if (it == groups.end()) it = groups.insert(groups.end(), {p.dst.device(), {}});
    it->second.push_back(&p);
  }
  for (const auto& [device, list] : groups) {
    std::vector<const CopyPair*> batch;
    std::vector<size_t> offsets;
    size_t total = 0;
    for (const CopyPair* p : list) {
      const size_t bytes = align_up(p->src.nbytes());
      if (!batch.empty() && total + bytes > options.max_batch_bytes) {
        run_batch(batch, offsets, total, device, report);
        batch.clear();
        offsets.clear();
        total = 0;
      }
      batch.push_back(p);
      offsets.push_back(total);
      total += bytes;
    }
    if (!batch.empty()) run_batch(batch, offsets, total, device, report);
  }
  if (!non_blocking) {
    for (const Stream& s : host_streams) {
      s.synchronize();
      ++report.synchronizations;
    }
  }
  return report;
}

}  // namespace ferry::nn
