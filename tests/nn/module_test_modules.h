// Small modules for the Module tests, built only from registered tensors (the real layers live in
// the nn layer's own files): a linear-like leaf, a batch-norm-like leaf with an int64 counter and
// a non-persistent buffer, and a net holding both plus a shared parameter.
#pragma once

#include <string>

#include "ferry/ferry.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::testing {

struct LinearLikeImpl : nn::Module {
  LinearLikeImpl(int64_t in, int64_t out, bool bias = true) : in(in), out(out) {
    weight = register_parameter("weight", randn({out, in}));
    this->bias = register_parameter("bias", bias ? randn({out}) : Tensor());
  }
  // x @ weight.T with elementwise operators (matmul lives in the nn layer's branch).
  Tensor forward(const Tensor& x) {
    Tensor y = (x.unsqueeze(1) * weight.unsqueeze(0)).sum({2});
    return bias.defined() ? y + bias : y;
  }
  std::string extra_repr() const override {
    return "in_features=" + std::to_string(in) + ", out_features=" + std::to_string(out) +
           ", bias=" + (bias.defined() ? "True" : "False");
  }
  int64_t in, out;
  Tensor weight, bias;
};
FERRY_MODULE(LinearLike);

struct NormLikeImpl : nn::Module {
  explicit NormLikeImpl(int64_t n) : n(n) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
    scratch = register_buffer("scratch", full({n}, 5.0), /*persistent=*/false);
  }
  std::string extra_repr() const override {
    return std::to_string(n) + ", eps=1e-05, momentum=0.1";
  }
  int64_t n;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked, scratch;
};
FERRY_MODULE(NormLike);

struct NetImpl : nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", LinearLike(4, 8));
    norm = register_module("norm", NormLike(8));
    fc2 = register_module("fc2", LinearLike(8, 3, /*bias=*/false));
  }
  Tensor forward(const Tensor& x) { return fc2(fc1(x).relu()); }
  LinearLike fc1{nullptr};
  NormLike norm{nullptr};
  LinearLike fc2{nullptr};
};
FERRY_MODULE(Net);

}  // namespace ferry::testing
