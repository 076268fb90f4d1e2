// nn::BatchNorm2d: buffers, modes and the running-statistics update (see batchnorm.h).
#include "ferry/nn/layers/batchnorm.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"
#include "ferry/nn/layers/repr.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::nn {

BatchNorm2dImpl::BatchNorm2dImpl(int64_t num_features, BatchNormOptions opts)
    : num_features(num_features), options(opts) {
  FERRY_CHECK(num_features > 0, "BatchNorm2d: expected num_features > 0, given ", num_features);
  weight = register_parameter("weight", options.affine ? empty({num_features}) : Tensor());
  bias = register_parameter("bias", options.affine ? empty({num_features}) : Tensor());
  if (options.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  } else {
    register_buffer("running_mean", Tensor());
    register_buffer("running_var", Tensor());
    register_buffer("num_batches_tracked", Tensor());
  }
  reset_parameters();
}

void BatchNorm2dImpl::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  init::zeros_(num_batches_tracked);
}

void BatchNorm2dImpl::reset_parameters() {
  reset_running_stats();
  if (options.affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNorm2dImpl::forward(const Tensor& input) {
  FERRY_CHECK_AS(ShapeError, input.dim() == 4, "BatchNorm2d: expected 4D input (got ", input.dim(),
                 "D input)");
  FERRY_CHECK_AS(ShapeError, input.size(1) == num_features, "BatchNorm2d: expected ", num_features,
                 " channels (dim 1), given input of shape ", input.sizes());
  double factor = options.momentum.value_or(0.0);
  if (is_training() && options.track_running_stats) {
    {
      NoGradGuard no_grad;
      num_batches_tracked.add_(1);
    }
    if (!options.momentum) {
      // Cumulative moving average: the n-th batch weighs 1/n.
      factor = 1.0 / static_cast<double>(num_batches_tracked.cpu().item<int64_t>());
    }
  }
  const bool use_batch_stats = is_training() || !options.track_running_stats;
  // In evaluation without tracking, batch statistics and no update (the buffers are None).
  const bool pass_running = !is_training() || options.track_running_stats;
  auto opt = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return batch_norm(input, opt(weight), opt(bias), pass_running ? opt(running_mean) : std::nullopt,
                    pass_running ? opt(running_var) : std::nullopt, use_batch_stats, factor,
                    options.eps);
}

std::string BatchNorm2dImpl::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + repr::py_float(options.eps) +
         ", momentum=" + (options.momentum ? repr::py_float(*options.momentum) : "None") +
         ", affine=" + repr::py_bool(options.affine) +
         ", track_running_stats=" + repr::py_bool(options.track_running_stats);
}

}  // namespace ferry::nn
