// torchgpipe's DeferredBatchNorm: a BatchNorm2d for pipelines. In training each micro-batch is
// normalized with its own statistics (as the layer does), but the running statistics are
// updated once per mini-batch: the micro-batches' sums and sums of squares are accumulated and,
// when `chunks` micro-batches have been seen, committed as one batch of their combined size
// (the variance made unbiased, as BatchNorm2d does for its running_var, so the running
// statistics equal those of an unpipelined BatchNorm2d over the whole mini-batch). Runs that
// recompute a checkpointed partition are not counted. Evaluation uses the running statistics.
#pragma once

#include <cstdint>
#include <memory>

#include "ferry/nn/layers/batchnorm.h"
#include "ferry/nn/layers/container.h"

namespace ferry::pipeline {

class DeferredBatchNormImpl : public nn::Module {
 public:
  // Shares `bn`'s parameters and buffers (the same tensors).
  DeferredBatchNormImpl(const nn::BatchNorm2dImpl& bn, int64_t chunks);
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  int64_t num_features;
  nn::BatchNormOptions options;
  int64_t chunks;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  Tensor sum, sum_squares;

 private:
  void commit();
  int64_t counter_ = 0;  // elements per channel seen since the last commit
  int64_t tracked_ = 0;  // micro-batches seen since the last commit
};

// A Sequential with the same modules, each BatchNorm2d among its direct children replaced by a
// DeferredBatchNorm sharing its tensors (BatchNorms nested deeper are left alone). Raises Error
// for a BatchNorm2d without running statistics or affine parameters (expected vs given).
nn::Sequential convert_deferred_batch_norm(const nn::Sequential& module, int64_t chunks);

}  // namespace ferry::pipeline
