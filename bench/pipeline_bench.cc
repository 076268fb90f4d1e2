// `ferry bench-pipeline` (see pipeline_bench.h). Stages are Linear(width, width) layers without
// bias, one per sim device, so every stage does the same modelled work; a step is forward and
// backward of one mini-batch, timed until every device is idle.
#include "bench/pipeline_bench.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/load_bench.h"  // cpu_model_name
#include "bench/timing.h"
#include "ferry/autograd/engine.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/iter/parallel.h"
#include "ferry/nn/layers/activation.h"
#include "ferry/nn/layers/linear.h"
#include "ferry/ops/factories.h"
#include "ferry/pipeline/pipeline.h"

namespace ferry::bench {
namespace {

using pipeline::GPipe;
using pipeline::Span;
using pipeline::SpanKind;
using pipeline::Tracer;

std::vector<Device> sim_devices(int n) {
  std::vector<Device> out;
  for (int j = 0; j < n; ++j) out.emplace_back(DeviceType::Sim, static_cast<DeviceIndex>(j));
  return out;
}

nn::Sequential linear_stages(int n, int64_t width) {
  nn::Sequential s;
  for (int j = 0; j < n; ++j) s->push_back(nn::Linear(width, width, /*bias=*/false));
  return s;
}

void configure(const sim::SimConfig& base, double compute_rate, double bandwidth) {
  sim::SimConfig c = base;
  c.compute_rate = compute_rate;
  c.compute_timing_only = compute_rate > 0;
  // The link between stages (and the host's): copies within one device (the gather's cat)
  // stay at memory speed, as on a GPU, rather than at the link's.
  c.bandwidth.fill(bandwidth);
  c.bandwidth[static_cast<size_t>(sim::Link::DeviceToDevice)] = 0;
  sim::configure(c);
}

// One training step: forward, backward seeded with `grad`, every device idle at the end.
double step_ms(GPipe& pipe, const Tensor& x, const Tensor& grad) {
  const double t0 = now_ms();
  const Tensor y = pipe.forward(x);
  autograd::backward({y}, {grad});
  for (const Device& d : pipe.devices()) device_synchronize(d);
  return now_ms() - t0;
}

double median_step_ms(GPipe& pipe, const Tensor& x, const Tensor& grad, int repeat) {
  step_ms(pipe, x, grad);  // warm-up: streams, engine threads, allocator
  std::vector<double> runs;
  for (int r = 0; r < repeat; ++r) runs.push_back(step_ms(pipe, x, grad));
  return median(runs);
}

struct Case {
  int stages;
  int chunks;
};

// A step of `stages` Linear layers, one per sim device (or all on sim:0 with on_one_device).
double pipeline_ms(int stages, int chunks, int64_t rows, int64_t width, int repeat,
                   const std::string& checkpoint, const std::shared_ptr<Tracer>& tracer = nullptr,
                   bool on_one_device = false) {
  const auto devices = on_one_device ? sim_devices(1) : sim_devices(stages);
  const std::vector<int64_t> balance =
      on_one_device ? std::vector<int64_t>{stages} : std::vector<int64_t>(stages, 1);
  GPipe pipe(linear_stages(stages, width), balance, devices, chunks, checkpoint);
  const Tensor x = randn({rows * chunks, width}).to(devices.front());
  const Tensor grad = ones({rows * chunks, width}).to(devices.back());
  if (!tracer) return median_step_ms(pipe, x, grad, repeat);
  step_ms(pipe, x, grad);
  pipe.set_tracer(tracer);
  tracer->clear();
  return step_ms(pipe, x, grad);
}

char span_char(const Span& s) {
  switch (s.kind) {
    case SpanKind::Forward:
      return static_cast<char>('0' + s.microbatch % 10);
    case SpanKind::Backward:
      return static_cast<char>('a' + s.microbatch % 26);
    case SpanKind::Recompute:
      return static_cast<char>('A' + s.microbatch % 26);
    case SpanKind::Copy:
      return '>';
  }
  return '?';
}

// Lanes in device order, compute before copy.
std::vector<std::string> lanes_of(const std::vector<Span>& spans) {
  std::vector<std::string> lanes;
  for (const Span& s : spans) {
    if (std::find(lanes.begin(), lanes.end(), s.lane) == lanes.end()) lanes.push_back(s.lane);
  }
  std::sort(lanes.begin(), lanes.end(), [](const std::string& a, const std::string& b) {
    const auto key = [](const std::string& l) {
      const size_t colon = l.find(':');
      const size_t space = l.find(' ');
      return std::make_pair(std::stoi(l.substr(colon + 1, space - colon - 1)), l.substr(space));
    };
    return key(a) < key(b);
  });
  return lanes;
}

void print_gantt(std::FILE* out, const std::vector<Span>& spans, int width) {
  double t0 = 1e300, t1 = 0;
  for (const Span& s : spans) {
    if (s.begin_ms < 0 || s.end_ms < 0) continue;
    t0 = std::min(t0, s.begin_ms);
    t1 = std::max(t1, s.end_ms);
  }
  if (t1 <= t0) return;
  const double scale = width / (t1 - t0);
  for (const std::string& lane : lanes_of(spans)) {
    std::string row(static_cast<size_t>(width), '.');
    for (const Span& s : spans) {
      if (s.lane != lane || s.begin_ms < 0 || s.end_ms < 0) continue;
      const int a = std::clamp(static_cast<int>((s.begin_ms - t0) * scale), 0, width - 1);
      const int b = std::clamp(static_cast<int>((s.end_ms - t0) * scale + 0.999), a + 1, width);
      for (int c = a; c < b; ++c) row[static_cast<size_t>(c)] = span_char(s);
    }
    std::fprintf(out, "  %-14s |%s|\n", lane.c_str(), row.c_str());
  }
  std::fprintf(out, "  %-14s  0 ms%*s%.1f ms\n", "", width - 8, "", t1 - t0);
  std::fprintf(
      out,
      "  forward of micro-batch i: digit i; backward: letter a+i; recompute: A+i; copy: '>'\n");
}

// The spans as Chrome-trace JSON: one thread_name record per lane, then an "X" event per span.
std::string chrome_trace(const std::vector<Span>& spans) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);  // microseconds to the nanosecond, however late
  const auto lanes = lanes_of(spans);
  out << "[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  for (size_t k = 0; k < lanes.size(); ++k) {
    sep();
    out << R"({"name":"thread_name","ph":"M","pid":1,"tid":)" << k << R"(,"args":{"name":")"
        << lanes[k] << "\"}}";
  }
  const std::map<SpanKind, const char*> names = {{SpanKind::Forward, "forward"},
                                                 {SpanKind::Backward, "backward"},
                                                 {SpanKind::Recompute, "recompute"},
                                                 {SpanKind::Copy, "copy"}};
  for (const Span& s : spans) {
    if (s.begin_ms < 0 || s.end_ms < 0) continue;
    const auto tid = std::find(lanes.begin(), lanes.end(), s.lane) - lanes.begin();
    sep();
    out << R"({"name":")" << names.at(s.kind) << " mb" << s.microbatch << " p" << s.partition
        << R"(","cat":")" << names.at(s.kind) << R"(","ph":"X","pid":1,"tid":)" << tid
        << R"(,"ts":)" << s.begin_ms * 1000 << R"(,"dur":)" << (s.end_ms - s.begin_ms) * 1000
        << "}";
  }
  out << "\n]\n";
  return out.str();
}

