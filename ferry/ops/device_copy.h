// The device copy policy: the copy_stub kernel of every device type (sim, CUDA), written once
// above the backend contract, and the device side of fill_. It decides whether a copy needs
// temporaries and where each step runs; backends only provide memcpy/memset primitives
// (ferry/device/backend.h) and a strided copy kernel (ferry/device/device_copy_kernel.h).
// Invariants: device-to-device work runs on the source device's current stream, bracketed by
// an event handshake with the destination's current stream when the devices differ; host and
// device work runs on the device's current stream; a blocking copy involving the host returns
// with that stream synchronized; every temporary is used only on the stream it was allocated
// on (or on a stream that the allocation stream waits for before freeing), and every pinned
// host block a queued step reads or writes has an event recorded on that step's stream.
// See docs/copy.md, "Copies between devices".
#pragma once

#include <cstdint>
#include <string>

#include "ferry/core/device.h"
#include "ferry/core/scalar.h"
#include "ferry/core/tensor.h"
#include "ferry/device/stream.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry {

// How device_copy carries out one copy.
enum class DeviceCopyPath : uint8_t {
  kMemcpy,      // dense, same dtype and lazy bits: one memcpy (host<->device, device, or peer)
  kKernel,      // both operands on one device: a strided/converting kernel there
  kPeerKernel,  // two devices with peer access: a kernel on the source device reaches the peer
  kStaged,      // dense temporaries, one memcpy between them, strided work on one side
};
// "memcpy", "kernel", "peer kernel", "staged".
const char* device_copy_path_name(DeviceCopyPath path);

// For kStaged: the side that does the strided and converting work.
//  kSource:      convert and lay out on the source side, move, then (for a non-dense
//                destination) copy back into the destination;
//  kDestination: move the source's own elements (broadcast dimensions once), then convert and
//                scatter on the destination side.
enum class StagingSide : uint8_t { kNone, kSource, kDestination };
const char* staging_side_name(StagingSide side);

struct DeviceCopyPlan {
  DeviceCopyPath path = DeviceCopyPath::kMemcpy;
  Device dst_device;
  Device src_device;
  // Whether the source device may access the destination device's memory (peer access on).
  bool peer = false;
  // kStaged only.
  StagingSide side = StagingSide::kNone;
  bool src_temporary = false;  // a dense temporary next to the source
  bool dst_temporary = false;  // a dense temporary next to the destination
  // A temporary on the host comes from the pinned allocator (and the host steps run in stream
  // order, as host functions) exactly when the host operand is pinned; otherwise it is pageable
  // memory from the CPU allocator and the host steps run when copy_ is called.
  bool pinned_host_temporaries = false;
  int64_t bytes_moved = 0;  // bytes that cross between the two devices
  // kStaged with one strided step beside the move (a pack into a source temporary before it, or
  // a scatter out of a destination temporary after it) and at least two pieces' bytes: the copy
  // goes in `pieces` pieces along the outermost dimension of the moved layout (`piece_dim`), so
  // that the strided step of one piece overlaps the move of the next and the copy costs about
  // the larger of the two instead of their sum. The strided step runs on the calling thread when
  // it is host work on pageable memory (host temporaries are then pinned blocks, one per piece,
  // so that the moves need not wait), else on a side stream of `piece_device`
  // (piece_side_stream), ordered with the moves by events. Host temporaries are one pinned block
  // per piece; a device temporary is one block of the whole. 1: no pieces. See
  // staged_piece_bytes.
  int64_t pieces = 1;
  int64_t piece_dim = -1;
  bool pieces_on_side_stream = false;
  Device piece_device;

  // One line, e.g. "staged from cpu to sim:0: strided work on the destination (sim:0);
  // temporaries: destination side; 4096 bytes cross".
  std::string describe() const;
};

// The plan device_copy follows for a copy iterator built by copy_ (dst operand 0, src operand
// 1, at least one of them on a device). Turns peer access on between two devices of one type
// when the runtime allows it (as the copy itself would). Raises NotImplementedError for two
// devices of different types (sim and CUDA).
DeviceCopyPlan plan_device_copy(const TensorIterator& iter, bool non_blocking);
// The same for dst.copy_(src): builds copy_'s iterator first.
DeviceCopyPlan plan_device_copy(const Tensor& dst, const Tensor& src, bool non_blocking);

// The bytes a staged copy aims to move per piece (see DeviceCopyPlan::pieces): 4 MiB by default,
// a copy of fewer than two pieces' bytes goes whole. set_staged_piece_bytes changes it for the
// process (tests make pieces of a few bytes to reach the pieces path with small tensors) and
// returns the previous value; at least 1.
int64_t staged_piece_bytes();
int64_t set_staged_piece_bytes(int64_t bytes);

// The stream of `device` on which staged copies in pieces run their strided steps beside the
// moves on the current stream (created on first use, one per device, kept for the process).
Stream piece_side_stream(Device device);

// The copy_stub kernel registered for DeviceType::Sim and DeviceType::CUDA.
void device_copy(TensorIterator& iter, bool non_blocking);

// fill_ of a device tensor: stores `stored` (the value the tensor's lazy bits read back as the
// requested one) into every element, on the device's current stream, without waiting: one
// memset when the tensor is dense and the value's bytes are all equal, else the device kernel.
void device_fill(const Tensor& self, const Scalar& stored);

}  // namespace ferry
