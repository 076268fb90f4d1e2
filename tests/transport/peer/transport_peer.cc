// The other process of the transport's multi-process tests (tests/transport/multiprocess_test.cc
// starts it): a small program that connects to the test's endpoint and plays one scenario.
// Secret from FERRY_TRANSPORT_SECRET, transports from UCX_TLS, both set by the test. Exits 0 when
// the scenario finished, 1 with a message on stderr otherwise; every wait is bounded.
//   transport_peer echo PORT COUNT DEVICE   receive COUNT tensors (tags 0..COUNT-1) onto DEVICE
//                                           and send each back under the same tag
//   transport_peer mesh PORT RANK WORLD     connect to the test (rank 0), learn the other
//                                           ranks' ports, exchange a tensor with each, report
//   transport_peer idle PORT                connect and wait to be killed
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "ferry/ferry.h"
#include "ferry/transport/endpoint.h"

namespace {

using namespace ferry;
using namespace ferry::transport;
using namespace std::chrono_literals;

EndpointOptions peer_options(const std::string& name) {
  EndpointOptions o;
  o.name = name;
  o.timeout = 30s;
  return o;
}

// What rank `from` sends rank `to` in the mesh: distinct per pair, checkable by the receiver.
Tensor mesh_tensor(int64_t from, int64_t to) {
  return arange(1000 + 37 * from + to, kFloat64).mul(double(from + 1)).add(double(to));
}

int echo(uint16_t port, int count, const std::string& device) {
  Endpoint endpoint(peer_options("echo-peer"));
  const PeerId test = endpoint.connect("127.0.0.1", port);
  for (int i = 0; i < count; ++i) {
    const Tensor got = endpoint.recv(test, uint64_t(i), TensorOptions(Device(device))).get();
    if (got.device() != Device(device)) throw Error("received on the wrong device");
    endpoint.send(got, test, uint64_t(i)).wait();
  }
  return 0;
}

int mesh(uint16_t port, int64_t rank, int64_t world) {
  Endpoint endpoint(peer_options("rank" + std::to_string(rank)));
  const PeerId test = endpoint.connect("127.0.0.1", port);
  const uint16_t own_port = endpoint.listen();
  endpoint.send(full({1}, Scalar(int64_t{own_port}), kInt64), test, 0).wait();
  const Tensor ports = endpoint.recv(test, 0).get();  // [world]: every rank's port
  // Ranks connect to the ranks below them (except the test, already connected) and accept
  // the ranks above; each connector names its rank first.
  std::map<int64_t, PeerId> peers;
  for (int64_t other = 1; other < rank; ++other) {
    const PeerId p = endpoint.connect("127.0.0.1", uint16_t(ports[other].item<int64_t>()));
    endpoint.send(full({1}, Scalar(rank), kInt64), p, 1).wait();
    peers[other] = p;
  }
  for (int64_t other = rank + 1; other < world; ++other) {
    const PeerId p = endpoint.accept();
    peers[endpoint.recv(p, 1).get().item<int64_t>()] = p;
  }
  std::vector<Future<void>> sends;
  for (auto [other, p] : peers) sends.push_back(endpoint.send(mesh_tensor(rank, other), p, 2));
  int64_t good = 0;
  for (auto [other, p] : peers) {
    const Tensor got = endpoint.recv(p, 2).get();
    const Tensor want = mesh_tensor(other, rank);
    if (got.sizes() == want.sizes() && got.sub(want).abs().sum().item<double>() == 0.0) ++good;
  }
  for (auto& s : sends) s.wait();
  Tensor report = empty({2}, kInt64);
  report[0].fill_(rank);
  report[1].fill_(good);
  endpoint.send(report, test, 1).wait();
  endpoint.recv(test, 3).get();  // the test's go-ahead to leave, once every rank reported
  return 0;
}

int idle(uint16_t port) {
  Endpoint endpoint(peer_options("idle-peer"));
  endpoint.connect("127.0.0.1", port);
  std::this_thread::sleep_for(60s);  // the test kills us long before
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string scenario = argc > 1 ? argv[1] : "";
    if (scenario == "echo" && argc == 5)
      return echo(uint16_t(std::stoi(argv[2])), std::stoi(argv[3]), argv[4]);
    if (scenario == "mesh" && argc == 5)
      return mesh(uint16_t(std::stoi(argv[2])), std::stoll(argv[3]), std::stoll(argv[4]));
    if (scenario == "idle" && argc == 3) return idle(uint16_t(std::stoi(argv[2])));
    std::fprintf(
        stderr,
        "usage: transport_peer echo PORT COUNT DEVICE | mesh PORT RANK WORLD | idle PORT\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "transport_peer: %s\n", e.what());
    return 1;
  }
}
