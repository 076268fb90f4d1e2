// `ferry bench-load`, the file part: writes a safetensors file of equal 4 MiB float32 tensors,
// reads it once so it sits in the page cache, then times each load path beside its baseline,
// interleaved: pinned (buffered and O_DIRECT), pageable and mapped against a memcpy of the same
// bytes between two warm buffers; sim:0 with every link at 25 GB/s against the modelled link
// (bytes / 25 GB/s) and against a measured pinned host-to-device copy of the same bytes; and,
// once the page cache has dropped the file (POSIX_FADV_DONTNEED), buffered against O_DIRECT reads.
#include "bench/load_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/core/json_text.h"
#include "ferry/device/stream.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/nn/safetensors.h"
#include "ferry/ops/factories.h"

namespace ferry::bench {
namespace {

namespace st = safetensors;
using Clock = std::chrono::steady_clock;

void drop_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  FERRY_CHECK(fd >= 0, "bench-load: cannot open ", path);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

bool direct_supported(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

struct LoadRow {
  std::string name;
  double ms = 0;
  double bytes = 0;
  std::string baseline;
  double baseline_ms = 0;
  double ratio = 0;  // baseline_ms / ms: above 1 is faster than the baseline
  std::string target;
};

// Prints the row and keeps it for the JSON.
void print_row(std::vector<LoadRow>& rows, const LoadRow& r) {
  rows.push_back(r);
  std::printf("%-34s %9.2f %7.2f   %-28s %9.2f %6.2f   %s\n", r.name.c_str(), r.ms,
              r.bytes / r.ms / 1e6, r.baseline.c_str(), r.baseline_ms, r.ratio, r.target.c_str());
  std::fflush(stdout);
}

// The table's rows (an indented row, "  (same run)", named after the row above it), then the
// cold-cache medians (-1: not measured).
std::string to_json(const std::vector<LoadRow>& rows, double bytes, bool quick,
                    std::pair<double, double> cold_ms) {
  std::ostringstream out;
  out << "{\n  \"bytes\": " << bytes << ", \"quick\": " << (quick ? "true" : "false")
      << ",\n  \"cases\": [\n";
  std::string parent;
  for (size_t i = 0; i < rows.size(); ++i) {
    const LoadRow& r = rows[i];
    const bool sub = r.name.rfind("  ", 0) == 0;
    if (!sub) parent = r.name;
    const std::string name = sub ? parent + " " + r.name.substr(2) : r.name;
    out << "    {\"case\": " << json_quoted(name) << ", \"ms\": " << r.ms
        << ", \"gbps\": " << r.bytes / r.ms / 1e6 << ", \"baseline\": " << json_quoted(r.baseline)
        << ", \"baseline_ms\": " << r.baseline_ms << ", \"ratio\": " << r.ratio
        << ", \"target\": " << json_quoted(r.target) << "}" << (i + 1 < rows.size() ? "," : "")
        << "\n";
  }
  out << "  ],\n  \"cold\": {\"buffered_ms\": " << cold_ms.first
      << ", \"direct_ms\": " << cold_ms.second << "}\n}\n";
  return out.str();
}

// Times `op` and `baseline` interleaved `repeat` times (after one warm-up each).
std::pair<double, double> interleaved(const std::function<void()>& op,
                                      const std::function<void()>& baseline, int repeat) {
  op();
  baseline();
  std::vector<double> a, b;
  for (int i = 0; i < repeat; ++i) {
    a.push_back(time_ms(op));
    b.push_back(time_ms(baseline));
  }
  return {median(a), median(b)};
}

}  // namespace

std::string cpu_model_name() {
  if (FILE* p = ::popen("lscpu 2>/dev/null", "r")) {
    char line[512];
    std::string model;
    while (std::fgets(line, sizeof line, p) != nullptr) {
      std::string s(line);
      if (s.rfind("Model name:", 0) == 0) {
        model = s.substr(s.find(':') + 1);
        model.erase(0, model.find_first_not_of(" \t"));
        model.erase(model.find_last_not_of(" \t\n") + 1);
        break;
      }
    }
    ::pclose(p);
    if (!model.empty()) return model;
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string s; std::getline(cpuinfo, s);) {
    if (s.rfind("model name", 0) == 0) return s.substr(s.find(':') + 2);
  }
  return "unknown CPU";
}

int run_load_bench(const LoadBenchOptions& o) {
  FERRY_CHECK(o.repeat >= 1, "bench-load: expected --repeat of at least 1, but got ", o.repeat);
  const int64_t mib = o.quick ? std::min<int64_t>(o.file_mib, 64) : o.file_mib;
  FERRY_CHECK(mib >= 4, "bench-load: expected --size-mib of at least 4, but got ", mib);
  const int repeat = o.quick ? std::min(o.repeat, 3) : o.repeat;
  std::string dir = o.dir;
  if (dir.empty()) dir = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  FERRY_CHECK(o.json != "-",
              "bench-load --json: expected a file path, but got \"-\" (the tables use stdout)");
  std::ofstream json_file;
  if (!o.json.empty()) {
    json_file.open(o.json);
    FERRY_CHECK(json_file.good(), "bench-load: cannot write --json file \"", o.json, "\" (",
                std::strerror(errno), ")");
  }
  const std::string path = dir + "/ferry-bench-load-" + std::to_string(::getpid()) + ".safetensors";
  std::printf("ferry bench-load: CPU %s (lscpu), %u hardware threads; median of %d runs; %s\n",
              cpu_model_name().c_str(), std::thread::hardware_concurrency(), repeat,
              o.quick ? "--quick: a smoke test, figures are not meaningful"
                      : "a quiet machine "
                        "is assumed");

  // The file: mib / 4 tensors of 4 MiB.
  {
    TensorDict tensors;
    for (int64_t i = 0; i < mib / 4; ++i) {
      tensors.insert("layer." + std::to_string(i) + ".weight",
                     full({1024, 1024}, static_cast<double>(i), kFloat32));
    }
    st::save(path, tensors);
  }
  struct Cleanup {
    std::string path;
    ~Cleanup() { std::filesystem::remove(path); }
  } cleanup{path};
  const double bytes = static_cast<double>(st::read_header(path).data_bytes);
  (void)st::load(path, {.host_memory = st::HostMemory::kPageable});  // into the page cache
  std::printf("file: %s, %.0f MiB in %lld tensors, in the page cache\n\n", path.c_str(),
              bytes / (1 << 20), static_cast<long long>(mib / 4));

  const auto n = static_cast<size_t>(bytes);
  std::vector<char> a(n, 1), b(n, 2);
  const std::function<void()> memcpy_once = [&] { std::memcpy(b.data(), a.data(), n); };
  std::printf("%-34s %9s %7s   %-28s %9s %6s   %s\n", "load", "ms", "GB/s", "baseline", "base ms",
              "ratio", "target");
  const bool direct = direct_supported(path);
  std::vector<LoadRow> rows;
  std::vector<std::pair<std::string, st::LoadOptions>> host_cases = {
      {"pinned, buffered reads", {.host_memory = st::HostMemory::kPinned}},
      {"pageable, buffered reads", {.host_memory = st::HostMemory::kPageable}},
      {"mapped (zero-copy, untouched)", {}},
  };
  if (direct) {
    host_cases.insert(host_cases.begin() + 1, {"pinned, O_DIRECT reads",
                                               {.host_memory = st::HostMemory::kPinned,
                                                .read_mode = st::ReadMode::kDirect}});
  }
  for (const auto& [name, options] : host_cases) {
    const auto [ms, base] =
        interleaved([&, opt = options] { (void)st::load(path, opt); }, memcpy_once, repeat);
    print_row(rows, {name, ms, bytes, "memcpy of the same bytes", base, base / ms,
                     name == "pinned, buffered reads" ? ">= 0.8" : ""});
  }

  // sim:0 with every link at 25 GB/s (FERRY_SIM_BANDWIDTH=25G).
  const sim::SimConfig saved = sim::config();
  sim::SimConfig linked = saved;
  linked.bandwidth.fill(25e9);
  sim::configure(linked);
  {
    const Device dev("sim:0");
    const Tensor pinned =
        empty({static_cast<int64_t>(n)}, TensorOptions(kUInt8).pinned_memory(true));
    std::memset(pinned.data_ptr(), 3, n);
    Tensor target = empty({static_cast<int64_t>(n)}, TensorOptions(kUInt8).device(dev));
    const Stream stream = current_stream(dev);
    const std::function<void()> link_copy = [&] {
      target.copy_(pinned, /*non_blocking=*/true);
      stream.synchronize();
    };
    const double nominal = bytes / 25e9 * 1e3;
    for (const auto& [name, options] : std::vector<std::pair<std::string, st::LoadOptions>>{
             {"sim:0 @ 25 GB/s, staged", {.device = dev}},
             {"sim:0 @ 25 GB/s, staged, 4 x 64 MiB", {.device = dev, .chunk_bytes = 64 << 20}}}) {
      const auto [ms, base] =
          interleaved([&, opt = options] { (void)st::load(path, opt); }, link_copy, repeat);
      print_row(rows, {name, ms, bytes, "modelled link (bytes/25 GB/s)", nominal, nominal / ms,
                       ">= 0.9"});
      print_row(rows, {"  (same run)", ms, bytes, "measured pinned h2d copy", base, base / ms, ""});
      // Without overlap a load costs a read into pinned memory plus the copy: the staged load
      // should beat that sum.
      const std::function<void()> serial = [&] {
        (void)st::load(path, {.host_memory = st::HostMemory::kPinned});
        link_copy();
      };
      const auto [ms2, serial_ms] =
          interleaved([&, opt = options] { (void)st::load(path, opt); }, serial, repeat);
      print_row(rows, {"  (again)", ms2, bytes, "pinned load, then the copy", serial_ms,
                       serial_ms / ms2, "> 1: overlapped"});
    }
  }
  sim::configure(saved);

  std::pair<double, double> cold_ms = {-1, -1};  // buffered, O_DIRECT
  if (o.cold) {
    std::printf("\ncold cache (the file's pages dropped before each load; medians of %d):\n",
                std::max(3, repeat / 2));
    std::vector<double> buffered, directs;
    for (int i = 0; i < std::max(3, repeat / 2); ++i) {
      drop_from_page_cache(path);
      buffered.push_back(
          time_ms([&] { (void)st::load(path, {.host_memory = st::HostMemory::kPinned}); }));
      if (direct) {
        drop_from_page_cache(path);
        directs.push_back(time_ms([&] {
          (void)st::load(
              path, {.host_memory = st::HostMemory::kPinned, .read_mode = st::ReadMode::kDirect});
        }));
      }
    }
    const double mb = median(buffered);
    cold_ms = {mb, direct ? median(directs) : -1};
    std::printf("  pinned, buffered reads: %9.2f ms %7.2f GB/s\n", mb, bytes / mb / 1e6);
    if (direct) {
      const double md = median(directs);
      std::printf("  pinned, O_DIRECT reads: %9.2f ms %7.2f GB/s  (buffered / direct time %.2f)\n",
                  md, bytes / md / 1e6, mb / md);
    } else {
      std::printf("  O_DIRECT: not supported by the file system of %s\n", dir.c_str());
    }
  }
  std::printf("\nratio = baseline ms / ms (above 1: faster than the baseline)\n\n");
  const std::string json = to_json(rows, bytes, o.quick, cold_ms);
  if (o.json_text != nullptr) *o.json_text = json;
  if (!o.json.empty()) {
    json_file << json;
    json_file.flush();
    FERRY_CHECK(json_file.good(), "bench-load: writing --json file \"", o.json, "\" failed");
    std::printf("wrote %s\n\n", o.json.c_str());
  }
  memory::pinned_empty_cache();
  if (o.modules) run_module_bench(o.repeat, o.quick);
  return 0;
}

}  // namespace ferry::bench
