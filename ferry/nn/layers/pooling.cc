// MaxPool2d and AdaptiveAvgPool2d: argument checks and forwards (see pooling.h).
#include "ferry/nn/layers/pooling.h"

#include "ferry/core/error.h"
#include "ferry/nn/layers/repr.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::nn {
namespace {

void check_sizes(const std::vector<int64_t>& v, const char* layer, const char* what) {
  FERRY_CHECK(v.size() == 1 || v.size() == 2, layer, ": expected ", what,
              " to have 1 or 2 values, given ", v.size());
}

}  // namespace

MaxPool2dImpl::MaxPool2dImpl(MaxPool2dOptions opts) : options(std::move(opts)) {
  if (options.stride.empty()) options.stride = options.kernel_size;
  check_sizes(options.kernel_size, "MaxPool2d", "kernel_size");
  check_sizes(options.stride, "MaxPool2d", "stride");
  check_sizes(options.padding, "MaxPool2d", "padding");
  check_sizes(options.dilation, "MaxPool2d", "dilation");
}

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return max_pool2d(input, options.kernel_size, options.stride, options.padding, options.dilation,
                    options.ceil_mode);
}

std::string MaxPool2dImpl::extra_repr() const {
  return "kernel_size=" + repr::py_int_or_tuple(options.kernel_size) +
         ", stride=" + repr::py_int_or_tuple(options.stride) +
         ", padding=" + repr::py_int_or_tuple(options.padding) +
         ", dilation=" + repr::py_int_or_tuple(options.dilation) +
         ", ceil_mode=" + repr::py_bool(options.ceil_mode);
}

AdaptiveAvgPool2dImpl::AdaptiveAvgPool2dImpl(std::vector<int64_t> size)
    : output_size(std::move(size)) {
  check_sizes(output_size, "AdaptiveAvgPool2d", "output_size");
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) {
  const std::vector<int64_t> two =
      output_size.size() == 1 ? std::vector<int64_t>{output_size[0], output_size[0]} : output_size;
  return adaptive_avg_pool2d(input, two);
}

std::string AdaptiveAvgPool2dImpl::extra_repr() const {
  return "output_size=" + repr::py_int_or_tuple(output_size);
}

}  // namespace ferry::nn
