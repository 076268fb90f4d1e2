// `ferry bench --devices`: copy_ between the host and a device and between devices, each case
// timed to completion (copy_, then a synchronize of the stream that holds the copy's end) as the
// median of interleaved runs beside a baseline of the same bytes: a host memcpy on the sim, the
// raw pinned link copy on CUDA. "call ms" is the time copy_ itself takes to return, which shows
// what a non-blocking copy from pageable memory costs the caller.
#include "bench/device_copy_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/iter/parallel.h"
#include "ferry/ops/device_copy.h"
#include "ferry/ops/factories.h"

namespace ferry::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

enum class Kind { kH2D, kD2H, kD2D };

struct DeviceCopyCase {
  std::string name;
  Kind kind = Kind::kH2D;
  Device dst;
  Device src;
  bool pinned = false;  // the host side, for host<->device
  bool non_blocking = false;
  bool transposed = false;  // the source is a transposed view
  bool peer = true;         // sim device to device: peer access allowed
  int64_t side = 0;         // an n x n float32 matrix
  bool tiny = false;        // per-copy overhead: reported in microseconds
};

struct DeviceCopyRow {
  std::string name;
  std::string path;
  double bytes = 0;
  double ms = 0;
  double call_ms = 0;
  double base_ms = 0;
  bool tiny = false;
};

const char* kind_name(Kind k) { return k == Kind::kH2D ? "h2d" : k == Kind::kD2H ? "d2h" : "d2d"; }

std::vector<DeviceCopyCase> make_cases(Device dev0, std::optional<Device> dev1, bool quick,
                                       bool sim) {
  const int64_t big = quick ? 512 : 4096;  // 64 MiB of float32 at full size
  std::vector<DeviceCopyCase> out;
  for (Kind kind : {Kind::kH2D, Kind::kD2H}) {
    for (bool transposed : {false, true}) {
      for (bool pinned : {false, true}) {
        for (bool nb : {false, true}) {
          DeviceCopyCase c;
          c.kind = kind;
          c.dst = kind == Kind::kH2D ? dev0 : Device(DeviceType::CPU);
          c.src = kind == Kind::kH2D ? Device(DeviceType::CPU) : dev0;
          c.pinned = pinned;
          c.non_blocking = nb;
          c.transposed = transposed;
          c.side = big;
          c.name = std::string(kind_name(kind)) + (transposed ? "_transposed" : "_dense") +
                   (pinned ? "_pinned" : "_pageable") + (nb ? "_nonblocking" : "_blocking");
          out.push_back(c);
        }
      }
    }
  }
  struct Pair {
    const char* label;
    Device dst;
    bool peer;
  };
  std::vector<Pair> pairs = {{"same", dev0, true}};
  if (dev1) {
    pairs.push_back({"peer", *dev1, true});
    if (sim) pairs.push_back({"nopeer", *dev1, false});
  }
  for (const Pair& p : pairs) {
    for (bool transposed : {false, true}) {
      for (bool nb : {false, true}) {
        DeviceCopyCase c;
        c.kind = Kind::kD2D;
        c.dst = p.dst;
        c.src = dev0;
        c.peer = p.peer;
        c.non_blocking = nb;
        c.transposed = transposed;
        c.side = big;
        c.name = std::string("d2d_") + p.label + (transposed ? "_transposed" : "_dense") +
                 (nb ? "_nonblocking" : "_blocking");
        out.push_back(c);
      }
    }
  }
  // Tiny copies (256 bytes) measure the fixed cost per copy.
  const auto tiny = [&](Kind kind, bool pinned, bool nb, const char* name) {
    DeviceCopyCase c;
    c.kind = kind;
    c.dst =
        kind == Kind::kD2H ? Device(DeviceType::CPU) : (kind == Kind::kD2D && dev1 ? *dev1 : dev0);
    c.src = kind == Kind::kH2D ? Device(DeviceType::CPU) : dev0;
    c.pinned = pinned;
    c.non_blocking = nb;
    c.side = 8;
    c.tiny = true;
    c.name = name;
    out.push_back(c);
  };
  tiny(Kind::kH2D, false, false, "tiny_h2d_pageable_blocking");
  tiny(Kind::kH2D, true, false, "tiny_h2d_pinned_blocking");
  tiny(Kind::kH2D, true, true, "tiny_h2d_pinned_nonblocking");
  tiny(Kind::kD2H, false, false, "tiny_d2h_pageable_blocking");
  tiny(Kind::kD2D, false, false, "tiny_d2d_blocking");
  return out;
}

