// Choosing a balance (torchgpipe's balance_by_time / balance_by_size): measure each layer of a
// Sequential on a device, then cut the layers into `partitions` contiguous groups whose largest
// cost is as small as it can be (balance_cost, an exact search).
#pragma once

#include <cstdint>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/layers/container.h"

namespace ferry::pipeline {

// Layer counts (each >= 1) of `partitions` contiguous groups of `costs` minimizing the largest
// group sum. Raises Error unless 1 <= partitions <= costs.size() and costs are >= 0.
std::vector<int64_t> balance_cost(const std::vector<double>& costs, int64_t partitions);

// Each layer's forward + backward time on `device` (the median of `repeats` runs after one
// warm-up, streams synchronized), for `sample` moved there; the module is moved there too.
std::vector<double> profile_times(const nn::Sequential& module, const Tensor& sample, Device device,
                                  int repeats = 3);
std::vector<int64_t> balance_by_time(int64_t partitions, const nn::Sequential& module,
                                     const Tensor& sample, Device device, int repeats = 3);

// Each layer's memory on `device`: its output's bytes (the activation a pipeline keeps) plus
// param_scale x its parameters' bytes (2: weights and gradients; more for an optimizer's state).
std::vector<double> profile_sizes(const nn::Sequential& module, const Tensor& sample, Device device,
                                  double param_scale = 2.0);
std::vector<int64_t> balance_by_size(int64_t partitions, const nn::Sequential& module,
                                     const Tensor& sample, Device device, double param_scale = 2.0);

}  // namespace ferry::pipeline
