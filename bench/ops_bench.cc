// The operator benchmark (ops_bench.h): builds each case on ferry tensors (and on PyTorch's when
// built with it), times both as the median of interleaved runs at each thread count, and prints
// ferry's time, PyTorch's, their ratio, the case's target and whether ferry meets it (and JSON).
#include "bench/ops_bench.h"

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/fma_peak.h"
#include "bench/timing.h"
#include "ferry/core/error.h"
#include "ferry/core/json_text.h"
#include "ferry/ferry.h"

namespace ferry::bench {
namespace {

Tensor randn_in(IntArrayRef sizes, ScalarType dtype, bool channels_last = false) {
  Tensor t = randn(sizes, TensorOptions(kFloat32)).to(dtype);
  return channels_last ? t.contiguous(MemoryFormat::ChannelsLast) : t;
}

// ferry's side of a case: the tensors, and the operation on them.
Op make_ferry_op(const OpSpec& s) {
  const std::vector<int64_t>& d = s.dims;
  switch (s.kind) {
    case OpKind::Matmul: {
      const Tensor a = randn_in({d[0], d[1]}, s.dtype), b = randn_in({d[1], d[2]}, s.dtype);
      return [a, b] { (void)matmul(a, b); };
    }
    case OpKind::Linear: {
      const Tensor x = randn_in({d[0], d[1], d[2]}, s.dtype);
      const Tensor w = randn_in({d[3], d[2]}, s.dtype), b = randn_in({d[3]}, s.dtype);
      return [x, w, b] { (void)linear(x, w, b); };
    }
    case OpKind::Conv: {
      const Tensor x = randn_in({d[0], d[1], d[2], d[3]}, s.dtype, s.channels_last);
      const Tensor w = randn_in({d[4], d[1], d[5], d[5]}, s.dtype, s.channels_last);
      const int64_t stride = d[6], pad = d[7];
      return [x, w, stride, pad] { (void)conv2d(x, w, std::nullopt, stride, pad); };
    }
    case OpKind::Add:
    case OpKind::AddGrad: {
      Tensor a = randn_in({1}, s.dtype), b = randn_in({1}, s.dtype);
      if (s.kind == OpKind::AddGrad) a.requires_grad_();
      const int calls = s.calls;
      return [a, b, calls] {
        for (int i = 0; i < calls; ++i) {
          const Tensor c = a + b;
          if (c.data_ptr() == nullptr) std::abort();  // keeps the call
        }
      };
    }
    case OpKind::MlpStep: {
      const int64_t batch = d[0], width = d[1], layers = d[2];
      std::vector<Tensor> params;
      for (int64_t l = 0; l < layers; ++l) {
        params.push_back(randn_in({width, width}, s.dtype).mul(0.03).requires_grad_());
        params.push_back(zeros({width}, TensorOptions(s.dtype)).requires_grad_());
      }
      const Tensor x = randn_in({batch, width}, s.dtype), y = randn_in({batch, width}, s.dtype);
      return [params, x, y, layers] {
        Tensor h = x;
        for (int64_t l = 0; l < layers; ++l) {
          h = linear(h, params[2 * l], params[2 * l + 1]);
          if (l + 1 < layers) h = relu(h);
        }
        mse_loss(h, y).backward();
        NoGradGuard no_grad;
        for (const Tensor& p : params) {
          Tensor q = p;
          q.sub_(p.grad(), 0.01);
          p.mutable_grad() = Tensor();
        }
      };
    }
  }
  return nullptr;
}

#if defined(FERRY_HAVE_TORCH)
// Both sides run oneDNN on libgomp teams whose workers spin for a while after each parallel
// region, and PyTorch's float32 GEMMs run on OpenBLAS, whose workers spin for 2^28 time-stamp
// counter ticks (its default thread timeout) after each call: 128 ms on the AMD EPYC VM of
// 2026-11-29, whose counter runs at 2.1 GHz (a 100 ms pause left ferry's 2-thread matmul timed
// against them: 15.9 ms against 5.7 ms). An untimed pause lets them sleep, so that neither side
// is timed against the other's spinning workers; 250 ms covers counters down to 1.1 GHz.
void settle(int threads, bool after_torch) {
  if (threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(after_torch ? 250 : 5));
}
#endif

// glibc maps a large malloc block afresh and unmaps it at free (below its dynamic threshold, it
// trims the heap's top instead), so a program that allocates the same 6 MiB output on every call
// pays a page fault per 4 KiB page of it each time: on the AMD EPYC VM of 2026-11-29, PyTorch's
// NCHW 3x3 convolution took 45 ms instead of 10 when ferry's own frees stopped raising that
// threshold for it. PyTorch's CPU tuning guide runs it on jemalloc or tcmalloc, which keep such
// memory; keeping glibc's here gives PyTorch the same steady state in every run, whatever ferry
// frees. ferry's large blocks come from its own cache (ferry/core/cpu_block_cache.h).
// (32 MiB is the largest threshold glibc takes on 64-bit machines; the largest activation here,
// the stem's output, is 25.7 MB.)
void keep_malloc_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

struct OpsRow {
  const OpSpec* spec = nullptr;
  int threads = 1;
  double ferry = 0, ferry_min = 0, ferry_max = 0;  // ms per run, or ns per call
  double torch = -1;                               // the same for PyTorch (-1: not measured)
  double ratio = 0;                                // torch / ferry (above 1: ferry is faster)
  double gflops = 0, torch_gflops = 0, peak = 0, peak_fraction = 0;
  bool judged = false;  // the target could be evaluated
  bool met = false;
};

std::string format_double(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string target_text(const OpSpec& s) {
  switch (s.target) {
    case TargetKind::PeakFraction:
      return ">= " + format_double("%.0f", s.target_value * 100) + "% peak";
    case TargetKind::RatioAtLeast:
      return "ratio >= " + format_double("%.2f", s.target_value);
    case TargetKind::NsAtMost:
      return "<= " + format_double("%.0f", s.target_value) + " ns";
  }
  return "";
}

void judge(OpsRow& r) {
  const OpSpec& s = *r.spec;
  switch (s.target) {
    case TargetKind::PeakFraction:
      r.judged = r.peak > 0;
      r.met = r.judged && r.peak_fraction >= s.target_value;
      break;
    case TargetKind::RatioAtLeast:
      r.judged = r.torch >= 0;
      r.met = r.judged && r.ratio >= s.target_value;
      break;
    case TargetKind::NsAtMost:
      r.judged = true;
      r.met = r.ferry <= s.target_value;
      break;
  }
}

std::string time_text(double v, bool per_call) {
  if (v < 0) return "n/a";
  return per_call ? format_double("%.0f ns", v) : format_double("%.3f ms", v);
}

void print_header(FILE* out) {
  std::fprintf(out, "%-28s %3s %12s %12s %6s  %-28s %-15s %s\n", "case", "thr", "ferry", "torch",
               "ratio", "measure", "target", "met?");
}

void print_row(FILE* out, const OpsRow& r) {
  const OpSpec& s = *r.spec;
  std::string measure;
  if (s.flops > 0) {
    measure = format_double("%.1f", r.gflops) + " GFLOP/s";
    if (r.peak > 0) measure += ", " + format_double("%.1f", 100 * r.peak_fraction) + "% peak";
  }
  std::fprintf(out, "%-28s %3d %12s %12s %6s  %-28s %-15s %s\n", s.name.c_str(), r.threads,
               time_text(r.ferry, s.per_call()).c_str(), time_text(r.torch, s.per_call()).c_str(),
               r.torch >= 0 ? format_double("%.2f", r.ratio).c_str() : "n/a", measure.c_str(),
               target_text(s).c_str(),
               !r.judged ? "n/a"
               : r.met   ? "yes"
                         : "NO");
  std::fflush(out);
}

std::string to_json(const std::vector<OpsRow>& rows, const std::vector<FmaPeak>& peaks,
                    bool torch) {
  std::ostringstream out;
  out << "{\n  \"torch\": " << (torch ? "true" : "false") << ",\n  \"peaks\": [\n";
  for (size_t i = 0; i < peaks.size(); ++i) {
    const FmaPeak& p = peaks[i];
    out << "    {\"threads\": " << p.threads << ", \"isa\": " << json_quoted(p.isa)
        << ", \"gflops\": " << p.gflops << ", \"fma_latency_ns\": " << p.latency_ns << "}"
        << (i + 1 < peaks.size() ? "," : "") << "\n";
  }
  out << "  ],\n  \"cases\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpsRow& r = rows[i];
    const OpSpec& s = *r.spec;
    const char* unit = s.per_call() ? "ns_per_call" : "ms";
    out << "    {\"case\": " << json_quoted(s.name) << ", \"threads\": " << r.threads << ", \""
        << unit << "\": " << r.ferry << ", \"" << unit << "_min\": " << r.ferry_min << ", \""
        << unit << "_max\": " << r.ferry_max;
    if (r.torch >= 0)
      out << ", \"torch_" << unit << "\": " << r.torch << ", \"ratio\": " << r.ratio;
    if (s.flops > 0) out << ", \"gflops\": " << r.gflops;
    if (s.flops > 0 && r.torch >= 0) out << ", \"torch_gflops\": " << r.torch_gflops;
    if (r.peak > 0)
      out << ", \"peak_gflops\": " << r.peak << ", \"peak_fraction\": " << r.peak_fraction;
    out << ", \"target\": " << json_quoted(target_text(s)) << ", \"met\": "
        << (!r.judged ? "null"
            : r.met   ? "true"
                      : "false")
        << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  return out.str();
}

OpSpec conv_case(std::string name, int64_t n, int64_t c, int64_t hw, int64_t out, int64_t k,
                 int64_t stride, int64_t pad, bool channels_last) {
  OpSpec s;
  s.name = std::move(name) + (channels_last ? "_nhwc" : "_nchw");
  s.kind = OpKind::Conv;
  s.dims = {n, c, hw, hw, out, k, stride, pad};
  s.channels_last = channels_last;
  const int64_t ohw = (hw + 2 * pad - k) / stride + 1;
  s.flops = 2.0 * static_cast<double>(n * ohw * ohw * out * c * k * k);
  s.target = TargetKind::RatioAtLeast;
  s.target_value = 1.0;
  return s;
}

}  // namespace

std::vector<OpSpec> ops_cases(const OpsOptions& o) {
  std::vector<OpSpec> c;
  const int64_t mm = o.quick ? 64 : 1024;
  {
    OpSpec s;
    s.name = "matmul_f32_" + std::to_string(mm);
    s.kind = OpKind::Matmul;
    s.dims = {mm, mm, mm};
    s.flops = 2.0 * static_cast<double>(mm * mm * mm);
    s.target = TargetKind::PeakFraction;
    s.target_value = 0.85;
    c.push_back(s);
  }
  {
    // float64 runs ferry's own packed kernel (oneDNN has none); PyTorch runs OpenBLAS's dgemm.
    const int64_t m64 = o.quick ? 64 : 512;
    OpSpec s;
    s.name = "matmul_f64_" + std::to_string(m64);
    s.kind = OpKind::Matmul;
    s.dtype = kFloat64;
    s.dims = {m64, m64, m64};
    s.flops = 2.0 * static_cast<double>(m64 * m64 * m64);
    s.target = TargetKind::RatioAtLeast;
    s.target_value = 1.0;
    c.push_back(s);
  }
  for (ScalarType dtype : {kFloat32, kBFloat16}) {
    OpSpec s;
    s.name = std::string("linear_bert_") + (dtype == kFloat32 ? "f32" : "bf16");
    s.kind = OpKind::Linear;
    s.dtype = dtype;
    s.dims = o.quick ? std::vector<int64_t>{2, 8, 32, 64} : std::vector<int64_t>{8, 128, 768, 3072};
    s.flops = 2.0 * static_cast<double>(s.dims[0] * s.dims[1] * s.dims[2] * s.dims[3]);
    s.target = TargetKind::RatioAtLeast;
    s.target_value = 0.95;
    c.push_back(s);
  }
  const int64_t n = o.quick ? 1 : o.large ? 32 : 8;
  const int64_t hw = o.quick ? 14 : 56, big = o.quick ? 28 : 224;
  for (bool cl : {false, true}) {
    c.push_back(conv_case("conv3x3_64_56_b" + std::to_string(n), n, 64, hw, 64, 3, 1, 1, cl));
    c.push_back(conv_case("conv1x1_256to64_56_b" + std::to_string(n), n, 256, hw, 64, 1, 1, 0, cl));
    c.push_back(conv_case("conv7x7s2_3to64_224_b" + std::to_string(n), n, 3, big, 64, 7, 2, 3, cl));
  }
  {
    OpSpec s;
    s.name = "add_1elem";
    s.kind = OpKind::Add;
    s.calls = o.quick ? 200 : 20000;
    s.target = TargetKind::NsAtMost;
    s.target_value = 1000;
    c.push_back(s);
    s.name = "add_1elem_requires_grad";
    s.kind = OpKind::AddGrad;
    s.target_value = 3000;
    c.push_back(s);
  }
  {
    OpSpec s;
    s.name = "mlp4_1024_b64_train_step";
    s.kind = OpKind::MlpStep;
    s.dims = o.quick ? std::vector<int64_t>{4, 32, 4} : std::vector<int64_t>{64, 1024, 4};
    // forward, and two GEMMs per layer backward (the first layer's input needs no gradient, so
    // one of them is skipped there).
    s.flops = 2.0 * static_cast<double>(s.dims[0] * s.dims[1] * s.dims[1]) * (3 * s.dims[2] - 1);
    s.target = TargetKind::RatioAtLeast;
    s.target_value = 1.0;
    c.push_back(s);
  }
  return c;
}

int run_ops_bench(const OpsOptions& o) {
  const int repeat = o.repeat > 0 ? o.repeat : o.quick ? 3 : o.large ? 31 : 11;
  FERRY_CHECK(repeat >= 3, "bench-ops: expected --repeat of at least 3, but got ", repeat);
  for (int t : o.threads)
    FERRY_CHECK(t >= 1, "bench-ops: expected thread counts >= 1, but got ", t);
  std::regex filter;
  try {
    filter = std::regex(o.filter.empty() ? std::string(".*") : o.filter);
  } catch (const std::regex_error& e) {
    FERRY_FAIL_AS(Error, "bench-ops --filter: expected a regular expression, but \"", o.filter,
                  "\" is not one (", e.what(), ")");
  }
  const bool json_to_stdout = o.json == "-";
  std::ofstream json_file;
  if (!o.json.empty() && !json_to_stdout) {
    json_file.open(o.json);
    FERRY_CHECK(json_file.good(), "bench-ops: cannot write --json file \"", o.json, "\" (",
                std::strerror(errno), ")");
  }
  FILE* table = json_to_stdout ? stderr : stdout;
  keep_malloc_memory();
  std::vector<OpSpec> cases;
  for (OpSpec& s : ops_cases(o)) {
    if (std::regex_search(s.name, filter)) cases.push_back(std::move(s));
  }
#if defined(FERRY_HAVE_TORCH)
  const bool torch = true;
#else
  const bool torch = false;
#endif
  std::fprintf(table,
               "ferry bench-ops: %zu cases x %zu thread counts, median of %d runs each; %u "
               "hardware threads; glibc malloc keeps freed memory (mallopt); ",
               cases.size(), o.threads.size(), repeat, std::thread::hardware_concurrency());
#if defined(FERRY_HAVE_TORCH)
  std::fprintf(table, "PyTorch %s (%s)\n", torch_version(),
               set_torch_ops_threads(get_num_threads()));
#else
  std::fprintf(table, "PyTorch not built in (configure with -DFERRY_BENCH_TORCH=ON): torch n/a\n");
#endif
  if (o.quick) std::fprintf(table, "(--quick: tiny sizes, a smoke test; numbers mean nothing)\n");

  const bool need_peak = std::any_of(cases.begin(), cases.end(), [](const OpSpec& s) {
    return s.target == TargetKind::PeakFraction;
  });
  std::vector<FmaPeak> peaks;
  if (need_peak) {
    for (int threads : o.threads) {
      peaks.push_back(measure_fma_peak(threads));
      std::fprintf(table, "%s\n", describe(peaks.back()).c_str());
    }
  }

  std::vector<OpsRow> rows;
  const int saved_threads = get_num_threads();
  print_header(table);
  for (const OpSpec& s : cases) {
    const Op op = make_ferry_op(s);
#if defined(FERRY_HAVE_TORCH)
    const Op torch_op = make_torch_ops_op(s);
#endif
    for (size_t ti = 0; ti < o.threads.size(); ++ti) {
      const int threads = o.threads[ti];
      set_num_threads(threads);
#if defined(FERRY_HAVE_TORCH)
      set_torch_ops_threads(threads);
#endif
      // Warm-up (primitive caches, allocator pools), then interleaved samples so that noise
      // hits both sides alike.
      for (int w = 0; w < 2; ++w) op();
#if defined(FERRY_HAVE_TORCH)
      if (torch_op) {
        for (int w = 0; w < 2; ++w) torch_op();
      }
      settle(threads, true);
#endif
      std::vector<double> t_ferry, t_torch;
      // Each timed call follows an untimed one of its own side: after a pause, the first
      // parallel region has to wake sleeping workers (half a millisecond on the AMD EPYC VM of
      // 2026-11-29, where a halted vCPU is slow to resume), and which side ran after the longer
      // pause would otherwise decide the 2-thread ratios of the short cases.
      for (int r = 0; r < repeat; ++r) {
        op();
        t_ferry.push_back(time_ms(op));
#if defined(FERRY_HAVE_TORCH)
        settle(threads, false);
        if (torch_op) {
          torch_op();
          t_torch.push_back(time_ms(torch_op));
          settle(threads, true);
        }
#endif
      }
      OpsRow row;
      row.spec = &s;
      row.threads = threads;
      const double scale = s.per_call() ? 1e6 / s.calls : 1.0;  // ms -> ns per call
      row.ferry = median(t_ferry) * scale;
      row.ferry_min = *std::min_element(t_ferry.begin(), t_ferry.end()) * scale;
      row.ferry_max = *std::max_element(t_ferry.begin(), t_ferry.end()) * scale;
      if (!t_torch.empty()) {
        row.torch = median(t_torch) * scale;
        row.ratio = row.torch / row.ferry;
      }
      if (s.flops > 0) {
        row.gflops = s.flops / (row.ferry * 1e6);
        if (row.torch > 0) row.torch_gflops = s.flops / (row.torch * 1e6);
      }
      if (s.target == TargetKind::PeakFraction && ti < peaks.size() && peaks[ti].gflops > 0) {
        row.peak = peaks[ti].gflops;
        row.peak_fraction = row.gflops / row.peak;
      }
      judge(row);
      print_row(table, row);
      rows.push_back(row);
    }
  }
  set_num_threads(saved_threads);
  const std::string json = to_json(rows, peaks, torch);
  if (o.json_text != nullptr) *o.json_text = json;
  if (json_to_stdout) {
    std::fputs(json.c_str(), stdout);
    std::fflush(stdout);
  } else if (!o.json.empty()) {
    json_file << json;
    json_file.flush();
    FERRY_CHECK(json_file.good(), "bench-ops: writing --json file \"", o.json, "\" failed");
    std::fprintf(table, "wrote %s\n", o.json.c_str());
  }
  std::fprintf(table,
               "ratio = PyTorch time / ferry time (above 1: ferry is faster); per-op cases in ns "
               "per call, the rest in ms per run; %% peak = GFLOP/s / the FMA peak measured "
               "above at the same thread count\n");
  return 0;
}

}  // namespace ferry::bench
