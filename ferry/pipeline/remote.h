// Micro-batches and their gradients between processes (GPipe across ranks, gpipe.h): the
// autograd functions that wrap a transport send and receive the way Copy wraps a stream copy.
//
// remote_send(x) sends x to the next rank and returns a phony (an empty tensor) whose backward
// receives x's gradient from that rank (onto x's device, written on the stream the engine runs
// the node on) and passes it to x's history. remote_recv(...) receives a micro-batch onto a
// device (written on that device's current stream, so the work queued there next sees it); when
// asked for a gradient, the result hangs on a node whose backward sends its gradient back (zeros
// if none reached it, so the sender's backward never waits forever).
// Sends never block: their futures go to a SendLog, which a pipeline drains (bounded) before its
// next run and when it goes away. Tags keep runs, boundaries, micro-batches and directions apart.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"
#include "ferry/transport/group.h"

namespace ferry::pipeline {

// Where a partition runs: a rank of the group and a device of that rank.
struct Placement {
  int rank = 0;
  Device device;
};
// "rank1:sim:0" -> {1, sim:0}; a bare device ("sim:0") -> rank 0. Error naming the expected
// form otherwise.
Placement parse_placement(const std::string& text);

// The sends of a pipeline still in flight.
class SendLog {
 public:
  void add(transport::Future<void> send);
  // Waits for every send logged so far (each bounded by the endpoint's timeout); raises the
  // first failure.
  void drain();

 private:
  std::mutex mutex_;
  std::vector<transport::Future<void>> sends_;
};

// The tag of (run, boundary, micro-batch, direction); boundary b is between partitions b - 1 and
// b. Micro-batch kCountSlot carries the number of micro-batches of a run. Raises Error when the
// boundary or micro-batch does not fit (256 boundaries, kCountSlot micro-batches).
inline constexpr int64_t kCountSlot = 2047;
uint64_t remote_tag(uint64_t run, int64_t boundary, int64_t microbatch, bool gradient);

Tensor remote_send(const transport::Group& group, int to, uint64_t tag, uint64_t gradient_tag,
                   const Tensor& x, const std::shared_ptr<SendLog>& log);

Tensor remote_recv(const transport::Group& group, int from, uint64_t tag, uint64_t gradient_tag,
                   Device device, bool requires_grad, const std::shared_ptr<SendLog>& log);

}  // namespace ferry::pipeline
