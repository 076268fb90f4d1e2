// nn::Conv2d: argument checks, parameters, init and forward (see conv.h).
#include "ferry/nn/layers/conv.h"

#include <cmath>

#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"
#include "ferry/nn/layers/repr.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::nn {
namespace {

std::vector<int64_t> pair_of(const std::vector<int64_t>& v, const char* what) {
  FERRY_CHECK(v.size() == 1 || v.size() == 2, "Conv2d: expected ", what,
              " to have 1 or 2 values, given ", v.size());
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

}  // namespace

Conv2dImpl::Conv2dImpl(Conv2dOptions opts) : options(std::move(opts)) {
  options.kernel_size = pair_of(options.kernel_size, "kernel_size");
  options.stride = pair_of(options.stride, "stride");
  options.padding = pair_of(options.padding, "padding");
  options.dilation = pair_of(options.dilation, "dilation");
  FERRY_CHECK(options.groups > 0, "Conv2d: expected groups > 0, given ", options.groups);
  FERRY_CHECK(options.in_channels % options.groups == 0,
              "Conv2d: in_channels must be divisible by groups (given in_channels=",
              options.in_channels, ", groups=", options.groups, ")");
  FERRY_CHECK(options.out_channels % options.groups == 0,
              "Conv2d: out_channels must be divisible by groups (given out_channels=",
              options.out_channels, ", groups=", options.groups, ")");
  weight = register_parameter("weight",
                              empty({options.out_channels, options.in_channels / options.groups,
                                     options.kernel_size[0], options.kernel_size[1]}));
  bias = register_parameter("bias", options.bias ? empty({options.out_channels}) : Tensor());
  reset_parameters();
}

void Conv2dImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::fans(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2dImpl::forward(const Tensor& input) {
  return conv2d(input, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt,
                options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv2dImpl::extra_repr() const {
  std::string s = std::to_string(options.in_channels) + ", " +
                  std::to_string(options.out_channels) +
                  ", kernel_size=" + repr::py_tuple(options.kernel_size) +
                  ", stride=" + repr::py_tuple(options.stride);
  if (options.padding != std::vector<int64_t>{0, 0}) {
    s += ", padding=" + repr::py_tuple(options.padding);
  }
  if (options.dilation != std::vector<int64_t>{1, 1}) {
    s += ", dilation=" + repr::py_tuple(options.dilation);
  }
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

}  // namespace ferry::nn
