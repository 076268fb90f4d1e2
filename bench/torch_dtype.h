// ferry's dtype as libtorch's, for the benchmarks' PyTorch sides (built with
// -DFERRY_BENCH_TORCH=ON). Every dtype PyTorch 1.13 has; float8, which it lacks, raises DTypeError.
#pragma once

#include <torch/torch.h>

#include <string>

#include "ferry/core/error.h"
#include "ferry/core/scalar_type.h"

namespace ferry::bench {

inline torch::Dtype torch_dtype(ScalarType t) {
  switch (t) {
    case kBool:
      return torch::kBool;
    case kUInt8:
      return torch::kUInt8;
    case kInt8:
      return torch::kInt8;
    case kInt16:
      return torch::kInt16;
    case kInt32:
      return torch::kInt32;
    case kInt64:
      return torch::kInt64;
    case kFloat16:
      return torch::kFloat16;
    case kBFloat16:
      return torch::kBFloat16;
    case kFloat32:
      return torch::kFloat32;
    case kFloat64:
      return torch::kFloat64;
    case kComplex64:
      return torch::kComplexFloat;
    case kComplex128:
      return torch::kComplexDouble;
    default:
      break;
  }
  throw DTypeError("benchmark: expected a dtype PyTorch 1.13 has, but got " +
                   std::string(scalar_type_name(t)));
}

}  // namespace ferry::bench
