// ferry's side of `ferry bench-transport` (see transport_pair.h): this process sends the pings
// and the bandwidth stream and times them; the peer it starts echoes pings, receives the stream
// into preallocated tensors and acknowledges the end of every timed block. The peer learns each
// case from a command tensor; its command line says where to connect and how to wait.
#if defined(FERRY_WITH_TRANSPORT)

#include "bench/transport_pair.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <random>
#include <sstream>

#include "bench/timing.h"
#include "bench/transport_perftest.h"
#include "ferry/core/error.h"
#include "ferry/ops/factories.h"
#include "ferry/transport/endpoint.h"

namespace ferry::bench {
namespace transport_pair {  // named: the tool is a unity build
namespace {

using transport::Endpoint;
using transport::EndpointOptions;
using transport::Future;
using transport::PeerId;

constexpr uint64_t kCommandTag = 1, kPingTag = 2, kDataTag = 3, kAckTag = 4;
constexpr double kMiB = 1024.0 * 1024.0;

// What the peer does next, sent as an int64 tensor of kCommandLength: `blocks` blocks of `block`
// round trips (kPingPong), or of `block` messages of `bytes` with `window` receives posted ahead,
// each block acknowledged (kStream).
enum Command : int64_t { kQuit = 0, kPingPong = 1, kStream = 2 };
constexpr int64_t kCommandLength = 5;
struct PeerCommand {
  int64_t what = kQuit, bytes = 0, block = 0, blocks = 0, window = 1;
};

Tensor encode(const PeerCommand& c) {
  Tensor t = empty({kCommandLength}, TensorOptions(kInt64));
  int64_t* p = t.data_ptr<int64_t>();
  p[0] = c.what;
  p[1] = c.bytes;
  p[2] = c.block;
  p[3] = c.blocks;
  p[4] = c.window;
  return t;
}

PeerCommand decode(const Tensor& t) {
  const int64_t* p = t.data_ptr<int64_t>();
  return {p[0], p[1], p[2], p[3], p[4]};
}

// The transports of a connection, from ucp_ep_print_info: its lanes and the tag protocol ranges.
std::string summarize_description(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("lane[") == std::string::npos && line.find("tag_send") == std::string::npos) {
      continue;
    }
    const size_t start = line.find_first_not_of("# \t");
    if (start == std::string::npos) continue;
    std::string s = line.substr(start);
    // Collapse runs of spaces.
    std::string compact;
    for (char ch : s) {
      if (ch != ' ' || compact.empty() || compact.back() != ' ') compact += ch;
    }
    out += "      " + compact + "\n";
  }
  return out;
}

// --poll: wait for the data path's futures by polling ready() (a busy loop, up to a second)
// before wait(), in both processes; shows what the endpoint's own wait (spin, then sleep on the
// worker's event fd) costs.
bool g_poll = false;

template <typename T>
void settle(const Future<T>& f) {
  if (g_poll) {
    const auto deadline = BenchClock::now() + std::chrono::seconds(1);
    while (!f.ready() && BenchClock::now() < deadline) {
    }
  }
  f.wait();
}

// The q-quantile (0..1) of `v` (reordered), the element at that rank.
double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto at = v.begin() + static_cast<std::ptrdiff_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), at, v.end());
  return *at;
}

// `blocks` timed blocks of `n` round trips of an 8-byte tensor: their times in ms, and into
// `p50_us` and `p99_us` (when given) each block's median and 99th percentile half round trip in
// microseconds.
std::vector<double> ping_pong_blocks(Endpoint& ep, PeerId peer, int64_t n, int blocks,
                                     std::vector<double>* p50_us = nullptr,
                                     std::vector<double>* p99_us = nullptr) {
  ep.send(encode({kPingPong, 8, n, blocks, 1}), peer, kCommandTag).wait();
  const Tensor ping = full({2}, 1.0, TensorOptions(kFloat));
  const Tensor pong = empty({2}, TensorOptions(kFloat));
  std::vector<double> ms, half_us(static_cast<size_t>(n));
  for (int b = 0; b < blocks; ++b) {
    ms.push_back(time_ms([&] {
      // One clock read per round trip (the end of one is the start of the next): a read costs
      // tens of nanoseconds on some VMs, which ucx_perftest's cycle counter does not pay.
      auto t0 = BenchClock::now();
      for (int64_t i = 0; i < n; ++i) {
        // tag_lat's order: send, then post the receive (the reply cannot arrive sooner than a
        // round trip; a reply that did would wait in UCX's unexpected queue).
        settle(ep.send(ping, peer, kPingTag));
        settle(ep.recv(pong, peer, kPingTag));
        const auto t1 = BenchClock::now();
        half_us[static_cast<size_t>(i)] =
            std::chrono::duration<double, std::micro>(t1 - t0).count() / 2.0;
        t0 = t1;
      }
    }));
    if (p50_us != nullptr) p50_us->push_back(median(half_us));
    if (p99_us != nullptr) p99_us->push_back(quantile(half_us, 0.99));
  }
  return ms;
}

