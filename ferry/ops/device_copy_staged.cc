// Staged device copies: the plan's dense temporaries, then one plain memcpy between them. Every
// step is itself a copy_impl on one device (or on the host), so each lands on a path that needs
// no temporaries: a kernel or the CPU engine next to the data, and the memcpy in the middle.
// Every step is queued without waiting; a blocking copy that involves the host synchronizes the
// device's stream once, at the end. Host-side steps on pinned user memory run in stream order,
// as host functions on the device's current stream, so that a pinned tensor still being written
// by an earlier non-blocking copy is read only once that copy is done; on pageable memory they
// run at once, which is when a pageable memcpy reads or writes it anyway (the memcpy returns
// only once the host side of it is done, so the steps before and after it stay in order). A
// pageable source packed on the source side goes in pieces when the plan says so: each piece is
// packed now into a pinned block and moved from it without waiting, so that packing the next
// piece overlaps moving this one.
#include "ferry/backends/cpu/copy_kernel.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/ops/copy.h"
#include "ferry/ops/device_copy.h"
#include "ferry/ops/device_copy_detail.h"

namespace ferry::detail {
namespace {

// One step of a staged copy. Both on the host: the CPU engine, now or in stream order (see the
// file comment). Otherwise an ordinary copy_impl, queued without a host wait: a blocking copy
// waits once, at the end of staged_copy. Queued this way, the memcpy step records an event on
// the pinned block it reads or writes, so the block outlives it whoever frees it first.
class Steps {
 public:
  Steps(const Stream& host_order, bool ordered) : host_order_(host_order), ordered_(ordered) {}

  void run(const Tensor& dst, const Tensor& src) const {
    Tensor d = dst;
    if (!dst.is_cpu() || !src.is_cpu()) {
      copy_impl(d, src, /*non_blocking=*/true);
      return;
    }
    if (!ordered_) {
      copy_impl(d, src, /*non_blocking=*/false);
      return;
    }
    // Captures addresses only: the closure may be destroyed on a stream's worker, which must
    // not release tensors (freeing a pinned block records events). The recorded events keep
    // both blocks alive until the step has run.
    const TensorIterator iter = build_copy_iterator(d, src);
    const cpu::CopyProblem problem = cpu::copy_problem_from(iter);
    enqueue_host_function(host_order_, [problem] { cpu::copy(problem); });
    memory::pinned_record_event(dst.storage(), host_order_);
    memory::pinned_record_event(src.storage(), host_order_);
  }

 private:
  Stream host_order_;
  bool ordered_;
};

// The source side of a staged copy in plan.pieces pieces (DeviceCopyPlan::pieces): each piece of
// src_x is packed now, by this thread, into a pinned block in `layout`, and moved from it into the
// matching piece of dst_stage without waiting. The move records an event on the block, so the
// pinned allocator hands the block out again only once the link has read it.
void move_in_pieces(const Tensor& dst_stage, const Tensor& src_x, IntArrayRef layout,
                    const DeviceCopyPlan& plan, const Steps& steps) {
  const int64_t dim = plan.piece_dim;
  const int64_t n = dst_stage.size(dim);
  for (int64_t k = 0; k < plan.pieces; ++k) {
    const int64_t lo = n * k / plan.pieces;
    const int64_t len = n * (k + 1) / plan.pieces - lo;
    DimVector sizes(dst_stage.sizes());
    sizes[static_cast<size_t>(dim)] = len;
    const Tensor piece = staging_tensor(sizes, layout, dst_stage.dtype(), plan.src_device,
                                        dst_stage.is_conj(), dst_stage.is_neg(), /*pinned=*/true);
    steps.run(piece, src_x.narrow(dim, lo, len));
    steps.run(dst_stage.narrow(dim, lo, len), piece);
  }
}

}  // namespace

void staged_copy(const TensorIterator& iter, const DeviceCopyPlan& plan, bool non_blocking) {
  const Tensor& dst = iter.tensor(0);
  const Tensor& src = iter.tensor(1);
  const Device dst_device = plan.dst_device;
  const Device src_device = plan.src_device;
  const bool host_src = src_device.is_cpu();
  const bool host_dst = dst_device.is_cpu();
  const bool with_host = host_src || host_dst;
  // Host work is ordered on the stream the host<->device memcpy uses.
  const Stream stream = with_host ? current_stream(host_src ? dst_device : src_device) : Stream();
  // The plan pins host temporaries exactly when the host steps are queued (pinned user memory).
  const bool ordered = plan.pinned_host_temporaries;
  const Steps steps(stream, ordered);
  const bool pin_src_temp = host_src && ordered;
  const bool pin_dst_temp = host_dst && ordered;

  const Tensor src_x = expanded_source(dst, src);
  if (plan.side == StagingSide::kSource) {
    // Convert (and lay out) next to the source, move, copy back into a non-dense destination; a
    // pageable host source goes in pieces when the plan says so.
    const DimVector layout = source_side_layout(dst, src_x);
    Tensor dst_stage = dst;
    if (plan.dst_temporary) {
      dst_stage = staging_tensor(dst.sizes(), layout, dst.dtype(), dst_device, dst.is_conj(),
                                 dst.is_neg(), pin_dst_temp);
    }
    if (plan.pieces > 1) {
      move_in_pieces(dst_stage, src_x, layout, plan, steps);
    } else {
      Tensor src_stage = src_x;
      if (plan.src_temporary) {
        src_stage = staging_tensor(dst.sizes(), layout, dst.dtype(), src_device, dst.is_conj(),
                                   dst.is_neg(), pin_src_temp);
        steps.run(src_stage, src_x);
      }
      steps.run(dst_stage, src_stage);
    }
    if (plan.dst_temporary) steps.run(dst, dst_stage);
  } else {
    // Move the source's own elements, then convert, broadcast and scatter next to dst.
    const Tensor compact = compact_source(src_x);
    Tensor src_stage = compact;
    if (plan.src_temporary) {
      src_stage = staging_tensor(compact.sizes(), destination_side_layout(compact), src.dtype(),
                                 src_device, src.is_conj(), src.is_neg(), pin_src_temp);
      steps.run(src_stage, compact);
    }
    const Tensor dst_stage = staging_tensor(src_stage.sizes(), src_stage.strides(), src.dtype(),
                                            dst_device, src.is_conj(), src.is_neg(), pin_dst_temp);
    steps.run(dst_stage, src_stage);
    steps.run(dst, dst_stage.expand(dst.sizes()));
  }
  // A blocking copy involving the host returns with the device's stream done, so the host may
  // read the destination or reuse the source. This is the copy's only host wait.
  if (with_host && !non_blocking) stream.synchronize();
}

}  // namespace ferry::detail
