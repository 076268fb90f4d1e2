// torchgpipe's checkpointing of one partition for one micro-batch. checkpoint() runs the
// partition without recording a graph and keeps only its input; recompute(output) hangs a
// Recompute node on the output (through fork/join) whose backward reruns the partition with
// grad mode on, and the Checkpoint node's backward then runs a nested backward through that
// recomputed graph. Recompute is its own node, so the engine may run it while the previous
// micro-batch's backward is still running on the same device: recompute overlaps backward.
// Both runs draw random numbers (dropout) from a Generator made from the same seed, so they
// produce the same values whatever other threads draw meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "ferry/autograd/variable.h"

namespace ferry::pipeline {

using PartitionFunction = std::function<Tensor(const Tensor&)>;

// True on a thread that is rerunning a partition for a checkpoint's backward (DeferredBatchNorm
// does not count those runs), or running it inside checkpoint().
bool is_recomputing();
bool is_checkpointing();

// What one micro-batch's checkpoint and recompute nodes share.
struct CheckpointState {
  PartitionFunction function;
  Tensor input;  // dropped once the recompute has run
  uint64_t seed = 0;
  // Called around the recompute (begin = true, then false) on the recomputing thread; may be
  // empty. The pipeline's tracer uses it.
  std::function<void(bool begin)> on_recompute;
  std::mutex mutex;
  std::vector<std::pair<Tensor, Tensor>> recomputed;  // (output, input leaf)
};

class Checkpointing {
 public:
  Checkpointing(PartitionFunction function, Tensor input, uint64_t seed,
                std::function<void(bool)> on_recompute = {});
  // Runs the partition on the input, keeping only the input for backward.
  Tensor checkpoint();
  // Makes `output` (checkpoint()'s result, possibly moved on by Wait) depend on a Recompute.
  void recompute(Tensor& output);

 private:
  std::shared_ptr<CheckpointState> state_;
};

}  // namespace ferry::pipeline