// `blocks` timed blocks of `n` sends of `source` with at most `window` in flight, each until the
// peer acknowledged it received them all; their times in ms.
std::vector<double> stream_blocks(Endpoint& ep, PeerId peer, const Tensor& source, int64_t n,
                                  int blocks, int window) {
  ep.send(encode({kStream, source.numel(), n, blocks, window}), peer, kCommandTag).wait();
  const Tensor ack = empty({1}, TensorOptions(kInt64));
  std::vector<double> ms;
  for (int b = 0; b < blocks; ++b) {
    ms.push_back(time_ms([&] {
      const Future<Tensor> done = ep.recv(ack, peer, kAckTag);
      std::deque<Future<void>> in_flight;
      for (int64_t i = 0; i < n; ++i) {
        if (static_cast<int>(in_flight.size()) == window) {
          settle(in_flight.front());
          in_flight.pop_front();
        }
        in_flight.push_back(ep.send(source, peer, kDataTag));
      }
      for (const auto& f : in_flight) settle(f);
      settle(done);
    }));
  }
  return ms;
}

// One case: the warm-up, timed to size the repeats (each about `budget_ms`, at most the plan's
// iterations), then the repeats; the median over the repeats of each figure.
PairFigures measure(Endpoint& ep, PeerId peer, const TransportCase& c, double budget_ms) {
  Tensor source;
  if (!c.latency) source = full({static_cast<int64_t>(c.bytes)}, 1, TensorOptions(kUInt8));
  std::vector<double> p50s, p99s;
  auto run = [&](int64_t n, int blocks, bool timed) {
    return c.latency ? ping_pong_blocks(ep, peer, n, blocks, timed ? &p50s : nullptr,
                                        timed ? &p99s : nullptr)
                     : stream_blocks(ep, peer, source, n, blocks, c.window);
  };
  const double warm_ms = run(c.warmup, 1, false)[0];
  const double per_iter_ms = std::max(warm_ms / static_cast<double>(c.warmup), 1e-6);
  PairFigures f;
  f.iters = std::clamp<int64_t>(static_cast<int64_t>(budget_ms / per_iter_ms),
                                std::min<int64_t>(c.iters, c.latency ? 200 : 3), c.iters);
  const double ms = median(run(f.iters, c.repeats, true));
  const double n = static_cast<double>(f.iters);
  f.value =
      c.latency ? ms * 1000.0 / n / 2.0 : static_cast<double>(c.bytes) * n / kMiB / (ms / 1000.0);
  f.p50 = median(p50s);
  f.p99 = median(p99s);
  return f;
}

// The peer's command line: this executable, with the options it shares with this process.
std::vector<std::string> peer_command(uint16_t port, const TransportBenchOptions& o) {
  std::vector<std::string> args = {this_exe_path(), "bench-transport",
                                   "--peer-of",     "127.0.0.1:" + std::to_string(port),
                                   "--timeout",     std::to_string(o.timeout_s)};
  if (o.poll) args.push_back("--poll");
  args.push_back("--recv-buffers");
  args.push_back(std::to_string(o.recv_buffers));
  return args;
}

void serve_ping_pong(Endpoint& ep, PeerId peer, int64_t total) {
  // As tag_lat's server: receive, echo, and only then post the next receive.
  const Tensor buffer = empty({2}, TensorOptions(kFloat));
  for (int64_t i = 0; i < total; ++i) {
    const Future<Tensor> ping = ep.recv(buffer, peer, kPingTag);
    settle(ping);
    settle(ep.send(ping.get(), peer, kPingTag));
  }
}

