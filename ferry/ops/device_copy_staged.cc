// Staged device copies: the plan's dense temporaries, then one plain memcpy between them. Every
// step is itself a copy_impl on one device (or on the host), so each lands on a path that needs
// no temporaries: a kernel or the CPU engine next to the data, and the memcpy in the middle.
// Every step is queued without waiting; a blocking copy that involves the host synchronizes the
// device's stream once, at the end. Host-side steps on pinned user memory run in stream order,
// as host functions on the device's current stream, so that a pinned tensor still being written
// by an earlier non-blocking copy is read only once that copy is done; on pageable memory they
// run at once, which is when a pageable memcpy reads or writes it anyway (the memcpy returns
// only once the host side of it is done, so the steps before and after it stay in order). A
// copy with one strided step beside the move goes in pieces when the plan says so (PieceCopy),
// the step of one piece overlapping the move of the next: on the calling thread through pinned
// blocks for host work on pageable memory, else on a side stream whose work the moves and the
// current stream wait for through events, never the host.
#include <algorithm>
#include <optional>
#include <vector>

#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/iter/copy_stub.h"
#include "ferry/iter/parallel.h"
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
    const CopyProblem problem = copy_problem_from(iter);
    enqueue_host_function(host_order_, [problem] { copy_problem_stub(DeviceType::CPU, problem); });
    memory::pinned_record_event(dst.storage(), host_order_);
    memory::pinned_record_event(src.storage(), host_order_);
  }

 private:
  Stream host_order_;
  bool ordered_;
};

// A staged copy in plan.pieces pieces (DeviceCopyPlan::pieces): for each piece along
// plan.piece_dim of the moved layout, the strided step (a pack before the move, or a scatter
// after it) and the move, arranged so that the step of one piece overlaps the move of the next.
// A host temporary is a pinned block per piece: the pinned allocator hands a block out again
// only once every step that used it has run (each records an event on its stream), so the
// pieces in flight form a ring of a few blocks. A device temporary is one block of the whole,
// allocated on its device's current stream, which waits for the side stream at the end.
class PieceCopy {
 public:
  PieceCopy(const Tensor& dst, const Tensor& src_x, const DeviceCopyPlan& plan)
      : dst_(dst), plan_(plan), pack_(plan.src_temporary) {
    if (plan.side == StagingSide::kSource) {
      layout_ = source_side_layout(dst, src_x);
      moved_src_ = src_x;  // pack: the pieces are packed from it; else moved from it
      temp_like_ = dst;    // the temporaries hold dst's dtype and lazy bits
    } else {
      moved_src_ = compact_broadcast(src_x);
      layout_ = destination_side_layout(moved_src_);
      temp_like_ = moved_src_;  // the source's own elements
    }
    temp_device_ = pack_ ? plan.src_device : plan.dst_device;
    if (plan.pieces_on_side_stream) {
      side_ = piece_side_stream(plan.piece_device);
      owner_ = current_stream(plan.piece_device);
    }
    const Device move_device = plan.src_device.is_cpu() ? plan.dst_device : plan.src_device;
    move_stream_ = current_stream(move_device);
    // Where host threads do the moves (the sim), the calling thread's steps leave them a CPU:
    // with the whole pool the two only contend (docs/device_copy.md, "In pieces").
    if (!side_ && get_backend(move_device.type()).runs_on_host_cpus()) {
      step_threads_ = std::max(1, get_num_threads() - 1);
    }
    if (!temp_device_.is_cpu()) whole_temp_ = temporary(moved_src_.sizes());
  }

  void run() {
    if (side_) {
      // The side stream starts after the work already queued on the device's current stream,
      // which may still write the source or read and write the destination.
      Event start;
      start.record(*owner_);
      start.block(*side_);
    }
    if (pack_) {
      run_packs();
    } else if (side_) {
      run_scatters_on_side();
    } else {
      run_scatters_here();
    }
    if (side_) {
      // What the caller queues next on the current stream sees every piece done (and may reuse
      // the device temporary).
      Event done;
      done.record(*side_);
      done.block(*owner_);
    }
  }

 private:
  int64_t lo(int64_t k) const { return size() * k / plan_.pieces; }
  int64_t len(int64_t k) const { return lo(k + 1) - lo(k); }
  int64_t size() const { return moved_src_.size(plan_.piece_dim); }
  Tensor narrow(const Tensor& t, int64_t k) const {
    return t.narrow(plan_.piece_dim, lo(k), len(k));
  }

  Tensor temporary(IntArrayRef sizes) const {
    return staging_tensor(sizes, layout_, temp_like_.dtype(), temp_device_, temp_like_.is_conj(),
                          temp_like_.is_neg(), /*pinned=*/temp_device_.is_cpu());
  }
  // Piece k's temporary: a pinned block of its own on the host, a slice of the whole on a device.
  Tensor piece_temporary(int64_t k) const {
    if (whole_temp_.defined()) return narrow(whole_temp_, k);
    DimVector sizes(moved_src_.sizes());
    sizes[static_cast<size_t>(plan_.piece_dim)] = len(k);
    return temporary(sizes);
  }