void set_peer_allowed(bool allowed) {
  sim::SimConfig c = sim::config();
  const auto mode = allowed ? sim::SimConfig::PeerMode::kAll : sim::SimConfig::PeerMode::kNone;
  if (c.peer_mode == mode) return;
  c.peer_mode = mode;
  c.peer_matrix.clear();
  sim::configure(c);
}

// Runs one case; `sim` picks the baseline (host memcpy) over the raw link copy (CUDA).
DeviceCopyRow run_case(const DeviceCopyCase& c, int repeat, bool sim) {
  if (sim) set_peer_allowed(c.peer);
  const int64_t n = c.side;
  const TensorOptions f32(kFloat32);
  const Tensor host_values = rand({n, n});
  const auto on = [&](Device d, bool pinned) {
    return f32.device(d).pinned_memory(pinned && d.is_cpu());
  };
  Tensor src_base = host_values.to(on(c.src, c.pinned));
  Tensor dst = empty({n, n}, on(c.dst, c.pinned));
  const Tensor src = c.transposed ? src_base.t() : src_base;
  const Device sync_device = c.kind == Kind::kD2H ? c.src : c.dst;
  const Stream stream = current_stream(sync_device);
  device_synchronize(c.src);

  DeviceCopyRow row;
  row.name = c.name;
  row.tiny = c.tiny;
  row.bytes = static_cast<double>(dst.nbytes());
  const DeviceCopyPlan plan = plan_device_copy(dst, src, c.non_blocking);
  row.path = device_copy_path_name(plan.path);
  if (plan.path == DeviceCopyPath::kStaged) {
    row.path += plan.side == StagingSide::kSource ? " (src side" : " (dst side";
    row.path += plan.pieces > 1 ? ", " + std::to_string(plan.pieces) + " pieces)" : ")";
  }

  // The baseline: the same bytes by host memcpy (sim), or by the raw link (CUDA).
  const size_t bytes = dst.nbytes();
  std::vector<char> a(bytes, 1), b(bytes, 2);
  Tensor link_host = empty({n, n}, f32.pinned_memory(!sim));
  Tensor link_dev = empty({n, n}, f32.device(c.kind == Kind::kD2D ? c.dst : sync_device));
  const std::function<void()> baseline = [&] {
    if (sim) {
      std::memcpy(a.data(), b.data(), bytes);
      return;
    }
    Backend& backend = get_backend(sync_device.type());
    const Stream s = current_stream(c.kind == Kind::kD2D ? c.src : sync_device);
    if (c.kind == Kind::kH2D) {
      backend.memcpy_async(sync_device.index(), link_dev.data_ptr(), link_host.data_ptr(), bytes,
                           CopyKind::HostToDevice, s.raw());
    } else if (c.kind == Kind::kD2H) {
      backend.memcpy_async(sync_device.index(), link_host.data_ptr(), link_dev.data_ptr(), bytes,
                           CopyKind::DeviceToHost, s.raw());
    } else {
      backend.memcpy_peer_async(link_dev.data_ptr(), c.dst.index(), src_base.data_ptr(),
                                c.src.index(), bytes, c.src.index(), s.raw());
    }
    s.synchronize();
  };
  std::vector<double> t_copy, t_call, t_base;
  const auto copy_once = [&] {
    const auto t0 = Clock::now();
    dst.copy_(src, c.non_blocking);
    const auto t1 = Clock::now();
    stream.synchronize();
    const auto t2 = Clock::now();
    t_call.push_back(ms_between(t0, t1));
    t_copy.push_back(ms_between(t0, t2));
  };
  // Warm-up (page faults, caches, peer access), then interleaved samples. Tiny cases repeat
  // each sample many times so that the clock's resolution does not matter.
  const int inner = c.tiny ? 200 : 1;
  copy_once();
  baseline();
  t_copy.clear();
  t_call.clear();
  for (int r = 0; r < repeat; ++r) {
    for (int i = 0; i < inner; ++i) copy_once();
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) baseline();
    t_base.push_back(ms_between(t0, Clock::now()) / inner);
  }
  row.ms = median(t_copy);
  row.call_ms = median(t_call);
  row.base_ms = median(t_base);
  if (sim) set_peer_allowed(true);
  return row;
}

