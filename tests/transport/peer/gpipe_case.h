// The model and data of the two-process GPipe test (multiprocess_test.cc is rank 0,
// transport_peer's "gpipe" scenario rank 1): both ranks build them from the same seed.
#pragma once

#include <string>
#include <vector>

#include "ferry/ferry.h"
#include "ferry/nn/models/mlp.h"

namespace ferry::transport::testing {

// Linear, ReLU, Linear, ReLU, Linear, ReLU, Linear: 3 layers on rank 0, 4 on rank 1.
inline nn::Sequential gpipe_case_model(uint64_t seed) {
  nn::models::MLPOptions options;
  options.seed = seed;
  return nn::models::mlp(6, {12, 12, 12}, 3, options);
}
inline const std::vector<int64_t> kGPipeCaseBalance = {3, 4};
inline const std::vector<std::string> kGPipeCasePlacements = {"rank0:sim:0", "rank1:sim:0"};
inline constexpr int64_t kGPipeCaseChunks = 4;
inline constexpr int kGPipeCaseSteps = 2;  // forward and backward twice: gradients accumulate

// The input and target of step `step` (10 rows: micro-batches of 3, 3, 3 and 1).
inline std::pair<Tensor, Tensor> gpipe_case_data(uint64_t seed, int step) {
  Generator gen(seed + 1000 * uint64_t(step));
  Tensor x = randn({10, 6}, kFloat32, &gen);
  Tensor target = randn({10, 3}, kFloat32, &gen);
  return {x, target};
}

}  // namespace ferry::transport::testing
