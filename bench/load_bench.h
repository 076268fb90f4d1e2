// The loading benchmark behind `ferry bench-load`: a safetensors file from the page cache into
// pinned memory (against a memcpy of the same bytes) and into sim:0 through a 25 GB/s modelled
// link (against that link), cold-cache reads with and without O_DIRECT, and Module::to(sim:0) of
// modules with ResNet-152's and BERT-base's tensors (against one contiguous copy of the same
// bytes), with PyTorch 1.13's to(dtype) and parameter copies on the CPU when built with it. Every
// ratio is taken in one run from interleaved samples; figures are medians. The load table and
// the cold-cache figures can be written as JSON too (one {"case": ...} record per row; the
// module tables are not in it). See docs/bench.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/model_shapes.h"
#include "bench/timing.h"  // median and time_ms, shared with the module and torch benches

namespace ferry::bench {

struct LoadBenchOptions {
  int repeat = 7;           // timed runs per case (median)
  bool quick = false;       // a small file and few runs: a smoke test
  std::string dir;          // where the test file goes (default: $TMPDIR or /tmp)
  int64_t file_mib = 1024;  // the file's size (quick: 64)
  bool cold = true;         // also time cold-cache loads (drops the file's pages)
  bool modules = true;      // also run the module tables (run_module_bench)
  std::string json;         // the load table and cold-cache figures as JSON too ("" = none)
  std::string* json_text = nullptr;  // when set, also receives the JSON text (for --plot)
};

int run_load_bench(const LoadBenchOptions& options);

// "AMD EPYC ..." from lscpu (or /proc/cpuinfo); "unknown CPU" when neither says.
std::string cpu_model_name();

// The module part (bench/module_bench.cc): prints its tables.
void run_module_bench(int repeat, bool quick);

#if defined(FERRY_HAVE_TORCH)
// PyTorch's side on the CPU for the same shapes: model.to(bfloat16) and the per-parameter copy_
// that load_state_dict performs, in ms (medians of `repeat`).
struct TorchModuleTimes {
  double to_bf16_ms = 0;
  double load_ms = 0;
};
TorchModuleTimes time_torch_module(const std::vector<TensorShape>& shapes, int repeat);
const char* torch_version_string();
#endif

}  // namespace ferry::bench
