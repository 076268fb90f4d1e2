// GPipe: a Sequential split into partitions on devices, trained with micro-batch pipelining
// (torchgpipe's GPipe, in C++). forward(x) cuts x into `chunks` micro-batches along dim 0 and
// runs them through the partitions on the clock_cycles schedule: one worker thread per
// partition (its device's default stream as compute stream), one copy stream per (partition,
// micro-batch), Copy and Wait moving each micro-batch between them, fork/join phonies ordering
// the backward of a partition's micro-batches from the last to the first. The result is the
// micro-batches' outputs joined on the last device; backward through it gives the gradients of
// the unpipelined module (up to float rounding; BatchNorm normalizes per micro-batch, see
// DeferredBatchNorm).
//
// Checkpointing ("always", "except_last" (the default), "never"): a checkpointed micro-batch
// keeps only each partition's input and recomputes the partition in backward; "except_last"
// keeps the last micro-batch's activations (its backward starts at once). Off in evaluation and
// without grad mode. Random numbers (dropout) come from a generator seeded per (micro-batch,
// partition) from the default generator, so forward and recompute draw the same values and a
// run does not depend on thread timing.
//
// Threads: each partition's work is queued by its own worker; the CPU kernels a stage runs use
// ferry's thread pool only when no other stage holds it (parallel_for runs inline otherwise),
// so in a pipeline each stage effectively has one host thread (docs/pipeline.md, "Threads").
//
// Errors: a partition that throws stops the pipeline after the clock cycle in flight; forward
// raises PipelineError naming the partition, its device and the micro-batch, with the original
// message. Every worker thread has been joined by then.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/error.h"
#include "ferry/nn/layers/container.h"
#include "ferry/pipeline/trace.h"

namespace ferry::transport {
class Group;
}

namespace ferry::pipeline {

class SendLog;

class PipelineError : public Error {
 public:
  using Error::Error;
};

enum class CheckpointMode { Always, ExceptLast, Never };
// "always", "except_last", "never"; Error naming the three and the value otherwise.
CheckpointMode parse_checkpoint_mode(const std::string& mode);
const char* checkpoint_mode_name(CheckpointMode mode);

class GPipe {
 public:
  // balance: layers per partition (positive, summing to module->size()); devices: one per
  // partition (a device may repeat); chunks >= 1. The module's layers are moved to their
  // partitions' devices (the module shares them). deferred_batch_norm: the module's own
  // BatchNorm2d layers become DeferredBatchNorms (see batchnorm.h). Raises Error (expected vs
  // given) for a bad balance, devices or chunks.
  GPipe(nn::Sequential module, std::vector<int64_t> balance, std::vector<Device> devices,
        int64_t chunks, const std::string& checkpoint = "except_last",
        bool deferred_batch_norm = false);
  // Across processes (docs/pipeline.md, "Across processes"): placements name each partition's
  // rank and device ("rank0:sim:0", "rank1:sim:0"); every rank of `group` builds the same GPipe
  // from the same module and runs only its own partitions (the ranks' partitions must be
  // contiguous, in rank order, each rank holding at least one). Micro-batches go to the next
  // rank with remote_send / remote_recv and their gradients come back in backward (remote.h).
  // Every rank calls forward the same number of times; only the first rank's input is used (the
  // others may pass an undefined tensor). The last rank gets the output as usual; the others get
  // a scalar zero whose backward() runs their part of the backward. Raises NotImplementedError
  // when ferry was built without the transport (UCX).
  GPipe(nn::Sequential module, std::vector<int64_t> balance,
        const std::vector<std::string>& placements, int64_t chunks,
        std::shared_ptr<transport::Group> group, const std::string& checkpoint = "except_last",
        bool deferred_batch_norm = false);
  ~GPipe();

  // x must be on devices()[0] (DeviceError otherwise); the output is on devices().back().
  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  const std::vector<nn::Sequential>& partitions() const { return partitions_; }
  const std::vector<Device>& devices() const { return devices_; }
  // Across processes: the rank of each partition, and this process's first and last partition
  // (in one process: all zeros, 0 and partitions - 1).
  const std::vector<int>& ranks() const { return ranks_; }
  int64_t first_partition() const { return first_; }
  int64_t last_partition() const { return last_; }
  const std::vector<int64_t>& balance() const { return balance_; }
  int64_t chunks() const { return chunks_; }
  CheckpointMode checkpoint() const { return checkpoint_; }
  // The parameters of this process's partitions.
  std::vector<Tensor> parameters() const;

  // Spans of the forwards, backwards, recomputes and copies of later runs go to `tracer`
  // (null: none, the default). Tracing adds a few host functions per micro-batch and partition.
  void set_tracer(std::shared_ptr<Tracer> tracer) { tracer_ = std::move(tracer); }

 private:
  void build(nn::Sequential module, bool deferred_batch_norm);

  std::vector<nn::Sequential> partitions_;
  std::vector<Device> devices_;
  std::vector<int64_t> balance_;
  int64_t chunks_;
  CheckpointMode checkpoint_;
  bool training_ = true;
  std::shared_ptr<Tracer> tracer_;
  std::vector<int> ranks_;
  int64_t first_ = 0;
  int64_t last_ = 0;
  std::shared_ptr<transport::Group> group_;
  std::shared_ptr<SendLog> sends_;
  uint64_t run_ = 0;
};

}  // namespace ferry::pipeline