// Opens `path` for writing before the benchmark runs, so that a bad path fails first.
void open_output(std::ofstream& file, const std::string& path, const char* option) {
  if (path.empty() || path == "-") return;
  file.open(path);
  FERRY_CHECK(file.good(), "bench-pipeline ", option,
              ": expected a writable file, but cannot open \"", path, "\" (", std::strerror(errno),
              ")");
}

void write_output(std::ofstream& file, const std::string& text, const std::string& path,
                  const char* option) {
  file << text;
  file.flush();
  FERRY_CHECK(file.good(), "bench-pipeline ", option, ": writing \"", path, "\" failed");
}

// Time during which both compute lanes were busy, over the time either was.
double concurrency(const std::vector<Span>& spans, const std::string& a, const std::string& b) {
  auto busy = [&](const std::string& lane) {
    std::vector<std::pair<double, double>> v;
    for (const Span& s : spans) {
      if (s.lane == lane && s.begin_ms >= 0 && s.end_ms >= 0) v.emplace_back(s.begin_ms, s.end_ms);
    }
    return v;
  };
  const auto va = busy(a), vb = busy(b);
  double both = 0, any_a = 0;
  for (const auto& [a0, a1] : va) {
    any_a += a1 - a0;
    for (const auto& [b0, b1] : vb) both += std::max(0.0, std::min(a1, b1) - std::max(a0, b0));
  }
  return any_a > 0 ? both / any_a : 0;
}

}  // namespace

