// `ferry bench-switch` (see switch_bench.h).
#include "bench/switch_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "bench/cold_start.h"
#include "bench/load_bench.h"  // cpu_model_name
#include "bench/timing.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/core/json_text.h"
#include "ferry/device/guard.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/nn/module.h"
#include "ferry/nn/safetensors.h"
#include "ferry/switch/direct_layers.h"
#include "ferry/switch/direct_plan.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/model_image.h"
#include "ferry/switch/parallel_grouping.h"
#include "ferry/switch/parallel_switch.h"
#include "ferry/switch/pipelined_switch.h"
#include "ferry/switch/switch_profile.h"
#include "ferry/switch/zoo_model.h"

namespace ferry::bench {
namespace {

using switch_::Grouping;
using switch_::HandOff;

struct Variant {
  std::string name;
  Grouping plan;
  HandOff hand_off = HandOff::kDeviceWait;
  double median_ms = 0;
  std::shared_ptr<const switch_::DirectLayers> direct;  // "ferry + direct" only
  std::vector<switch_::Route> routes;  // set: switch_in_parallel, some groups through sim:1
  bool single_route = false;  // the parallel planner kept one route: ferry's switch, not rerun
};

// The variants' places in ModelResult::variants: load then run, per layer, PipeSwitch, ferry,
// ferry + direct, then "ferry, parallel" when sim:1 exists.
constexpr size_t kPipeSwitch = 2;
constexpr size_t kFerry = 3;
constexpr size_t kFerryDirect = 4;  // the planner's choice with direct access: what serve runs

// The two targets for one ferry case.
struct TargetCheck {
  double over_ms = 0;   // its overhead over ready
  double bound_ms = 0;  // max(0, transfer - compute) + its largest copied group + 1 ms
  bool met_bound = false;
  bool met_half = false;  // over_ms <= 0.5 x PipeSwitch-style's overhead
};

struct ModelResult {
  std::string model;
  size_t layers = 0;
  double weight_mb = 0;
  double transfer_ms = 0;
  double ready_ms = 0;  // measured
  std::vector<Variant> variants;
  double stop_and_start_ms = 0;            // a new process: build, load the file, run (median)
  TargetCheck ferry_target;                // "ferry": copies only
  TargetCheck served_target;               // "ferry + direct", as `ferry serve` plans by default
  std::vector<std::string> direct_layers;  // the layers "ferry + direct" reads in place
};

std::FILE* table_out(const SwitchBenchOptions& o) { return o.json == "-" ? stderr : stdout; }

double switch_ms(const switch_::ModelImage& image, const switch_::ZooModel& model, const Variant& v,
                 const Tensor& input, const switch_::SwitchStreams& streams,
                 const switch_::PeerStreams* peer = nullptr,
                 std::shared_ptr<switch_::SwitchTrace> trace = nullptr) {
  switch_::switch_out(image);
  streams.compute.synchronize();
  streams.copy.synchronize();
  switch_::SwitchOptions options;
  options.hand_off = v.hand_off;
  options.trace = std::move(trace);
  options.direct = v.direct;
  const double t0 = now_ms();
  switch_::QueuedSwitch queued =
      v.routes.empty()
          ? switch_in(image, model.layers, v.plan.ends, input, streams, options)
          : switch_in_parallel(image, model.layers, v.plan.ends, v.routes, input, streams, *peer);
  streams.compute.synchronize();
  return now_ms() - t0;
}

double ready_ms(const switch_::ZooModel& model, const Tensor& input,
                const switch_::SwitchStreams& streams) {
  NoGradGuard no_grad;
  StreamGuard on_compute(streams.compute);
  const double t0 = now_ms();
  (void)switch_::run_layers(model.layers, input);
  streams.compute.synchronize();
  return now_ms() - t0;
}

// A model's state_dict saved as a safetensors file in a scratch folder, removed with the object:
// what the stop-and-start process loads.
class WeightsFile {
 public:
  WeightsFile(const std::string& arch, const nn::Module& module)
      : dir_(std::filesystem::temp_directory_path() /
             ("ferry-bench-switch-" + std::to_string(::getpid()))),
        path_((dir_ / (arch + ".safetensors")).string()) {
    std::filesystem::create_directories(dir_);
    safetensors::save(path_, module.state_dict());
  }
  WeightsFile(const WeightsFile&) = delete;
  WeightsFile& operator=(const WeightsFile&) = delete;
  ~WeightsFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

// PipeSwitch's stop-and-start baseline, for scale: a new process (this tool's
// switch-cold-start) builds the model, loads its weights from `weights` into sim:0 and runs the
// request.
void stop_and_start(const std::string& arch, const std::string& weights,
                    const SwitchBenchOptions& o, ModelResult& r) {
  ColdStartOptions cold;
  cold.arch = arch;
  cold.batch = o.batch;
  cold.weights = weights;
  std::vector<double> runs;
  const int n = o.quick ? 1 : o.stop_and_start_repeat;
  for (int i = 0; i < n; ++i) runs.push_back(time_cold_start(cold, sim::config()));
  r.stop_and_start_ms = median(runs);
}

ModelResult bench_model(const std::string& arch, const SwitchBenchOptions& o, int repeat,
                        std::string* trace_json) {
  const Device device("sim:0");
  switch_::ZooInputShape shape;
  shape.batch = o.batch;
  switch_::ZooModel model = switch_::make_zoo_model(arch, 0, shape);
  const WeightsFile weights(arch, *model.module);  // before the image binds the weights
  const switch_::ModelImage image(model.layers);
  const Tensor input = model.example_input(device);
  const switch_::SwitchStreams streams = switch_::switch_streams(device);

  // Profile with the weights resident (one plain switch puts them there).
  switch_::QueuedSwitch resident =
      switch_in(image, model.layers, std::vector<size_t>{model.layers.size()}, input, streams);
  streams.compute.synchronize();
  const switch_::LinkProfile link = switch_::measure_link(device, 15);
  std::vector<switch_::LayerCost> costs;
  {
    StreamGuard on_compute(streams.compute);
    costs = switch_::profile_layers(model.layers, input, link, 3);
  }
  const switch_::GroupCosts ferry_costs = switch_::ferry_group_costs(link);
  const switch_::GroupCosts pipeswitch_costs = switch_::pipeswitch_group_costs(link);
  // Parallel transmission through sim:1 when there is one (its host link, then the peer link).
  std::optional<switch_::PeerStreams> peer;
  std::optional<switch_::PeerRoute> peer_route;
  if (device_count(DeviceType::Sim) > 1) {
    const Device peer_device("sim:1");
    peer = switch_::peer_streams(peer_device, device);
    peer_route = switch_::measure_peer_route(peer_device, device, link, 15);
  }

  ModelResult r;
  r.model = arch;
  r.layers = costs.size();
  for (const auto& c : costs) {
    r.weight_mb += static_cast<double>(c.bytes) / 1e6;
    r.transfer_ms += c.transfer_s * 1e3;
  }
  std::vector<double> ready;
  ready_ms(model, input, streams);
  for (int i = 0; i < repeat; ++i) ready.push_back(ready_ms(model, input, streams));
  r.ready_ms = median(ready);
  resident = {};

  // Direct host access: each weighted layer profiled with its weights read in place from the
  // mapped image; the planner picks the direct set together with the grouping.
  auto direct = std::make_shared<switch_::DirectLayers>();
  direct->mapped = switch_::map_image(image, device);
  std::vector<double> extra;
  {
    StreamGuard on_compute(streams.compute);
    extra = switch_::profile_direct_extra(image, direct->mapped, model.layers, input, link, costs);
  }
  const switch_::DirectPlan direct_plan = switch_::plan_direct(costs, ferry_costs, extra);
  direct->direct = direct_plan.direct;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (direct->direct[i]) r.direct_layers.push_back(costs[i].name);
  }
  Grouping direct_grouping = direct_plan.grouping;
  direct_grouping.planner = "optimal+direct";

