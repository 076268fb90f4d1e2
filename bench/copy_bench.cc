// The copy benchmark: builds each case on ferry tensors (and PyTorch's when built with it),
// times copy_ as the median of interleaved runs beside a memcpy moving the same traffic at the
// same thread count, and prints a table (and JSON). docs/bench.md explains every column.
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

#include "bench/copy_bench.h"
#include "bench/timing.h"
#include "ferry/backends/cpu/simd.h"
#include "ferry/core/error.h"
#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "ferry/ops/factories.h"

namespace ferry::bench {
namespace {

// ferry's side of a case: the case's tensors (copy_cases.cc), and the operation on them.
Op make_ferry_op(const Spec& s) {
  CaseTensors t = case_tensors(s, /*fill=*/true);
  switch (s.layout) {
    case Layout::PerCallCopy: {
      const int calls = s.calls;
      return [src = t.src, dst = t.dst, calls]() mutable {
        for (int i = 0; i < calls; ++i) dst.copy_(src);
      };
    }
    case Layout::PerCallTo: {
      const int calls = s.calls;
      const ScalarType to = s.dst_dtype;
      return [src = t.src, calls, to]() {
        for (int i = 0; i < calls; ++i) {
          Tensor out = src.to(to);
          if (out.data_ptr() == nullptr) std::abort();  // keeps the call
        }
      };
    }
    default:
      return [src = t.src, dst = t.dst]() mutable { dst.copy_(src); };
  }
}

// memcpy of `bytes` split across `threads` (ferry's pool, as the copy itself is split).
void parallel_memcpy(char* dst, const char* src, size_t bytes, int threads) {
  if (threads <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  parallel_for(0, threads, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const size_t lo = bytes * static_cast<size_t>(c) / static_cast<size_t>(threads);
      const size_t hi = bytes * static_cast<size_t>(c + 1) / static_cast<size_t>(threads);
      std::memcpy(dst + lo, src + lo, hi - lo);
    }
  });
}

#if defined(FERRY_HAVE_TORCH)
// PyTorch's OpenMP workers spin for a while after each parallel region; timing ferry's next
// copy while they still hold the other core would charge ferry for PyTorch's spinning. A short
// untimed pause lets them go to sleep.
void settle_torch(int threads) {
  if (threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}
#endif

// Runs `f` once untimed, then times it. On the VMs this project runs on, writing memory that
// nothing has touched for about 10 ms is slower than writing it again at once (a 64 MiB
// broadcast at one thread: 1.8-1.9 ms back to back, 2.8-3.0 ms after 10 ms asleep or spinning
// elsewhere, 1.8 ms again after one untimed run; the cause is below the guest). The pause that
// lets PyTorch's OpenMP workers stop spinning (settle_torch) would otherwise charge whichever
// side runs after it, and every side's buffers age while the others run.
double warm_then_time(const Op& f) {
  f();
  return time_ms(f);
}

struct CopyRow {
  std::string name;
  int threads = 1;
  bool per_call = false;
  double ms = 0, ms_min = 0, ms_max = 0;  // per sample (per call in ns for per-call cases)
  double gbps = 0;
  double memcpy_ms = 0, memcpy_gbps = 0, ratio_memcpy = 0;
  double torch_ms = -1, ratio_torch = 0;  // ratio_torch = torch time / ferry time (speed-up)
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

void print_header(FILE* out, bool torch) {
  std::fprintf(out, "%-34s %3s %9s %8s %9s %8s", "case", "thr", "ms", "GB/s", "memcpy", "xmemcpy");
  if (torch) std::fprintf(out, " %10s %7s", "torch ms", "xtorch");
  std::fprintf(out, "\n");
}

void print_row(FILE* out, const CopyRow& r, bool torch) {
  if (r.per_call) {
    std::fprintf(out, "%-34s %3d %9s %8s %9s %8s", (r.name + " (ns/call)").c_str(), r.threads,
                 fmt("%.1f", r.ms).c_str(), "-", "-", "-");
    if (torch) {
      std::fprintf(out, " %10s %7s", r.torch_ms >= 0 ? fmt("%.1f", r.torch_ms).c_str() : "-",
                   r.torch_ms >= 0 ? fmt("%.2f", r.ratio_torch).c_str() : "-");
    }
  } else {
    std::fprintf(out, "%-34s %3d %9s %8s %9s %8s", r.name.c_str(), r.threads,
                 fmt("%.3f", r.ms).c_str(), fmt("%.2f", r.gbps).c_str(),
                 fmt("%.2f", r.memcpy_gbps).c_str(), fmt("%.2f", r.ratio_memcpy).c_str());
    if (torch) {
      std::fprintf(out, " %10s %7s", r.torch_ms >= 0 ? fmt("%.3f", r.torch_ms).c_str() : "-",
                   r.torch_ms >= 0 ? fmt("%.2f", r.ratio_torch).c_str() : "-");
    }
  }
  std::fprintf(out, "\n");
  std::fflush(out);
}

std::string to_json(const std::vector<CopyRow>& rows, const std::string& simd, bool torch) {
  std::ostringstream out;
  out << "{\n  \"simd_target\": \"" << simd << "\",\n  \"torch\": " << (torch ? "true" : "false")
      << ",\n  \"cases\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const CopyRow& r = rows[i];
    out << "    {\"case\": \"" << r.name << "\", \"threads\": " << r.threads;
    if (r.per_call) {
      out << ", \"ns_per_call\": " << r.ms << ", \"ns_per_call_min\": " << r.ms_min
          << ", \"ns_per_call_max\": " << r.ms_max;
    } else {
      out << ", \"ms\": " << r.ms << ", \"ms_min\": " << r.ms_min << ", \"ms_max\": " << r.ms_max
          << ", \"gbps\": " << r.gbps << ", \"memcpy_ms\": " << r.memcpy_ms
          << ", \"memcpy_gbps\": " << r.memcpy_gbps << ", \"ratio_memcpy\": " << r.ratio_memcpy;
    }
    if (r.torch_ms >= 0) {
      out << ", \"torch_" << (r.per_call ? "ns_per_call" : "ms") << "\": " << r.torch_ms
          << ", \"ratio_torch\": " << r.ratio_torch;
    }
    out << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  return out.str();
}

}  // namespace

int run_copy_bench(const Options& o) {
  FERRY_CHECK(o.repeat >= 10, "bench: expected --repeat of at least 10, but got ", o.repeat);
  for (int t : o.threads) FERRY_CHECK(t >= 1, "bench: expected thread counts >= 1, but got ", t);
  if (!o.simd.empty()) cpu::set_simd_target(o.simd);
  std::regex filter;
  try {
    filter = std::regex(o.filter.empty() ? std::string(".*") : o.filter);
  } catch (const std::regex_error& e) {
    FERRY_FAIL_AS(Error, "bench --filter: expected a regular expression, but \"", o.filter,
                  "\" is not one (", e.what(), ")");
  }
  // The JSON file is opened before anything runs, so that a path that cannot be written fails
  // now rather than after the whole benchmark. With "-" the JSON goes to stdout (for pipes such
  // as `| jq`) and the table to stderr.
  const bool json_to_stdout = o.json == "-";
  std::ofstream json_file;
  if (!o.json.empty() && !json_to_stdout) {
    json_file.open(o.json);
    FERRY_CHECK(json_file.good(), "bench: cannot write --json file \"", o.json, "\" (",
                std::strerror(errno), ")");
  }
  FILE* table = json_to_stdout ? stderr : stdout;
  std::vector<Spec> cases;
  for (Spec& s : copy_cases(o.quick)) {
    if (std::regex_search(s.name, filter)) cases.push_back(std::move(s));
  }
#if defined(FERRY_HAVE_TORCH)
  const bool torch = true;
#else
  const bool torch = false;
#endif
  std::string available;
  for (const std::string& t : cpu::simd_targets()) available += " " + t;
  std::fprintf(table,
               "ferry bench: %zu cases x %zu thread counts, median of %d runs each; SIMD %s "
               "(compiled and supported:%s); %u hardware threads",
               cases.size(), o.threads.size(), o.repeat, cpu::simd_target(), available.c_str(),
               std::thread::hardware_concurrency());
#if defined(FERRY_HAVE_TORCH)
  std::fprintf(table, "; PyTorch %s", torch_version());
#endif
  std::fprintf(table, "\n%s\n",
               o.quick ? "(--quick: small sizes, a smoke test; numbers are not meaningful)"
                       : "This takes 10 to 40 seconds (one to two minutes with PyTorch) on a "
                         "quiet machine; --quick runs a one-second smoke test.");
  // memcpy buffers for the largest case, touched once so page faults are not timed.
  double most = 0;
  for (const Spec& s : cases) most = std::max(most, (s.bytes_read + s.bytes_written) / 2);
  const auto buffer_bytes = static_cast<int64_t>(most) + 64;
  Tensor mem_src = zeros({buffer_bytes}, TensorOptions(kUInt8));
  Tensor mem_dst = zeros({buffer_bytes}, TensorOptions(kUInt8));
  auto* mdst = static_cast<char*>(mem_dst.data_ptr());
  const auto* msrc = static_cast<const char*>(mem_src.data_ptr());

  std::vector<CopyRow> rows;
  const int saved_threads = get_num_threads();
  print_header(table, torch);
  for (const Spec& s : cases) {
    const Op op = make_ferry_op(s);
#if defined(FERRY_HAVE_TORCH)
    const Op torch_op = make_torch_op(s);
#endif
    const auto mem_bytes = static_cast<size_t>((s.bytes_read + s.bytes_written) / 2);
    for (int threads : o.threads) {
      set_num_threads(threads);
#if defined(FERRY_HAVE_TORCH)
      set_torch_threads(threads);
#endif
      // Warm-up, then interleaved samples so that noise hits all sides alike.
      op();
      if (!s.per_call()) parallel_memcpy(mdst, msrc, mem_bytes, threads);
#if defined(FERRY_HAVE_TORCH)
      if (torch_op) {
        torch_op();
        settle_torch(threads);
      }
#endif
      // Each timed sample of a bulk case follows an untimed run of the same operation, so that
      // every side is timed on memory it touched a moment before (see warm_then_time).
      const auto sample = [&](const Op& f) {
        return s.per_call() ? time_ms(f) : warm_then_time(f);
      };
      std::vector<double> t_ferry, t_mem, t_torch;
      for (int r = 0; r < o.repeat; ++r) {
        t_ferry.push_back(sample(op));
        if (!s.per_call()) {
          t_mem.push_back(sample([&] { parallel_memcpy(mdst, msrc, mem_bytes, threads); }));
        }
#if defined(FERRY_HAVE_TORCH)
        if (torch_op) {
          t_torch.push_back(sample(torch_op));
          settle_torch(threads);
        }
#endif
      }
      CopyRow row;
      row.name = s.name;
      row.threads = threads;
      row.per_call = s.per_call();
      const double scale = s.per_call() ? 1e6 / s.calls : 1.0;  // ms -> ns/call
      row.ms = median(t_ferry) * scale;
      row.ms_min = *std::min_element(t_ferry.begin(), t_ferry.end()) * scale;
      row.ms_max = *std::max_element(t_ferry.begin(), t_ferry.end()) * scale;
      if (!s.per_call()) {
        row.gbps = (s.bytes_read + s.bytes_written) / (row.ms * 1e6);
        row.memcpy_ms = median(t_mem);
        row.memcpy_gbps = 2.0 * static_cast<double>(mem_bytes) / (row.memcpy_ms * 1e6);
        row.ratio_memcpy = row.gbps / row.memcpy_gbps;
      }
      if (!t_torch.empty()) {
        row.torch_ms = median(t_torch) * scale;
        row.ratio_torch = row.torch_ms / row.ms;
      }
      print_row(table, row, torch);
      rows.push_back(row);
    }
  }
  set_num_threads(saved_threads);
  if (!o.simd.empty()) cpu::set_simd_target("");
  const std::string json = to_json(rows, cpu::simd_target(), torch);
  if (o.json_text != nullptr) *o.json_text = json;
  if (json_to_stdout) {
    std::fputs(json.c_str(), stdout);
    std::fflush(stdout);
  } else if (!o.json.empty()) {
    json_file << json;
    json_file.flush();
    FERRY_CHECK(json_file.good(), "bench: writing --json file \"", o.json, "\" failed");
    std::fprintf(table, "wrote %s\n", o.json.c_str());
  }
  std::fprintf(table,
               "xmemcpy = ferry GB/s / memcpy GB/s, with memcpy moving (read + written) / 2 bytes "
               "on the same threads%s\n",
               torch ? "; xtorch = PyTorch time / ferry time (above 1: ferry is faster)" : "");
  return 0;
}

}  // namespace ferry::bench