int run_pipeline_bench(const PipelineOptions& o) {
  FERRY_CHECK(o.repeat >= 1, "bench-pipeline: expected --repeat >= 1, but got ", o.repeat);
  FERRY_CHECK(o.width >= 20, "bench-pipeline: expected --width >= 20, but got ", o.width);
  const double rate = sim::parse_flop_rate(o.compute, "--compute");
  FERRY_CHECK(rate > 0, "bench-pipeline: expected a positive --compute rate, but got \"", o.compute,
              "\"");
  const double link = sim::parse_bandwidth(o.bandwidth, "--bandwidth");
  const double slow = sim::parse_bandwidth(o.slow_link, "--slow-link");
  const sim::SimConfig env = sim::SimConfig::from_env();
  sim::SimConfig base = env;
  base.devices = std::max(env.devices, 8);
  base.chaos_seed.reset();
  const int64_t width = o.quick ? 256 : 1024;
  const int64_t rows = 32;
  const int repeat = o.quick ? 1 : o.repeat;
  std::ofstream json_file, trace_file;
  open_output(json_file, o.json, "--json");
  open_output(trace_file, o.trace, "--trace");
  std::FILE* out = o.json == "-" ? stderr : stdout;  // the tables
  std::ostringstream json;
  json << "{\n  \"compute\": \"" << o.compute << "\", \"bandwidth\": \"" << o.bandwidth
       << "\", \"quick\": " << (o.quick ? "true" : "false") << ", \"repeat\": " << repeat
       << ",\n  \"cases\": [\n";
  std::fprintf(
      out,
      "ferry bench-pipeline: CPU %s (lscpu), %u hardware threads; sim compute model %s FLOP/s "
      "(timing only), link %s B/s; stages Linear(%lld, %lld), %lld rows per micro-batch; median "
      "of %d steps%s\n\n",
      cpu_model_name().c_str(), std::thread::hardware_concurrency(), o.compute.c_str(),
      o.bandwidth.c_str(), static_cast<long long>(width), static_cast<long long>(width),
      static_cast<long long>(rows), repeat, o.quick ? "; --quick: figures are not meaningful" : "");
  int missed = 0;

  // 1. Utilization against the ideal m / (m + n - 1): the speed-up over the same layers and
  // micro-batches on one device, divided by the number of stages.
  configure(base, rate, link);
  std::fprintf(out, "1. Throughput (checkpoint=never) against the same model on one device\n");
  std::fprintf(out, "%7s %7s %9s %9s %8s %11s %15s %7s %9s\n", "stages", "chunks", "1 dev ms",
               "piped ms", "speed-up", "utilization", "ideal m/(m+n-1)", "ratio", "target");
  const std::vector<Case> cases =
      o.quick ? std::vector<Case>{{4, 4}}
              : std::vector<Case>{{4, 4}, {4, 8}, {4, 16}, {8, 4}, {8, 8}, {8, 16}};
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const double one = pipeline_ms(c.stages, c.chunks, rows, width, repeat, "never", nullptr, true);
    const double t = pipeline_ms(c.stages, c.chunks, rows, width, repeat, "never");
    const double speedup = one / t;
    const double utilization = speedup / c.stages;
    const double ideal = static_cast<double>(c.chunks) / (c.chunks + c.stages - 1);
    const bool ok = utilization >= 0.9 * ideal;
    missed += ok ? 0 : 1;
    std::fprintf(out, "%7d %7d %9.1f %9.1f %8.2f %11.3f %15.3f %7.3f %9s\n", c.stages, c.chunks,
                 one, t, speedup, utilization, ideal, utilization / ideal,
                 ok ? ">=0.9 ok" : "MISSED");
    json << "    {\"case\": \"" << c.stages << " stages x " << c.chunks
         << " chunks\", \"stages\": " << c.stages << ", \"chunks\": " << c.chunks
         << ", \"one_device_ms\": " << one << ", \"pipelined_ms\": " << t
         << ", \"speedup\": " << speedup << ", \"utilization\": " << utilization
         << ", \"ideal\": " << ideal << ", \"ratio\": " << utilization / ideal
         << ", \"target_ratio\": 0.9, \"met\": " << (ok ? "true" : "false") << "}"
         << (k + 1 < cases.size() ? "," : "") << "\n";
  }
  json << "  ],\n";

  // 2. Copies on a slow link: how much they add to a step, how much of them hides.
  {
    const int n = 4, m = 8;
    configure(base, rate, 0);
    const double fast = pipeline_ms(n, m, rows, width, repeat, "never");
    configure(base, rate, slow);
    const double slow_ms = pipeline_ms(n, m, rows, width, repeat, "never");
    const double copy_ms = static_cast<double>(rows * width * 4) / slow * 1000;
    const double total_copy = 2.0 * (n - 1) * m * copy_ms;  // forward and backward
    const double added = slow_ms - fast;
    const bool ok = added <= 0.05 * fast;
    missed += ok ? 0 : 1;
    json << "  \"copy_overlap\": {\"stages\": " << n << ", \"chunks\": " << m << ", \"link\": \""
         << o.slow_link << "\", \"step_ms\": " << fast << ", \"step_ms_slow_link\": " << slow_ms
         << ", \"copy_ms_total\": " << total_copy
         << ", \"copy_ms_hidden\": " << total_copy - std::max(added, 0.0)
         << ", \"met\": " << (ok ? "true" : "false") << "},\n";
    std::fprintf(
        out,
        "\n2. Copy overlap (%d stages, %d chunks, link %s B/s): one copy %.2f ms, a stage's "
        "modelled forward %.2f ms\n   step %.1f ms without link cost, %.1f ms with: copies add "
        "%.1f%% (target <= 5%%: %s); %.1f of %.1f ms of copies (%.0f%%) hidden behind compute\n",
        n, m, o.slow_link.c_str(), copy_ms, 2.0 * rows * width * width / rate * 1000, fast, slow_ms,
        100 * added / fast, ok ? "ok" : "MISSED", total_copy - std::max(added, 0.0), total_copy,
        100 * (total_copy - std::max(added, 0.0)) / total_copy);
  }

  // 3. Real compute: two stages on sim:0 and sim:1 at one thread per device.
  {
    configure(base, 0, 0);
    const int saved_threads = get_num_threads();
    set_num_threads(1);
    const int64_t w = o.quick ? 128 : 512, m = 8, b = 64;
    nn::Sequential model;
    for (int k = 0; k < 4; ++k) {
      model->push_back(nn::Linear(w, w));
      model->push_back(nn::ReLU());
    }
    const Tensor host_x = randn({m * b, w});
    GPipe one(model, {8}, {Device("sim:0")}, m, "never");
    const double single = median_step_ms(one, host_x.to(Device("sim:0")),
                                         ones({m * b, w}).to(Device("sim:0")), repeat);
    GPipe two(model, {4, 4}, {Device("sim:0"), Device("sim:1")}, m, "never");
    const Tensor x = host_x.to(Device("sim:0"));
    const Tensor grad = ones({m * b, w}).to(Device("sim:1"));
    const double piped = median_step_ms(two, x, grad, repeat);
    auto tracer = std::make_shared<Tracer>();
    two.set_tracer(tracer);
    step_ms(two, x, grad);
    const double both = concurrency(tracer->spans(), "sim:0 compute", "sim:1 compute");
    set_num_threads(saved_threads);
    json << "  \"real_compute\": {\"one_device_ms\": " << single
         << ", \"two_devices_ms\": " << piped << ", \"speedup\": " << single / piped
         << ", \"ideal\": " << 2.0 * m / (m + 1) << ", \"overlap\": " << both << "},\n";
    std::fprintf(
        out,
        "\n3. Real compute, MLP 4 x Linear(%lld) + ReLU, %lld chunks of %lld rows, 1 thread per "
        "device: one device %.1f ms, sim:0 + sim:1 %.1f ms (speed-up %.2f, ideal %.2f); sim:0's "
        "compute overlapped sim:1's %.0f%% of its busy time\n",
        static_cast<long long>(w), static_cast<long long>(m), static_cast<long long>(b), single,
        piped, single / piped, 2.0 * m / (m + 1), 100 * both);
  }

  // 4. A timeline: 4 stages (--timeline-stages), 8 chunks, checkpoint=except_last
  // (--timeline-checkpoint).
  {
    configure(base, rate, link);
    auto tracer = std::make_shared<Tracer>();
    const int n = o.timeline_stages, m = o.quick ? 4 : 8;
    const std::string& mode = o.timeline_checkpoint;
    const double t = pipeline_ms(n, m, rows, width, 1, mode, tracer);
    std::fprintf(out, "\n4. Timeline: %d stages, %d chunks, checkpoint=%s, one step %.1f ms\n", n,
                 m, mode.c_str(), t);
    json << "  \"timeline\": {\"stages\": " << n << ", \"chunks\": " << m << ", \"checkpoint\": \""
         << mode << "\", \"step_ms\": " << t << "}\n}\n";
    const auto spans = tracer->spans();
    print_gantt(out, spans, o.width);
    const std::string trace = chrome_trace(spans);
    if (o.trace_text != nullptr) *o.trace_text = trace;
    if (!o.trace.empty()) {
      write_output(trace_file, trace, o.trace, "--trace");
      std::fprintf(out, "  Chrome trace: %s (chrome://tracing or ui.perfetto.dev)\n",
                   o.trace.c_str());
    }
  }
  if (o.json_text != nullptr) *o.json_text = json.str();
  if (o.json == "-") {
    std::fputs(json.str().c_str(), stdout);
    std::fflush(stdout);
  } else if (!o.json.empty()) {
    write_output(json_file, json.str(), o.json, "--json");
    std::fprintf(out, "wrote %s\n", o.json.c_str());
  }
  sim::SimConfig restored = env;
  restored.devices = base.devices;  // sim memory may still be cached: keep the device count
  sim::configure(restored);
  // --quick figures mean nothing: only a full run reports a missed target in its exit code.
  return missed == 0 || o.quick ? 0 : 1;
}

}  // namespace ferry::bench