void print_rows(const std::vector<DeviceCopyRow>& rows, bool sim) {
  std::printf("%-34s %7s %-28s %9s %9s %9s %8s %8s\n", "case", "MiB", "path", "ms", "call ms",
              sim ? "memcpy ms" : "link ms", sim ? "xmemcpy" : "of peak", "GB/s");
  for (const DeviceCopyRow& r : rows) {
    if (r.tiny) continue;
    const double gbps = r.bytes / (r.ms * 1e6);
    std::printf("%-34s %7.1f %-28s %9.3f %9.3f %9.3f %8.2f %8.2f\n", r.name.c_str(),
                r.bytes / (1 << 20), r.path.c_str(), r.ms, r.call_ms, r.base_ms,
                sim ? r.ms / r.base_ms : r.base_ms / r.ms, gbps);
  }
  std::printf("\n%-34s %7s %-28s %9s %9s %9s\n", "per-copy cost (256 bytes)", "", "path", "us",
              "call us", sim ? "memcpy us" : "link us");
  for (const DeviceCopyRow& r : rows) {
    if (!r.tiny) continue;
    std::printf("%-34s %7s %-28s %9.2f %9.2f %9.2f\n", r.name.c_str(), "", r.path.c_str(),
                r.ms * 1e3, r.call_ms * 1e3, r.base_ms * 1e3);
  }
}

// The bound for the sim, printed line by line; the per-copy overhead comes from the tiny
// copy with the same host memory.
std::vector<BoundLine> check_bound(const std::vector<DeviceCopyRow>& rows) {
  const auto find = [&](const std::string& name) -> const DeviceCopyRow* {
    for (const DeviceCopyRow& r : rows) {
      if (r.name == name) return &r;
    }
    return nullptr;
  };
  std::printf(
      "\nbound: dense h2d <= 1.2 x memcpy + per-copy overhead (tiny copy minus its memcpy)\n");
  std::vector<BoundLine> lines;
  for (const char* memory : {"pageable", "pinned"}) {
    const DeviceCopyRow* tiny = find(std::string("tiny_h2d_") + memory + "_blocking");
    if (tiny == nullptr) continue;
    for (const char* mode : {"blocking", "nonblocking"}) {
      const DeviceCopyRow* r = find(std::string("h2d_dense_") + memory + "_" + mode);
      if (r == nullptr) continue;
      BoundLine line;
      line.name = r->name;
      line.ms = r->ms;
      line.memcpy_ms = r->base_ms;
      line.overhead_ms = tiny->ms - tiny->base_ms;
      std::printf("  %-32s %8.3f ms <= 1.2 x %.3f + %.3f = %8.3f ms: %s (%.2f x memcpy)\n",
                  line.name.c_str(), line.ms, line.memcpy_ms, line.overhead_ms, line.limit_ms(),
                  line.holds() ? "yes" : "NO", line.ms / line.memcpy_ms);
      lines.push_back(line);
    }
  }
  if (lines.empty()) std::printf("  no case to judge (the cases were filtered out)\n");
  return lines;
}