  // The strided step, on the side stream (a kernel there, or a host function in its order) or
  // now on the calling thread.
  void step(const Tensor& to, const Tensor& from) const {
    if (!side_) {
      const ThreadCapGuard cap(step_threads_);
      Steps(Stream(), /*ordered=*/false).run(to, from);
      return;
    }
    std::optional<StreamGuard> guard;  // a kernel runs on its device's current stream
    if (!temp_device_.is_cpu()) guard.emplace(*side_);
    Steps(*side_, /*ordered=*/true).run(to, from);
  }
  // The move, on the current streams (its memcpy records its event on a pinned block).
  static void move(const Tensor& to, const Tensor& from) {
    Tensor d = to;
    copy_impl(d, from, /*non_blocking=*/true);
  }
  // The scatter of piece k from its temporary into the destination (broadcast dimensions of the
  // source's own elements expand here).
  void scatter(int64_t k, const Tensor& temp) const {
    const Tensor to = narrow(dst_, k);
    step(to, temp.expand(to.sizes()));
  }

  // Source side: pack piece k, then move it; packing k + 1 overlaps moving k. Here on the
  // calling thread, each piece is packed and its move queued in turn (the move from a pinned
  // block does not wait). On the side stream every pack is queued first, each with its event,
  // and then the moves, each after its pack's event: a move into pageable host memory returns
  // only once it is done, and queued in turn it would hold the next pack back.
  void run_packs() const {
    if (!side_) {
      for (int64_t k = 0; k < plan_.pieces; ++k) {
        const Tensor temp = piece_temporary(k);
        step(temp, narrow(moved_src_, k));
        move(narrow(dst_, k), temp);
      }
      return;
    }
    struct Packed {
      Tensor temp;
      Event event;
    };
    std::vector<Packed> packed;
    packed.reserve(static_cast<size_t>(plan_.pieces));
    for (int64_t k = 0; k < plan_.pieces; ++k) {
      Packed& p = packed.emplace_back(Packed{piece_temporary(k), Event()});
      step(p.temp, narrow(moved_src_, k));
      p.event.record(*side_);
    }
    for (int64_t k = 0; k < plan_.pieces; ++k) {
      Packed& p = packed[static_cast<size_t>(k)];
      p.event.block(move_stream_);
      move(narrow(dst_, k), p.temp);
    }
  }

  // Move piece k, then scatter it on the side stream once the move is done there.
  void run_scatters_on_side() const {
    for (int64_t k = 0; k < plan_.pieces; ++k) {
      const Tensor temp = piece_temporary(k);
      move(temp, narrow(moved_src_, k));
      Event moved;
      moved.record(move_stream_);
      moved.block(*side_);
      scatter(k, temp);
    }
  }

  // Scatter here, on the host, from pinned blocks: the move of piece k + 1 is queued before the
  // host waits for piece k, so the link moves the next piece while the host scatters this one.
  void run_scatters_here() const {
    struct Moved {
      Tensor temp;
      Event event;
    };
    const auto start_move = [&](int64_t k) {
      Moved m{piece_temporary(k), Event()};
      move(m.temp, narrow(moved_src_, k));
      m.event.record(move_stream_);
      return m;
    };
    Moved current = start_move(0);
    for (int64_t k = 0; k < plan_.pieces; ++k) {
      std::optional<Moved> next;
      if (k + 1 < plan_.pieces) next.emplace(start_move(k + 1));
      current.event.synchronize();
      scatter(k, current.temp);
      if (next) current = std::move(*next);
    }
  }

  const Tensor& dst_;
  const DeviceCopyPlan& plan_;
  const bool pack_;
  DimVector layout_;
  Tensor moved_src_;
  Tensor temp_like_;
  Device temp_device_;
  Tensor whole_temp_;
  std::optional<Stream> side_;
  std::optional<Stream> owner_;
  Stream move_stream_;
  int step_threads_ = detail::kMaxThreads;  // the calling thread's steps: at most this many
};

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
  if (plan.pieces > 1) {
    PieceCopy(dst, src_x, plan).run();
  } else if (plan.side == StagingSide::kSource) {
    // Convert (and lay out) next to the source, move, copy back into a non-dense destination.
    const DimVector layout = source_side_layout(dst, src_x);
    Tensor dst_stage = dst;
    if (plan.dst_temporary) {
      dst_stage = staging_tensor(dst.sizes(), layout, dst.dtype(), dst_device, dst.is_conj(),
                                 dst.is_neg(), pin_dst_temp);
    }
    Tensor src_stage = src_x;
    if (plan.src_temporary) {
      src_stage = staging_tensor(dst.sizes(), layout, dst.dtype(), src_device, dst.is_conj(),
                                 dst.is_neg(), pin_src_temp);
      steps.run(src_stage, src_x);
    }
    steps.run(dst_stage, src_stage);
    if (plan.dst_temporary) steps.run(dst, dst_stage);
  } else {
    // Move the source's own elements, then convert, broadcast and scatter next to dst.
    const Tensor compact = compact_broadcast(src_x);
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
