// plan_device_copy: which path a device copy takes and, for a staged copy, which side does the
// strided and converting work and which temporaries it needs. Kept apart from the code that
// runs the plan (device_copy.cc, device_copy_staged.cc) so that tests and tools see exactly the
// decision the copy acts on.
#include <atomic>
#include <map>
#include <mutex>
#include <sstream>

#include "ferry/device/runtime.h"
#include "ferry/iter/parallel.h"
#include "ferry/iter/stride_order.h"
#include "ferry/ops/copy.h"
#include "ferry/ops/device_copy.h"
#include "ferry/ops/device_copy_detail.h"
#include "ferry/ops/factories.h"

namespace ferry {
namespace detail {

DimVector source_side_layout(const Tensor& dst, const Tensor& src_expanded) {
  if (dst.is_non_overlapping_and_dense()) return DimVector(dst.strides());
  if (same_stored_values(dst, src_expanded) && src_expanded.is_non_overlapping_and_dense()) {
    return DimVector(src_expanded.strides());
  }
  return infer_dense_strides(dst.sizes(), dst.strides());
}

DimVector destination_side_layout(const Tensor& compact) {
  if (compact.is_non_overlapping_and_dense()) return DimVector(compact.strides());
  return infer_dense_strides(compact.sizes(), compact.strides());
}

Tensor staging_tensor(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype, Device device,
                      bool conj, bool neg, bool pinned) {
  Tensor t =
      empty_strided(sizes, strides, TensorOptions(dtype).device(device).pinned_memory(pinned));
  if (conj) t = t.conj();
  if (neg) t = t._neg_view();
  return t;
}

}  // namespace detail

namespace {

using detail::same_stored_values;

std::atomic<int64_t> g_staged_piece_bytes{int64_t{4} << 20};

// The dimension of the largest stride among those of size above 1 in a dense layout: its
// outermost in memory, along which a range of indices is one contiguous block; -1 if none.
int64_t outermost_dim(IntArrayRef sizes, IntArrayRef strides) {
  int64_t best = -1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && (best < 0 || strides[d] > strides[static_cast<size_t>(best)])) {
      best = static_cast<int64_t>(d);
    }
  }
  return best;
}

void check_device_pair(Device dst, Device src) {
  FERRY_CHECK_AS(NotImplementedError, dst.is_cpu() || src.is_cpu() || dst.type() == src.type(),
                 "copy_: expected the two devices to be of one type, or one of them the cpu, but "
                 "got ",
                 dst, " (destination) and ", src,
                 " (source); copy through the host instead (t.cpu(), then to())");
}

// Which of the two staged variants the rule allows: a conversion runs on the device when
// the copy is non-blocking or the destination is a device, on the host otherwise; a copy that
// only moves values may run either way.
struct AllowedSides {
  bool source = true;
  bool destination = true;
};

AllowedSides allowed_sides(const DeviceCopyPlan& plan, bool converts, bool non_blocking) {
  if (!converts) return {};
  if (plan.src_device.is_cpu()) return {false, true};                  // host to device
  if (plan.dst_device.is_cpu()) return {non_blocking, !non_blocking};  // device to host
  return {};                                                           // device to device
}

}  // namespace

Stream piece_side_stream(Device device) {
  static std::mutex mutex;
  using Key = std::pair<int, int>;                     // device type, index
  static auto* streams = new std::map<Key, Stream>();  // never destroyed, as streams are not
  const Key key{static_cast<int>(device.type()), device.index()};
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = streams->find(key);
  if (it != streams->end()) return it->second;
  const Stream stream = create_stream_with_priority(device, 0);
  streams->emplace(key, stream);
  return stream;
}

int64_t staged_piece_bytes() { return g_staged_piece_bytes.load(std::memory_order_relaxed); }

int64_t set_staged_piece_bytes(int64_t bytes) {
  FERRY_CHECK(bytes >= 1, "set_staged_piece_bytes: expected at least 1 byte, but got ", bytes);
  return g_staged_piece_bytes.exchange(bytes, std::memory_order_relaxed);
}

