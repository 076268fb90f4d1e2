// balance_cost and the two profilers (see balance.h).
#include "ferry/pipeline/balance.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "ferry/autograd/engine.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/ops/factories.h"
#include "ferry/pipeline/stream.h"

namespace ferry::pipeline {
namespace {

void synchronize(Device device) {
  if (!device.is_cpu()) ferry::current_stream(device).synchronize();
}

}  // namespace

std::vector<int64_t> balance_cost(const std::vector<double>& costs, int64_t partitions) {
  const auto n = static_cast<int64_t>(costs.size());
  FERRY_CHECK(partitions >= 1 && partitions <= n, "balance: expected 1 to ", n,
              " partitions (one layer at least each), but got ", partitions);
  for (size_t k = 0; k < costs.size(); ++k) {
    FERRY_CHECK(costs[k] >= 0, "balance: expected costs >= 0, but layer ", k, " costs ", costs[k]);
  }
  // best[p][k]: the smallest largest-group sum of the first k layers in p groups.
  std::vector<double> prefix(n + 1, 0.0);
  for (int64_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + costs[k];
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(partitions + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(partitions + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t p = 1; p <= partitions; ++p) {
    for (int64_t k = p; k <= n; ++k) {
      for (int64_t s = p - 1; s < k; ++s) {
        const double v = std::max(best[p - 1][s], prefix[k] - prefix[s]);
        if (v < best[p][k]) {
          best[p][k] = v;
          cut[p][k] = s;
        }
      }
    }
  }
  std::vector<int64_t> balance(partitions);
  for (int64_t p = partitions, k = n; p >= 1; --p) {
    const int64_t s = cut[p][k];
    balance[p - 1] = k - s;
    k = s;
  }
  return balance;
}

std::vector<double> profile_times(const nn::Sequential& module, const Tensor& sample, Device device,
                                  int repeats) {
  FERRY_CHECK(repeats >= 1, "profile_times: expected repeats >= 1, but got ", repeats);
  module.ptr()->to(device);
  std::vector<double> times;
  Tensor x = sample.to(device);
  autograd::AutoGradMode grad(true);
  for (const nn::AnyModule& layer : module.ptr()->items()) {
    std::vector<double> runs;
    Tensor out;
    for (int r = 0; r <= repeats; ++r) {
      Tensor in = x.detach();
      if (in.is_floating_point()) in.requires_grad_(true);
      synchronize(device);
      const auto t0 = std::chrono::steady_clock::now();
      out = layer.forward(in);
      if (out.requires_grad()) autograd::backward({out}, {ones_like(out)});
      synchronize(device);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) runs.push_back(ms);  // run 0 warms up
    }
    std::sort(runs.begin(), runs.end());
    times.push_back(runs[runs.size() / 2]);
    x = out.detach();
  }
  return times;
}

std::vector<int64_t> balance_by_time(int64_t partitions, const nn::Sequential& module,
                                     const Tensor& sample, Device device, int repeats) {
  return balance_cost(profile_times(module, sample, device, repeats), partitions);
}

std::vector<double> profile_sizes(const nn::Sequential& module, const Tensor& sample, Device device,
                                  double param_scale) {
  module.ptr()->to(device);
  std::vector<double> sizes;
  Tensor x = sample.to(device);
  autograd::NoGradGuard no_grad;
  for (const nn::AnyModule& layer : module.ptr()->items()) {
    x = layer.forward(x);
    double bytes = static_cast<double>(x.nbytes());
    for (const Tensor& p : layer.ptr()->parameters()) {
      bytes += param_scale * static_cast<double>(p.nbytes());
    }
    sizes.push_back(bytes);
  }
  return sizes;
}

std::vector<int64_t> balance_by_size(int64_t partitions, const nn::Sequential& module,
                                     const Tensor& sample, Device device, double param_scale) {
  return balance_cost(profile_sizes(module, sample, device, param_scale), partitions);
}

}  // namespace ferry::pipeline