std::vector<DeviceCopyRow> run_device(DeviceType type, const DeviceBenchOptions& o,
                                      const std::regex& filter) {
  const bool sim = type == DeviceType::Sim;
  const Device dev0(type, 0);
  std::optional<Device> dev1;
  if (device_count(type) > 1) dev1 = Device(type, 1);
  std::vector<DeviceCopyRow> rows;
  for (const DeviceCopyCase& c : make_cases(dev0, dev1, o.quick, sim)) {
    if (!std::regex_search(c.name, filter)) continue;
    rows.push_back(run_case(c, o.repeat, sim));
  }
  return rows;
}

// Staged copies against a modeled link: 12 GB/s each way between the host and sim:0, latency
// off. Transposed copies each way, from and to pageable and pinned memory, in pieces (the
// default, DeviceCopyPlan::pieces) and whole (one piece), each against the dense copy of the
// same bytes in the same direction and memory, all blocking, interleaved, medians. Target (issue
// 19): at most 1.15 x the dense copy.
void run_modeled_link(const DeviceBenchOptions& o) {
  const sim::SimConfig saved = sim::config();
  sim::SimConfig c = saved;
  c.bandwidth = {};
  c.bandwidth[static_cast<size_t>(sim::Link::HostToDevice)] = 12e9;
  c.bandwidth[static_cast<size_t>(sim::Link::DeviceToHost)] = 12e9;
  c.latency = {};
  c.chaos_seed.reset();
  sim::configure(c);
  const int64_t n = o.quick ? 512 : 4096;
  const Device dev("sim:0");
  const Tensor host_dense = rand({n, n});
  const Tensor host_transposed = rand({n, n}).t();
  const Tensor pinned_dense = rand({n, n}).pin_memory();
  const Tensor pinned_transposed = rand({n, n}).pin_memory().t();
  Tensor on_device = empty({n, n}, TensorOptions(kFloat32).device(dev));
  const Tensor device_transposed = rand({n, n}).to(dev).t();
  Tensor on_host = empty({n, n});
  Tensor on_pinned_host = empty({n, n}, TensorOptions(kFloat32).pinned_memory(true));
  const int64_t default_piece = staged_piece_bytes();
  // The same copy in one piece.
  const auto whole = [default_piece](std::function<void()> copy) {
    return [default_piece, copy] {
      set_staged_piece_bytes(int64_t{1} << 62);
      copy();
      set_staged_piece_bytes(default_piece);
    };
  };
  struct Case {
    const char* name;
    std::function<void()> run;
    int baseline;  // index of the dense case it is compared with; -1 for a dense case
  };
  const auto h2d_pageable = [&] { on_device.copy_(host_transposed); };
  const auto h2d_pinned = [&] { on_device.copy_(pinned_transposed); };
  const auto d2h_pageable = [&] { on_host.copy_(device_transposed); };
  const auto d2h_pinned = [&] { on_pinned_host.copy_(device_transposed); };
  const std::vector<Case> cases = {
      {"h2d_dense_pageable", [&] { on_device.copy_(host_dense); }, -1},
      {"h2d_transposed_pageable, in pieces", h2d_pageable, 0},
      {"h2d_transposed_pageable, whole", whole(h2d_pageable), 0},
      {"h2d_dense_pinned", [&] { on_device.copy_(pinned_dense); }, -1},
      {"h2d_transposed_pinned, in pieces", h2d_pinned, 3},
      {"h2d_transposed_pinned, whole", whole(h2d_pinned), 3},
      {"d2h_dense_pageable", [&] { on_host.copy_(on_device); }, -1},
      {"d2h_transposed_pageable, in pieces", d2h_pageable, 6},
      {"d2h_transposed_pageable, whole", whole(d2h_pageable), 6},
      {"d2h_dense_pinned", [&] { on_pinned_host.copy_(on_device); }, -1},
      {"d2h_transposed_pinned, in pieces", d2h_pinned, 9},
      {"d2h_transposed_pinned, whole", whole(d2h_pinned), 9},
  };
  // At one pool thread and at the pool's own count: on the sim a side stream's pieces pay only
  // when the strided work leaves a CPU to the transfer (DeviceCopyPlan::pieces).
  const int pool_threads = get_num_threads();
  for (const int threads : {1, pool_threads}) {
    set_num_threads(threads);
    std::vector<std::vector<double>> times(cases.size());
    for (const Case& k : cases) k.run();  // warm-up: page faults, pinned blocks
    for (int r = 0; r < o.repeat; ++r) {
      for (size_t i = 0; i < cases.size(); ++i) {
        const auto t0 = Clock::now();
        cases[i].run();
        times[i].push_back(ms_between(t0, Clock::now()));
      }
    }
    std::printf(
        "\nstaged copies against a modeled link (sim:0, 12 GB/s each way, latency off; %lld x "
        "%lld float32, blocking, %d thread(s), median of %d)\n%-36s %9s %9s %10s\n",
        static_cast<long long>(n), static_cast<long long>(n), threads, o.repeat, "case", "ms",
        "x dense", "target");
    std::vector<double> ms(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) ms[i] = median(times[i]);
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].baseline < 0) {
        std::printf("%-36s %9.3f %9s %10s\n", cases[i].name, ms[i], "-", "-");
      } else {
        const double ratio = ms[i] / ms[static_cast<size_t>(cases[i].baseline)];
        std::printf("%-36s %9.3f %9.2f %10s\n", cases[i].name, ms[i], ratio,
                    ratio <= 1.15 ? "<= 1.15: yes" : "<= 1.15: no");
      }
    }
    if (pool_threads == 1) break;
  }
  set_num_threads(pool_threads);
  sim::configure(saved);
}

}  // namespace

