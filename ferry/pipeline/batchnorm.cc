// DeferredBatchNorm (see batchnorm.h).
#include "ferry/pipeline/batchnorm.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/nn_ops.h"
#include "ferry/pipeline/checkpoint.h"

namespace ferry::pipeline {

DeferredBatchNormImpl::DeferredBatchNormImpl(const nn::BatchNorm2dImpl& bn, int64_t chunks)
    : num_features(bn.num_features), options(bn.options), chunks(chunks) {
  FERRY_CHECK(chunks >= 1, "DeferredBatchNorm: expected chunks >= 1, but got ", chunks);
  FERRY_CHECK(options.track_running_stats && options.affine,
              "DeferredBatchNorm: expected a BatchNorm2d with affine=True and "
              "track_running_stats=True, but got affine=",
              options.affine, ", track_running_stats=", options.track_running_stats);
  weight = register_parameter("weight", bn.weight);
  bias = register_parameter("bias", bn.bias);
  running_mean = register_buffer("running_mean", bn.running_mean);
  running_var = register_buffer("running_var", bn.running_var);
  num_batches_tracked = register_buffer("num_batches_tracked", bn.num_batches_tracked);
  sum = register_buffer("sum", zeros_like(bn.running_mean), /*persistent=*/false);
  sum_squares = register_buffer("sum_squares", zeros_like(bn.running_var), /*persistent=*/false);
}

Tensor DeferredBatchNormImpl::forward(const Tensor& input) {
  FERRY_CHECK_AS(ShapeError, input.dim() == 4, "DeferredBatchNorm: expected 4D input, given ",
                 input.dim(), "D input");
  if (!is_training()) {
    return batch_norm(input, weight, bias, running_mean, running_var, false, 0.0, options.eps);
  }
  if (!is_recomputing()) {
    {
      autograd::NoGradGuard no_grad;
      const Tensor x = input.detach();
      sum.add_(x.sum({0, 2, 3}));
      sum_squares.add_((x * x).sum({0, 2, 3}));
    }
    counter_ += input.numel() / input.size(1);
    if (++tracked_ == chunks) commit();
  }
  return batch_norm(input, weight, bias, std::nullopt, std::nullopt, true, 0.0, options.eps);
}

void DeferredBatchNormImpl::commit() {
  autograd::NoGradGuard no_grad;
  num_batches_tracked.add_(1);
  const double m = options.momentum
                       ? *options.momentum
                       : 1.0 / static_cast<double>(num_batches_tracked.cpu().item<int64_t>());
  const double n = static_cast<double>(counter_);
  const Tensor mean = sum / n;
  // Unbiased, as BatchNorm2d's running_var.
  const Tensor var = (sum_squares / n - mean * mean) * (n / std::max(n - 1.0, 1.0));
  running_mean.mul_(1 - m).add_(mean * m);
  running_var.mul_(1 - m).add_(var * m);
  sum.zero_();
  sum_squares.zero_();
  counter_ = 0;
  tracked_ = 0;
}

std::string DeferredBatchNormImpl::extra_repr() const {
  return std::to_string(num_features) + ", chunks=" + std::to_string(chunks);
}

nn::Sequential convert_deferred_batch_norm(const nn::Sequential& module, int64_t chunks) {
  nn::Sequential out;
  const std::vector<std::string> names = module->named_children().keys();
  const auto& items = module->items();
  for (size_t k = 0; k < items.size(); ++k) {
    const std::string name = names.size() == items.size() ? names[k] : std::to_string(k);
    if (auto* bn = dynamic_cast<nn::BatchNorm2dImpl*>(items[k].ptr().get())) {
      out->push_back(name, nn::AnyModule(std::make_shared<DeferredBatchNormImpl>(*bn, chunks)));
    } else {
      out->push_back(name, items[k]);
    }
  }
  out->train(module->is_training());
  return out;
}

}  // namespace ferry::pipeline
