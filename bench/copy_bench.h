// The copy benchmark behind `ferry bench`: named cases (shapes, layouts, dtypes), each timed
// against a memcpy of the same traffic in the same run and, when built with PyTorch, against
// PyTorch's copy_ on the same case. See docs/bench.md for what is measured and how to read it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ferry/core/scalar_type.h"
#include "ferry/core/tensor.h"

namespace ferry::bench {

// How a case's source and destination are laid out (sizes are the case's `sizes`):
enum class Layout {
  Contig,            // src and dst contiguous, same sizes
  Transpose2D,       // src = rand(n, n).t(), dst contiguous (n, n)
  ToChannelsLast,    // src contiguous NCHW, dst NCHW with channels-last (NHWC) strides
  FromChannelsLast,  // src NCHW with channels-last strides, dst contiguous NCHW
  Permute210,        // src = rand(n, n, n).permute(2, 1, 0), dst contiguous
  Permute,           // src = rand(base).permute(perm) with base[perm[d]] = sizes[d], dst contiguous
  ExpandCol,         // src = rand(n, 1).expand(n, n), dst contiguous (n, n)
  SliceStep2,        // src = rand(n, 2n)[:, ::2], dst contiguous (n, n)
  PerCallCopy,       // dst.copy_(src) on tiny contiguous tensors: nanoseconds per call
  PerCallTo,         // src.to(dst dtype) on a tiny tensor (allocation included)
};

struct Spec {
  std::string name;
  Layout layout = Layout::Contig;
  std::vector<int64_t> sizes;  // the logical (dst) sizes
  std::vector<int64_t> perm;   // Layout::Permute: the permutation
  ScalarType src_dtype = kFloat32;
  ScalarType dst_dtype = kFloat32;
  double bytes_read = 0;     // bytes the copy needs from src (each element used once)
  double bytes_written = 0;  // bytes it writes to dst
  int calls = 1;             // per-call cases: calls per timed sample
  bool per_call() const { return layout == Layout::PerCallCopy || layout == Layout::PerCallTo; }
};

struct Options {
  std::vector<int> threads = {1, 2};
  int repeat = 21;     // timed runs per case (median reported); at least 10
  std::string filter;  // ECMAScript regex on case names; empty = all
  std::string json;    // write results here too; "-": to stdout, with the table on stderr
  std::string* json_text = nullptr;  // when set, also receives the JSON text (for --plot)
  bool quick = false;                // smaller sizes, for a smoke test
  std::string simd;                  // force a SIMD target ("AVX2", ...); empty = best
};

// The benchmark's cases, at full or --quick size (copy_cases.cc).
std::vector<Spec> copy_cases(bool quick);

// A case's tensors: dst.copy_(src) is what it times (PerCallTo: src.to(dst_dtype), no dst).
// `fill`: src holds random values; else it is left uninitialized (for planning only).
struct CaseTensors {
  Tensor dst;
  Tensor src;
};
CaseTensors case_tensors(const Spec& spec, bool fill);

// Runs the benchmark, prints the table; returns the process exit code.
int run_copy_bench(const Options& options);

// One timed operation; built once per case, run many times.
using Op = std::function<void()>;

#if defined(FERRY_HAVE_TORCH)
// PyTorch's copy_ (or to) on the same case, on tensors it owns.
Op make_torch_op(const Spec& spec);
void set_torch_threads(int n);
const char* torch_version();
#endif

}  // namespace ferry::bench