const char* device_copy_path_name(DeviceCopyPath path) {
  switch (path) {
    case DeviceCopyPath::kMemcpy:
      return "memcpy";
    case DeviceCopyPath::kKernel:
      return "kernel";
    case DeviceCopyPath::kPeerKernel:
      return "peer kernel";
    case DeviceCopyPath::kStaged:
      return "staged";
  }
  return "?";
}

const char* staging_side_name(StagingSide side) {
  switch (side) {
    case StagingSide::kNone:
      return "none";
    case StagingSide::kSource:
      return "source";
    case StagingSide::kDestination:
      return "destination";
  }
  return "?";
}

std::string DeviceCopyPlan::describe() const {
  std::ostringstream out;
  out << device_copy_path_name(path) << " from " << src_device << " to " << dst_device;
  if (path == DeviceCopyPath::kStaged) {
    const Device at = side == StagingSide::kSource ? src_device : dst_device;
    out << ": strided work on the " << staging_side_name(side) << " (" << at << "); temporaries: ";
    if (!src_temporary && !dst_temporary) out << "none";
    if (src_temporary) out << "source side" << (dst_temporary ? ", " : "");
    if (dst_temporary) out << "destination side";
    const bool host_temporary =
        (src_temporary && src_device.is_cpu()) || (dst_temporary && dst_device.is_cpu());
    if (pieces > 1) {
      const bool pack = src_temporary;
      out << " (" << (host_temporary ? "pinned host, " : "") << "in " << pieces
          << " pieces along dim " << piece_dim << ": each "
          << (pack ? "packed while the one before moves" : "scattered while the next moves")
          << ", on ";
      if (pieces_on_side_stream) {
        out << "a side stream of " << piece_device << ")";
      } else {
        out << "the calling thread)";
      }
    } else if (host_temporary) {
      out << (pinned_host_temporaries ? " (pinned host)" : " (pageable host)");
    }
  }
  if (!src_device.is_cpu() && !dst_device.is_cpu() && src_device != dst_device) {
    out << (peer ? "; peer access on" : "; no peer access");
  }
  if (bytes_moved > 0) out << "; " << bytes_moved << " bytes cross";
  return out.str();
}

