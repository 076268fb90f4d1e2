// `ferry bench-transport` (see transport_bench.h): the plan, ferry's pair
// (bench/transport_pair.h) then ucx_perftest (bench/transport_perftest.h) per transport, and the
// tables.
#if defined(FERRY_WITH_TRANSPORT)

#include "bench/transport_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/load_bench.h"  // cpu_model_name
#include "bench/timing.h"
#include "bench/transport_pair.h"
#include "bench/transport_perftest.h"
#include "ferry/core/error.h"

namespace ferry::bench {
namespace transport_bench {
namespace {

constexpr uint64_t KiB = 1024, MiB = KiB * KiB, GiB = MiB * KiB;

std::string size_name(uint64_t bytes) {
  if (bytes >= GiB && bytes % GiB == 0) return std::to_string(bytes / GiB) + " GiB";
  if (bytes >= MiB && bytes % MiB == 0) return std::to_string(bytes / MiB) + " MiB";
  if (bytes >= KiB && bytes % KiB == 0) return std::to_string(bytes / KiB) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string case_name(const TransportCase& c) {
  return (c.latency ? "latency " : "bandwidth ") + size_name(c.bytes);
}

// The cases (--cases picks latency, bandwidth or both). Latency: 20000 round trips per repeat
// (1000 with --quick). Bandwidth: iterations sized so a repeat moves about 256 MiB (16 MiB with
// --quick), at least 3 messages; a window of 64 MiB in flight, between 2 and 16 sends. At most 3
// repeats from 256 MiB up (each moves 768 MiB or more, and ucx_perftest spends seconds per run
// setting up such buffers). ferry's pair may run fewer iterations when it is slow; ucx_perftest
// runs these.
// `sizes` (--sizes: "4K" ... "1G") keeps only those bandwidth sizes; empty keeps all.
std::vector<TransportCase> plan(bool quick, bool latency, bool bandwidth, int repeats,
                                const std::vector<std::string>& sizes) {
  const auto wanted = [&](uint64_t bytes) {
    if (sizes.empty()) return true;
    const std::string name = bytes >= GiB   ? std::to_string(bytes / GiB) + "G"
                             : bytes >= MiB ? std::to_string(bytes / MiB) + "M"
                                            : std::to_string(bytes / KiB) + "K";
    return std::find(sizes.begin(), sizes.end(), name) != sizes.end();
  };
  std::vector<TransportCase> cases;
  if (latency) {
    TransportCase c;
    c.latency = true;
    c.bytes = 8;
    c.iters = quick ? 1000 : 20000;
    c.warmup = c.iters / 10;
    c.repeats = repeats;
    c.has_target = true;
    cases.push_back(c);
  }
  const uint64_t budget = quick ? 16 * MiB : 256 * MiB;
  for (uint64_t bytes : {4 * KiB, 64 * KiB, MiB, 16 * MiB, 256 * MiB, GiB}) {
    if (!bandwidth || (quick && bytes > 16 * MiB)) break;
    if (!wanted(bytes)) continue;
    TransportCase c;
    c.bytes = bytes;
    c.iters = std::clamp<int64_t>(static_cast<int64_t>(budget / bytes), 3, quick ? 2000 : 20000);
    c.warmup = std::max<int64_t>(1, c.iters / 10);
    c.window = static_cast<int>(std::clamp<uint64_t>(64 * MiB / bytes, 2, 16));
    c.repeats = bytes >= 256 * MiB ? std::min(repeats, 3) : repeats;
    c.has_target = bytes >= MiB;
    cases.push_back(c);
  }
  return cases;
}

using Settings = std::map<std::string, std::string>;

// The UCX environment of each --tls choice, for both pairs, with --ucx's settings over it.
// shm: shared memory for the data (UCX prefers it for every lane it can), plus tcp, through which
// a listener's sockaddr is reached. tcp: TCP alone. Both on the loopback device only: ferry's
// default (EndpointOptions::network_devices), and ucx_perftest would otherwise add the host's
// other interfaces as more TCP rails.
Settings ucx_settings(const std::string& choice, const std::vector<std::string>& extra) {
  Settings out;
  out["UCX_TLS"] = choice == "shm" ? "sm,tcp" : "tcp";
  out["UCX_NET_DEVICES"] = "lo";
  for (const std::string& kv : extra) {
    const size_t eq = kv.find('=');
    FERRY_CHECK(eq != std::string::npos && kv.rfind("UCX_", 0) == 0,
                "expected --ucx UCX_NAME=VALUE, but got ", kv);
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::string settings_text(const Settings& settings) {
  std::string out;
  for (const auto& [key, value] : settings) out += (out.empty() ? "" : " ") + key + "=" + value;
  return out;
}

// One side's results for one transport: ferry's pair or ucx_perftest's.
struct Side {
  std::vector<std::optional<double>> values;  // per case: us (latency) or MB/s; none if failed
  std::vector<std::optional<double>> p50;     // per latency case: the median's half, us
  std::string transports;                     // the UCX transports it used
  std::string version;                        // UCX's (ucx_perftest says)
  std::string error;                          // the first failure
};

double g_start_ms = 0;  // when the run began, for the progress lines

void report(const std::string& tls, const char* who, const TransportCase& c, double value,
            double p50, double p99, int64_t iters) {
  std::fprintf(stderr, "bench-transport: %6.1fs [%s] %-12s %-18s %10.2f %-4s",
               (now_ms() - g_start_ms) / 1000.0, tls.c_str(), who, case_name(c).c_str(), value,
               c.latency ? "us" : "MB/s");
  if (c.latency) std::fprintf(stderr, " (median %.2f us)", p50);
  if (c.latency && p99 > 0) std::fprintf(stderr, " (99th percentile %.2f us)", p99);
  std::fprintf(stderr, " (%lld iterations)\n", static_cast<long long>(iters));
}

// ferry's pair on the cases (a failure leaves the remaining ones without figures).
Side run_ferry(const std::vector<TransportCase>& cases, const std::string& tls,
               const TransportBenchOptions& o) {
  Side out;
  out.values.resize(cases.size());
  out.p50.resize(cases.size());
  try {
    out.transports =
        run_ferry_pair(cases, ucx_settings(tls, o.ucx), o, [&](size_t i, const PairFigures& f) {
          out.values[i] = f.value;
          if (cases[i].latency) out.p50[i] = f.p50;
          report(tls, "ferry", cases[i], f.value, f.p50, f.p99, f.iters);
        });
  } catch (const Error& e) {
    out.error = e.what();
    std::fprintf(stderr, "bench-transport: [%s] ferry failed: %s\n", tls.c_str(), e.what());
  }
  return out;
}

// ucx_perftest on the same cases, c.repeats runs each (median); after a failure, none of the
// remaining cases (each could take until the timeout).
Side run_baseline(const std::vector<TransportCase>& cases, const std::string& tls,
                  const std::string& perftest, const TransportBenchOptions& o) {
  Side out;
  out.values.resize(cases.size());
  out.p50.resize(cases.size());
  if (perftest.empty()) {
    out.error = o.perftest + " not found (Debian's ucx-utils has it)";
    return out;
  }
  for (size_t i = 0; i < cases.size() && out.error.empty(); ++i) {  // none after a failure
    const TransportCase& c = cases[i];
    PerftestCase pc;
    pc.test = c.latency ? "tag_lat" : "tag_bw";
    pc.bytes = c.bytes;
    pc.iters = c.iters;
    pc.warmup = c.warmup;
    pc.window = c.window;
    try {
      std::vector<double> samples, p50s;
      for (int r = 0; r < c.repeats; ++r) {
        const PerftestResult pr = run_perftest(perftest, pc, ucx_settings(tls, o.ucx),
                                               o.perftest_args, std::chrono::seconds(o.timeout_s));
        samples.push_back(pr.value);
        p50s.push_back(pr.p50);
        if (out.transports.empty()) out.transports = pr.transports;
        if (out.version.empty()) out.version = pr.version;
      }
      out.values[i] = median(samples);
      if (c.latency) out.p50[i] = median(p50s);
      report(tls, "ucx_perftest", c, median(samples), median(p50s), 0, c.iters);
    } catch (const Error& e) {
      if (out.error.empty()) out.error = e.what();
      std::fprintf(stderr, "bench-transport: [%s] ucx_perftest %s failed: %s\n", tls.c_str(),
                   case_name(c).c_str(), e.what());
    }
  }
  return out;
}

// Prints one transport's table; returns whether every target was met.
bool print_table(const std::string& tls, const std::vector<TransportCase>& cases, const Side& ferry,
                 const Side& base, const TransportBenchOptions& o) {
  std::printf("\n%s: %s%s\n", tls.c_str(), settings_text(ucx_settings(tls, o.ucx)).c_str(),
              base.version.empty() ? "" : (", UCX " + base.version).c_str());
  std::printf("  ferry's connection (ucp_ep_print_info):\n%s",
              ferry.transports.empty() ? "      (unknown)\n" : ferry.transports.c_str());
  std::printf("  ucx_perftest%s%s's endpoint: %s\n", o.perftest_args.empty() ? "" : " ",
              o.perftest_args.c_str(),
              base.transports.empty() ? "(unknown)" : base.transports.c_str());
  std::printf("  %-24s %14s %14s %8s %9s  %s\n", "case", "ferry", "ucx_perftest", "ratio", "target",
              "");
  bool met = true;
  // One row; `target` < 0: none (latency: at most target x, bandwidth: at least target x).
  auto row = [&](const std::string& name, const std::optional<double>& mine,
                 const std::optional<double>& theirs, const char* unit, bool latency,
                 double target) {
    char mine_text[32] = "failed", theirs_text[32] = "failed", ratio_text[16] = "-",
         target_text[16] = "-";
    if (mine) std::snprintf(mine_text, sizeof mine_text, "%.2f %s", *mine, unit);
    if (theirs) std::snprintf(theirs_text, sizeof theirs_text, "%.2f %s", *theirs, unit);
    if (target > 0) {
      std::snprintf(target_text, sizeof target_text, "%s %.1fx", latency ? "<=" : ">=", target);
    }
    std::string verdict = target > 0 ? "missed (no figure)" : "-";
    if (mine && theirs) {
      const double ratio = *mine / *theirs;
      std::snprintf(ratio_text, sizeof ratio_text, "%.2fx", ratio);
      if (target > 0) verdict = (latency ? ratio <= target : ratio >= target) ? "met" : "MISSED";
    }
    if (target > 0 && verdict != "met") met = false;
    std::printf("  %-24s %14s %14s %8s %9s  %s\n", name.c_str(), mine_text, theirs_text, ratio_text,
                target_text, verdict.c_str());
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const TransportCase& c = cases[i];
    if (c.latency) {
      // Judged on the median: a mean over microsecond round trips moves with every hiccup of a
      // shared machine.
      row(case_name(c) + ", median", ferry.p50[i], base.p50[i], "us", true, 1.5);
      row(case_name(c) + ", mean", ferry.values[i], base.values[i], "us", true, -1);
    } else {
      row(case_name(c), ferry.values[i], base.values[i], "MB/s", false, c.has_target ? 0.9 : -1);
    }
  }
  if (!ferry.error.empty()) std::printf("  ferry failed: %s\n", ferry.error.c_str());
  if (!base.error.empty()) std::printf("  ucx_perftest failed: %s\n", base.error.c_str());
  std::fflush(stdout);
  return met;
}

}  // namespace

int run(const TransportBenchOptions& o) {
  FERRY_CHECK(o.repeat >= 1, "expected --repeat >= 1, but got ", o.repeat);
  FERRY_CHECK(o.timeout_s >= 1, "expected --timeout >= 1, but got ", o.timeout_s);
  const auto wants = [&](const char* what) {
    return std::find(o.cases.begin(), o.cases.end(), what) != o.cases.end();
  };
  const int repeats = o.quick ? std::min(o.repeat, 3) : o.repeat;
  const std::vector<TransportCase> cases =
      plan(o.quick, wants("latency"), wants("bandwidth"), repeats, o.sizes);
  const std::string perftest = find_executable(o.perftest);
  std::printf(
      "ferry bench-transport: two processes on %s (%u CPUs), %d repeats (median; at most 3 "
      "from 256 MiB)%s\n",
      cpu_model_name().c_str(), std::thread::hardware_concurrency(), repeats,
      o.quick ? ", quick" : "");
  std::printf(
      "  latency: half the round trip of an 8-byte tensor (2 x float32), as tag_lat; bandwidth: "
      "one way, a window\n  of sends in flight, received into %d preallocated tensor%s, as tag_bw; "
      "MB/s = 2^20 bytes/s\n",
      o.recv_buffers, o.recv_buffers == 1 ? "" : "s");
  std::fflush(stdout);
  g_start_ms = now_ms();
  bool all_met = true, ferry_failed = false;
  for (const std::string& tls : o.tls) {
    const Side ferry = run_ferry(cases, tls, o);
    ferry_failed = ferry_failed || !ferry.error.empty();
    // ucx_perftest after ferry's pair has exited: never both pairs on the two cores at once.
    const Side base = run_baseline(cases, tls, perftest, o);
    all_met = print_table(tls, cases, ferry, base, o) && all_met;
  }
  if (!all_met) {
    std::printf("\ntargets: %s\n", o.quick ? "missed (--quick: not judged)" : "MISSED");
  } else {
    std::printf("\ntargets: met\n");
  }
  // A failure of ferry's pair fails even --quick (the smoke test); a missing baseline does not.
  return ferry_failed || (!all_met && !o.quick) ? 1 : 0;
}

}  // namespace transport_bench

int run_transport_bench(const TransportBenchOptions& options) {
  return transport_bench::run(options);
}

}  // namespace ferry::bench

#endif  // FERRY_WITH_TRANSPORT