int run_device_copy_bench(const DeviceBenchOptions& o) {
  FERRY_CHECK(o.repeat >= 10, "bench --repeat: expected at least 10 runs, but got ", o.repeat);
  std::regex filter;
  try {
    filter = std::regex(o.filter.empty() ? std::string(".*") : o.filter);
  } catch (const std::regex_error& e) {
    FERRY_FAIL_AS(Error, "bench --filter: expected an ECMAScript regex, but got \"", o.filter,
                  "\": ", e.what());
  }
  std::vector<BoundLine> bound;
  if (device_count(DeviceType::Sim) > 0) {
    // The bandwidth and latency model off, no chaos: what is left is ferry's own cost.
    const sim::SimConfig saved = sim::config();
    sim::SimConfig c = saved;
    c.bandwidth = {};
    c.latency = {};
    c.chaos_seed.reset();
    sim::configure(c);
    std::printf(
        "ferry bench --devices: sim (%d devices, bandwidth model off), median of %d runs "
        "each, interleaved with a memcpy of the same bytes%s\n",
        device_count(DeviceType::Sim), o.repeat,
        o.quick ? "; --quick: small sizes, numbers are not meaningful" : "");
    const std::vector<DeviceCopyRow> rows = run_device(DeviceType::Sim, o, filter);
    print_rows(rows, true);
    bound = check_bound(rows);
    sim::configure(saved);
    if (std::regex_search("staged_modeled_link", filter)) run_modeled_link(o);
  } else {
    std::printf("sim: no device (%s)\n", device_unavailable_reason(DeviceType::Sim).c_str());
  }
  if (device_count(DeviceType::CUDA) > 0) {
    std::printf(
        "\nCUDA: %d devices, median of %d runs each; \"of peak\" is the share of the "
        "link's measured peak (a raw pinned cudaMemcpyAsync of the same bytes)\n",
        device_count(DeviceType::CUDA), o.repeat);
    print_rows(run_device(DeviceType::CUDA, o, filter), false);
  } else {
    std::printf("\nCUDA: skipped (%s)\n", device_unavailable_reason(DeviceType::CUDA).c_str());
  }
  std::printf(
      "\nxmemcpy = ferry time / memcpy time (1.00: as fast as a host memcpy of the same "
      "bytes); ms includes synchronizing the stream that holds the end of the copy\n");
  const int status = bound_exit_code(bound, o.check);
  if (o.check) {
    std::printf("%s\n", status == 0   ? "check: the bound holds"
                        : status == 1 ? "check: FAILED, the bound does not hold"
                                      : "check: FAILED, no case to judge the bound by");
  }
  return status;
}

}  // namespace ferry::bench