  r.variants = {
      {"load, then run", switch_::group_all_at_once(costs, ferry_costs), HandOff::kDeviceWait},
      {"per layer, host sync", switch_::group_per_layer(costs, pipeswitch_costs),
       HandOff::kHostSync},
      {"PipeSwitch, host sync", switch_::group_like_pipeswitch(costs, pipeswitch_costs),
       HandOff::kHostSync},
      {"ferry", switch_::group_optimally(costs, ferry_costs), HandOff::kDeviceWait},
      {"ferry + direct", direct_grouping, HandOff::kDeviceWait, 0, direct},
  };
  if (peer_route) {
    const switch_::ParallelPlan plan = switch_::group_parallel(costs, ferry_costs, peer_route);
    Variant v{"ferry, parallel", {plan.ends, plan.completion_s, plan.planner}};
    v.single_route = plan.peer_groups() == 0;
    if (!v.single_route) v.routes = plan.routes;
    r.variants.push_back(std::move(v));
  }
  const switch_::PeerStreams* peer_streams = peer ? &*peer : nullptr;
  // Round-robin over the cases, so that a slow spell of a shared host falls on all of them rather
  // than on whichever case it happens to hit. A parallel plan that kept one route is ferry's
  // switch: not run again.
  for (Variant& v : r.variants) {
    if (!v.single_route) switch_ms(image, model, v, input, streams, peer_streams);  // warm-up
  }
  std::vector<std::vector<double>> runs(r.variants.size());
  for (int i = 0; i < repeat; ++i) {
    for (size_t k = 0; k < r.variants.size(); ++k) {
      if (r.variants[k].single_route) continue;
      runs[k].push_back(switch_ms(image, model, r.variants[k], input, streams, peer_streams));
    }
  }
  for (size_t k = 0; k < r.variants.size(); ++k) {
    r.variants[k].median_ms =
        r.variants[k].single_route ? r.variants[kFerry].median_ms : median(runs[k]);
  }
  if (trace_json != nullptr) {
    auto trace = std::make_shared<switch_::SwitchTrace>();
    switch_ms(image, model, r.variants[kFerry], input, streams, nullptr, trace);
    *trace_json = trace->chrome_trace_json("ferry switch: " + arch + " on sim:0");
  }
  switch_::switch_out(image);
  streams.compute.synchronize();
  stop_and_start(arch, weights.path(), o, r);

