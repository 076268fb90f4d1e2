// The operator benchmark behind `ferry bench-ops`: matmul against the machine's measured FMA
// peak, a BERT-base linear, ResNet-50 convolutions, per-op overhead and an MLP training step,
// each timed against PyTorch's same operation in the same run (when built with it) at the same
// thread count, with the target and whether it is met. See docs/ops.md, "Performance".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/copy_bench.h"  // Op, and PyTorch's thread and version helpers
#include "ferry/core/scalar_type.h"

namespace ferry::bench {

enum class OpKind {
  Matmul,   // matmul of [m, k] and [k, n] (dims: m, k, n)
  Linear,   // linear of [b, t, in] with weight [out, in] and bias (dims: b, t, in, out)
  Conv,     // conv2d without bias (dims: n, c, h, w, out, kernel, stride, padding)
  Add,      // a + b of two 1-element tensors, per call
  AddGrad,  // the same with a requiring grad (records a node), per call
  MlpStep,  // forward, mse loss, backward and SGD step of an MLP (dims: batch, width, layers)
};

// What a case must reach.
enum class TargetKind {
  PeakFraction,  // GFLOP/s >= value x the measured FMA peak
  RatioAtLeast,  // PyTorch's time / ferry's time >= value
  NsAtMost,      // ferry's ns per call <= value
};

struct OpSpec {
  std::string name;
  OpKind kind = OpKind::Matmul;
  ScalarType dtype = kFloat32;
  std::vector<int64_t> dims;
  bool channels_last = false;  // conv: input and weight in channels-last (NHWC) layout
  int calls = 1;               // per-call cases: calls per timed sample
  double flops = 0;            // per run (0: not a FLOP-bound case)
  TargetKind target = TargetKind::RatioAtLeast;
  double target_value = 1.0;
  bool per_call() const { return kind == OpKind::Add || kind == OpKind::AddGrad; }
};

struct OpsOptions {
  std::vector<int> threads = {1, 2};
  int repeat = 0;      // timed runs per case (median); 0: the default for the size
  std::string filter;  // ECMAScript regex on case names; empty = all
  std::string json;    // write results here too; "-": to stdout, with the table on stderr
  bool quick = false;  // tiny sizes: a smoke test whose numbers mean nothing
  bool large = false;  // conv batch 32 and more repeats
  std::string* json_text = nullptr;  // when set, also receives the JSON text (for --plot)
};

// The benchmark's cases for these options.
std::vector<OpSpec> ops_cases(const OpsOptions& options);

// Runs the benchmark, prints the table; returns the process exit code.
int run_ops_bench(const OpsOptions& options);

#if defined(FERRY_HAVE_TORCH)
// PyTorch's side of a case, on tensors it owns (null when PyTorch has no such case).
Op make_torch_ops_op(const OpSpec& spec);
// torch::set_num_threads, and the same for the BLAS library PyTorch's float32 GEMMs run on
// (OpenBLAS keeps its own threads); returns what was done about the BLAS, for the preamble.
const char* set_torch_ops_threads(int n);
#endif

}  // namespace ferry::bench
