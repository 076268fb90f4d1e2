// Helpers for the switch planner and mechanism tests: random layer costs (skewed, as real models
// are), the planner test regimes, every grouping of n layers for exhaustive checks, and the
// reference a switched model's output is compared with (the same zoo model moved with
// Module::to and run on the device), read on the switch's compute stream.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ferry/autograd/grad_mode.h"
#include "ferry/device/guard.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/pipelined_switch.h"
#include "ferry/switch/switch_layers.h"
#include "ferry/switch/zoo_model.h"

namespace ferry::switch_::testing {

// n layers: bytes up to 1e7 (none with probability `weightless`), transfer skewed towards a few
// heavy layers (as the fc of a ResNet or BERT's embeddings), compute uniform.
inline std::vector<LayerCost> random_layers(std::mt19937_64& rng, size_t n, double transfer_scale,
                                            double compute_scale, double weightless = 0) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<LayerCost> layers(n);
  for (size_t i = 0; i < n; ++i) {
    layers[i].name = "layer" + std::to_string(i);
    const bool none = weightless > 0 && unit(rng) < weightless;
    layers[i].bytes = none ? 0 : 1 + static_cast<uint64_t>(unit(rng) * 1e7);
    layers[i].transfer_s = none ? 0 : transfer_scale * std::pow(unit(rng), 3.0);
    layers[i].compute_s = compute_scale * unit(rng);
  }
  return layers;
}

// Transfer-bound, compute-bound and balanced models with overheads from none to larger than a
// layer: {transfer scale, compute scale, copy overhead, wait}.
inline constexpr double kPlannerRegimes[][4] = {{1e-3, 1e-4, 0, 0},
                                                {1e-4, 1e-3, 2e-5, 1e-5},
                                                {1e-3, 1e-3, 1e-4, 5e-5},
                                                {1e-3, 1e-3, 2e-3, 0},
                                                {5e-4, 1e-3, 1e-5, 1e-3}};

// All 2^(n-1) groupings of n >= 1 layers, as group ends.
inline std::vector<std::vector<size_t>> every_grouping(size_t n) {
  std::vector<std::vector<size_t>> all;
  for (uint64_t cuts = 0; cuts < (uint64_t{1} << (n - 1)); ++cuts) {
    std::vector<size_t> ends;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (cuts & (uint64_t{1} << i)) ends.push_back(i + 1);
    }
    ends.push_back(n);
    all.push_back(std::move(ends));
  }
  return all;
}

// The same model (same seed) moved with Module::to and run on `input`'s device.
inline Tensor reference_output(const std::string& arch, uint64_t seed, ZooInputShape shape,
                               const Tensor& input) {
  NoGradGuard no_grad;
  ZooModel model = make_zoo_model(arch, seed, shape);
  model.module->to(input.device());
  return run_layers(model.layers, input).cpu();
}

// A switch's output read where it was made: on the compute stream.
inline Tensor output_on(const SwitchStreams& streams, const QueuedSwitch& queued) {
  StreamGuard on_compute(streams.compute);
  return queued.output.cpu();
}

}  // namespace ferry::switch_::testing