// Receives `blocks` blocks of `block` messages of `bytes` into `buffers` (used in turn), with
// `window` receives posted ahead, and acknowledges each block.
void serve_stream(Endpoint& ep, PeerId peer, const PeerCommand& c,
                  const std::vector<Tensor>& buffers) {
  const Tensor ack = zeros({1}, TensorOptions(kInt64));
  const int64_t total = c.block * c.blocks;
  const size_t count = buffers.size();
  std::deque<Future<Tensor>> posted;
  int64_t next = 0;
  auto post = [&] {
    while (next < total && static_cast<int64_t>(posted.size()) < c.window) {
      posted.push_back(ep.recv(buffers[static_cast<size_t>(next) % count], peer, kDataTag));
      ++next;
    }
  };
  post();
  for (int64_t i = 0; i < total; ++i) {
    settle(posted.front());
    posted.pop_front();
    post();
    if ((i + 1) % c.block == 0) settle(ep.send(ack, peer, kAckTag));
  }
}

}  // namespace

std::string run_pair(const std::vector<TransportCase>& cases,
                     const std::map<std::string, std::string>& ucx, const TransportBenchOptions& o,
                     const std::function<void(size_t, const PairFigures&)>& done) {
  const std::string secret = random_secret();
  ScopedEnv env(ucx);  // read by UCX when the endpoint is created
  EndpointOptions eo;
  eo.name = "bench-transport";
  eo.secret = secret;
  eo.timeout = std::chrono::seconds(o.timeout_s);
  Endpoint ep(eo);
  const uint16_t port = ep.listen("127.0.0.1", 0);
  // Declared after the endpoint: on a failure the peer is killed before the endpoint closes.
  std::map<std::string, std::string> child_env = ucx;
  child_env["FERRY_TRANSPORT_SECRET"] = secret;
  ChildProcess child(peer_command(port, o), environment_with(child_env), /*capture=*/false);
  const PeerId peer = ep.accept();
  const std::string description = summarize_description(ep.describe(peer));
  for (size_t i = 0; i < cases.size(); ++i) {
    done(i, measure(ep, peer, cases[i], o.quick ? 50.0 : 500.0));
  }
  ep.send(encode({kQuit}), peer, kCommandTag).wait();
  ChildProcess::wait_all({&child}, BenchClock::now() + std::chrono::seconds(o.timeout_s),
                         "the bench-transport peer");
  FERRY_CHECK(child.exit_status() == 0, "bench-transport: the peer process exited with status ",
              child.exit_status());
  return description;
}

int run_peer(const std::string& host_port, const TransportBenchOptions& o) {
  g_poll = o.poll;
  const size_t colon = host_port.rfind(':');
  FERRY_CHECK(colon != std::string::npos, "bench-transport: expected --peer-of HOST:PORT, got ",
              host_port);
  EndpointOptions eo;
  eo.name = "bench-transport-peer";
  eo.timeout = std::chrono::seconds(o.timeout_s);
  Endpoint ep(eo);  // the secret comes from FERRY_TRANSPORT_SECRET
  const PeerId peer = ep.connect(host_port.substr(0, colon),
                                 static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  const Tensor command = empty({kCommandLength}, TensorOptions(kInt64));
  // The stream's destinations, kept while the size stays: --recv-buffers distinct tensors (at
  // most one per receive in flight); 1 by default, as ucx_perftest's receiver has one buffer.
  std::vector<Tensor> buffers;
  while (true) {
    ep.recv(command, peer, kCommandTag).wait();
    const PeerCommand c = decode(command);
    if (c.what == kQuit) return 0;
    if (c.what == kPingPong) {
      serve_ping_pong(ep, peer, c.block * c.blocks);
      continue;
    }
    const int64_t count = std::clamp<int64_t>(o.recv_buffers, 1, c.window);
    if (buffers.empty() || buffers[0].numel() != c.bytes) buffers.clear();
    if (static_cast<int64_t>(buffers.size()) > count) buffers.resize(static_cast<size_t>(count));
    while (static_cast<int64_t>(buffers.size()) < count) {
      buffers.push_back(zeros({c.bytes}, TensorOptions(kUInt8)));
    }
    serve_stream(ep, peer, c, buffers);
  }
}

}  // namespace transport_pair

std::string run_ferry_pair(const std::vector<TransportCase>& cases,
                           const std::map<std::string, std::string>& ucx,
                           const TransportBenchOptions& options,
                           const std::function<void(size_t, const PairFigures&)>& done) {
  return transport_pair::run_pair(cases, ucx, options, done);
}

int run_transport_bench_peer(const std::string& host_port, const TransportBenchOptions& options) {
  return transport_pair::run_peer(host_port, options);
}

}  // namespace ferry::bench

#endif  // FERRY_WITH_TRANSPORT