DeviceCopyPlan plan_device_copy(const TensorIterator& iter, bool non_blocking) {
  DeviceCopyPlan plan;
  plan.dst_device = iter.device(0);
  plan.src_device = iter.device(1);
  check_device_pair(plan.dst_device, plan.src_device);
  FERRY_CHECK(!plan.dst_device.is_cpu() || !plan.src_device.is_cpu(),
              "device copy: expected a device operand, but both are on the cpu");
  const Tensor& dst = iter.tensor(0);
  const Tensor& src = iter.tensor(1);
  const bool same_values = same_stored_values(dst, src);
  const bool cross = plan.dst_device != plan.src_device;
  const bool both_devices = !plan.dst_device.is_cpu() && !plan.src_device.is_cpu();
  // PyTorch's maybe_enable_p2p_access(dst, src): the copy runs on the source device, so that is
  // the device that needs access to the destination's memory.
  if (cross && both_devices) plan.peer = enable_peer_access(plan.src_device, plan.dst_device);

  if (same_values && iter.is_contiguous()) {
    plan.path = DeviceCopyPath::kMemcpy;
    if (cross) plan.bytes_moved = iter.numel() * iter.element_size(0);
    return plan;
  }
  if (!cross) {
    plan.path = DeviceCopyPath::kKernel;
    return plan;
  }
  if (plan.peer) {
    plan.path = DeviceCopyPath::kPeerKernel;
    plan.bytes_moved = iter.numel() * iter.element_size(0);
    return plan;
  }

  // Staged: compare moving dst's values (converted at the source) with moving the source's own
  // elements (converted at the destination). Fewer bytes across the link first, then fewer
  // temporaries; a tie converts at the source, as PyTorch does.
  plan.path = DeviceCopyPath::kStaged;
  const Tensor src_x = detail::expanded_source(dst, src);
  const DimVector layout = detail::source_side_layout(dst, src_x);
  const bool a_src_temp =
      !(same_values && src_x.is_non_overlapping_and_dense() && src_x.strides().equals(layout));
  const bool a_dst_temp = !dst.is_non_overlapping_and_dense();
  const int64_t a_bytes = dst.numel() * static_cast<int64_t>(dst.element_size());
  const Tensor compact = compact_broadcast(src_x);
  const bool b_src_temp = !compact.is_non_overlapping_and_dense();
  const int64_t b_bytes = compact.numel() * static_cast<int64_t>(src.element_size());

  const AllowedSides allowed = allowed_sides(plan, !same_values, non_blocking);
  bool use_source = allowed.source;
  if (allowed.source && allowed.destination) {
    const int a_temps = int{a_src_temp} + int{a_dst_temp};
    const int b_temps = int{b_src_temp} + 1;
    use_source = a_bytes < b_bytes || (a_bytes == b_bytes && a_temps <= b_temps);
  }
  if (use_source) {
    plan.side = StagingSide::kSource;
    plan.src_temporary = a_src_temp;
    plan.dst_temporary = a_dst_temp;
    plan.bytes_moved = a_bytes;
  } else {
    plan.side = StagingSide::kDestination;
    plan.src_temporary = b_src_temp;
    plan.dst_temporary = true;
    plan.bytes_moved = b_bytes;
  }
  // Pinned host temporaries only when the host steps are queued (pinned user memory): then the
  // memcpy next to them is queued too, and the pinned allocator holds the blocks until both
  // have run. With pageable user memory every step involving the host is done when copy_
  // returns, so plain memory serves.
  plan.pinned_host_temporaries = (plan.src_device.is_cpu() && src.is_pinned()) ||
                                 (plan.dst_device.is_cpu() && dst.is_pinned());
  // In pieces when there is one strided step beside the move (a pack before it or a scatter
  // after it), so that it overlaps the move of the next piece (DeviceCopyPlan::pieces).
  const bool pack = plan.src_temporary;
  if (pack != plan.dst_temporary) {
    const bool source_side = plan.side == StagingSide::kSource;
    const Tensor& moved = source_side ? dst : compact;  // its sizes; the moved layout's strides:
    const DimVector moved_layout = source_side ? layout : detail::destination_side_layout(compact);
    const int64_t dim = outermost_dim(moved.sizes(), moved_layout);
    const int64_t pieces =
        dim < 0 ? 1 : std::min(plan.bytes_moved / staged_piece_bytes(), moved.size(dim));
    // Host work on pageable memory runs on the calling thread (the copy returns only once it
    // is done anyway); host work on pinned memory is queued in the device's stream order, and
    // device work runs on the device: both on a side stream of that device.
    const Device work = pack ? plan.src_device : plan.dst_device;
    const Device other = pack ? plan.dst_device : plan.src_device;
    const bool on_side_stream = !work.is_cpu() || plan.pinned_host_temporaries;
    const Device side_device = work.is_cpu() ? other : work;
    // A side stream's work overlaps the transfers only on their own engines, or, where host
    // threads do both (the sim), when the work leaves a CPU to the transfer: with a pool of one
    // thread. With more, the two contend for the CPUs and the pieces cost more than they save
    // (docs/device_copy.md, "In pieces").
    const bool overlaps = !on_side_stream || !get_backend(side_device.type()).runs_on_host_cpus() ||
                          get_num_threads() == 1;
    if (pieces >= 2 && overlaps) {
      plan.pieces = pieces;
      plan.piece_dim = dim;
      plan.pieces_on_side_stream = on_side_stream;
      plan.piece_device = side_device;
    }
  }
  return plan;
}

DeviceCopyPlan plan_device_copy(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const TensorIterator iter = build_copy_iterator(dst, src);
  return plan_device_copy(iter, non_blocking);
}

}  // namespace ferry