  const double pipeswitch_over = r.variants[kPipeSwitch].median_ms - r.ready_ms;
  const auto check = [&](const Variant& v, const std::vector<bool>* copied_not) {
    double largest_group_ms = 0;
    size_t first = 0;
    for (size_t end : v.plan.ends) {
      double group = 0;
      for (size_t i = first; i < end; ++i) {
        if (copied_not == nullptr || !(*copied_not)[i]) group += costs[i].transfer_s * 1e3;
      }
      largest_group_ms = std::max(largest_group_ms, group);
      first = end;
    }
    TargetCheck t;
    t.over_ms = v.median_ms - r.ready_ms;
    t.bound_ms = std::max(0.0, r.transfer_ms - r.ready_ms) + largest_group_ms + 1.0;
    t.met_bound = t.over_ms <= t.bound_ms;
    t.met_half = t.over_ms <= 0.5 * pipeswitch_over;
    return t;
  };
  r.ferry_target = check(r.variants[kFerry], nullptr);
  r.served_target = check(r.variants[kFerryDirect], &direct->direct);
  return r;
}

void print_result(std::FILE* out, const ModelResult& r) {
  std::fprintf(out, "\n%s: %zu layers, %.1f MB, transfer %.2f ms, ready %.2f ms\n", r.model.c_str(),
               r.layers, r.weight_mb, r.transfer_ms, r.ready_ms);
  std::fprintf(out, "  %-24s %7s %11s %11s %11s %9s\n", "case", "groups", "total ms", "over ready",
               "predicted", "x ready");
  std::fprintf(out, "  %-24s %7s %11.2f %11s %11s %9.2f\n", "ready", "-", r.ready_ms, "0", "-",
               1.0);
  for (const Variant& v : r.variants) {
    std::fprintf(out, "  %-24s %7zu %11.2f %11.2f %11.2f %9.2f", v.name.c_str(), v.plan.ends.size(),
                 v.median_ms, v.median_ms - r.ready_ms, v.plan.completion_s * 1e3,
                 v.median_ms / r.ready_ms);
    if (v.single_route) std::fprintf(out, "  (one route: ferry's switch)");
    if (!v.routes.empty()) {
      const auto through_peer = std::count(v.routes.begin(), v.routes.end(), switch_::Route::kPeer);
      std::fprintf(out, "  (%lld through sim:1)", static_cast<long long>(through_peer));
    }
    std::fputc('\n', out);
  }
  std::fprintf(out, "  %-24s %7s %11.2f %11.2f %11s %9.2f\n", "stop-and-start", "-",
               r.stop_and_start_ms, r.stop_and_start_ms - r.ready_ms, "-",
               r.stop_and_start_ms / r.ready_ms);
  const double pipeswitch_over = r.variants[kPipeSwitch].median_ms - r.ready_ms;
  std::string direct = r.direct_layers.empty() ? "none (plain pipelining wins)" : "";
  for (const std::string& name : r.direct_layers) direct += (direct.empty() ? "" : ", ") + name;
  std::fprintf(out, "  ferry + direct reads in place: %s\n", direct.c_str());
  const auto print_target = [&](const char* name, const TargetCheck& t) {
    std::fprintf(out,
                 "  target: %s overhead %.2f ms <= %.2f ms (transfer beyond compute + its "
                 "largest group + 1 ms): %s\n",
                 name, t.over_ms, t.bound_ms, t.met_bound ? "met" : "MISSED");
    std::fprintf(out, "  target: %s overhead <= 0.5x PipeSwitch's (%.2f ms): %s\n", name,
                 pipeswitch_over, t.met_half ? "met" : "MISSED");
  };
  print_target("ferry's", r.ferry_target);
  print_target("ferry + direct's (as served)", r.served_target);
}

std::string json_of(const std::vector<ModelResult>& results, const SwitchBenchOptions& o) {
  std::ostringstream j;
  j << "[";
  bool first = true;
  for (const ModelResult& r : results) {
    for (size_t i = 0; i <= r.variants.size() + 1; ++i) {
      const bool ready = i == r.variants.size();
      const bool cold = i == r.variants.size() + 1;  // stop-and-start: no groups, no plan
      const std::string name = ready ? "ready" : cold ? "stop-and-start" : r.variants[i].name;
      const double ms = ready ? r.ready_ms : cold ? r.stop_and_start_ms : r.variants[i].median_ms;
      j << (first ? "" : ",") << "\n{\"case\": " << json_quoted(r.model + ": " + name)
        << ", \"model\": " << json_quoted(r.model) << ", \"variant\": " << json_quoted(name)
        << ", \"batch\": " << o.batch
        << ", \"groups\": " << (ready || cold ? 0 : r.variants[i].plan.ends.size())
        << ", \"ms\": " << ms << ", \"ready_ms\": " << r.ready_ms
        << ", \"x_ready\": " << ms / r.ready_ms << ", \"predicted_ms\": "
        << (ready  ? r.ready_ms
            : cold ? ms
                   : r.variants[i].plan.completion_s * 1e3)
        << ", \"transfer_ms\": " << r.transfer_ms << ", \"bandwidth\": " << json_quoted(o.bandwidth)
        << ", \"compute\": " << json_quoted(o.compute)
        << ", \"cpu\": " << json_quoted(cpu_model_name()) << "}";
      first = false;
    }
  }
  j << "\n]\n";
  return j.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  FERRY_CHECK(f.good(), "bench-switch: could not write ", path);
}

}  // namespace

sim::SimConfig switch_bench_sim_config(sim::SimConfig base, const std::string& compute,
                                       const std::string& bandwidth, const std::string& latency) {
  base.compute_rate = sim::parse_flop_rate(compute, "--compute");
  base.compute_timing_only = base.compute_rate > 0;
  base.bandwidth[static_cast<int>(sim::Link::HostToDevice)] =
      sim::parse_bandwidth(bandwidth, "--bandwidth");
  base.latency[static_cast<int>(sim::Link::HostToDevice)] =
      sim::parse_duration(latency, "--latency");
  return base;
}

sim::SimConfig switch_bench_peer_config(sim::SimConfig base, const std::string& peer_bandwidth,
                                        const std::string& latency) {
  base.bandwidth[static_cast<int>(sim::Link::Peer)] =
      sim::parse_bandwidth(peer_bandwidth, "--peer-bandwidth");
  base.latency[static_cast<int>(sim::Link::Peer)] = sim::parse_duration(latency, "--latency");
  return base;
}

int run_switch_bench(const SwitchBenchOptions& o) {
  FERRY_CHECK(o.repeat >= 1, "bench-switch: expected --repeat >= 1, got ", o.repeat);
  FERRY_CHECK(o.batch >= 1, "bench-switch: expected --batch >= 1, got ", o.batch);
  for (const std::string& path : {o.json, o.trace}) {
    if (path.empty() || path == "-") continue;
    std::ofstream probe(path, std::ios::app);
    FERRY_CHECK(probe.good(), "bench-switch: cannot write ", path);
  }
  std::FILE* out = table_out(o);
  const std::vector<std::string> models =
      o.quick ? std::vector<std::string>{"bert-tiny", "resnet18"} : o.models;
  for (const std::string& model : models) {
    const auto& known = switch_::zoo_architectures();
    if (std::find(known.begin(), known.end(), model) == known.end()) {
      (void)switch_::make_zoo_model(model);  // raises, naming the known architectures
    }
  }
  const int repeat = o.quick ? std::min(o.repeat, 3) : o.repeat;

  const sim::SimConfig saved = sim::config();
  sim::configure(
      switch_bench_peer_config(switch_bench_sim_config(saved, o.compute, o.bandwidth, o.latency),
                               o.peer_bandwidth, o.latency));

  std::fprintf(out,
               "bench-switch: sim:0, link %s with %s per copy (parallel: sim:1's link too, peer "
               "link %s), compute %s, batch %lld, medians of %d switches; CPU %s\n",
               o.bandwidth.c_str(), o.latency.c_str(), o.peer_bandwidth.c_str(),
               sim::config().compute_rate > 0 ? (o.compute + " (modelled, timing-only)").c_str()
                                              : "real (the CPU kernels' own time)",
               o.batch, repeat, cpu_model_name().c_str());
  std::vector<ModelResult> results;
  std::string trace;
  try {
    for (size_t m = 0; m < models.size(); ++m) {
      const bool traced = m == 0 && (!o.trace.empty() || o.trace_text != nullptr);
      results.push_back(bench_model(models[m], o, repeat, traced ? &trace : nullptr));
      print_result(out, results.back());
      std::fflush(out);
    }
  } catch (...) {
    sim::configure(saved);
    throw;
  }
  sim::configure(saved);

  const std::string json = json_of(results, o);
  if (o.json == "-") {
    std::fputs(json.c_str(), stdout);
  } else if (!o.json.empty()) {
    write_file(o.json, json);
  }
  if (o.json_text != nullptr) *o.json_text = json;
  if (!o.trace.empty()) write_file(o.trace, trace);
  if (o.trace_text != nullptr) *o.trace_text = trace;
  bool met = true;
  for (const ModelResult& r : results)
    met = met && r.served_target.met_bound && r.served_target.met_half;
  return met || o.quick ? 0 : 1;
}

}  // namespace ferry::bench
