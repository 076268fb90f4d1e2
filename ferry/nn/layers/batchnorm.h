// nn::BatchNorm2d (torch::nn::BatchNorm2d) over [N, C, H, W]: PyTorch's parameters (weight,
// bias), buffers (running_mean, running_var, num_batches_tracked as int64), momentum (or a
// cumulative average when none) and modes: in training the batch statistics normalize and the
// running ones are updated; in evaluation the running statistics normalize (the batch's when
// track_running_stats is off). repr "BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True,
// track_running_stats=True)".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // nullopt: cumulative moving average
  bool affine = true;
  bool track_running_stats = true;
};

class BatchNorm2dImpl : public Module {
 public:
  explicit BatchNorm2dImpl(int64_t num_features, BatchNormOptions options = {});
  // Running statistics back to mean 0, variance 1, no batches seen.
  void reset_running_stats();
  // reset_running_stats, weight 1, bias 0.
  void reset_parameters();
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias;                                    // undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;  // undefined without tracking
};
FERRY_MODULE(BatchNorm2d);

}  // namespace ferry::nn
