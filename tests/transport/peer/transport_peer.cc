// The other process of the transport's multi-process tests (tests/transport/multiprocess_test.cc
// starts it): a small program that connects to the test's endpoint and plays one scenario.
// Secret from FERRY_TRANSPORT_SECRET, transports from UCX_TLS, both set by the test. Exits 0 when
// the scenario finished, 1 with a message on stderr otherwise; every wait is bounded.
//   transport_peer echo PORT COUNT DEVICE   receive COUNT tensors (tags 0..COUNT-1) onto DEVICE
//                                           and send each back under the same tag
//   transport_peer mesh PORT RANK WORLD     join the test's group (it is rank 0) with
//                                           Group::rendezvous, exchange a tensor with every
//                                           rank, report to rank 0
//   transport_peer idle PORT                connect and wait to be killed
//   transport_peer gpipe PORT SEED MODE     rank 1 of the two-process GPipe test
//   transport_peer net-server HOST PORT COUNT       echo COUNT tensors to the first client
//   transport_peer net-client HOST PORT COUNT SEED  send COUNT random tensors, check the echoes
//   transport_peer net-mesh HOST PORT RANK WORLD SELF_HOST
//                                           rank RANK of a group whose rank 0 listens at
//                                           HOST:PORT, this rank at SELF_HOST: exchange a tensor
//                                           with every rank, then leave together
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "ferry/ferry.h"
#include "ferry/pipeline/pipeline.h"
#include "ferry/transport/endpoint.h"
#include "ferry/transport/group.h"
#include "tests/transport/peer/gpipe_case.h"
#include "tests/transport/peer/mesh.h"

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

// Receives `count` tensors (tags 0..count-1) onto `device` and sends each back.
void echo_loop(Endpoint& endpoint, PeerId peer, int count, const std::string& device) {
  for (int i = 0; i < count; ++i) {
    const Tensor got = endpoint.recv(peer, uint64_t(i), TensorOptions(Device(device))).get();
    if (got.device() != Device(device)) throw Error("received on the wrong device");
    endpoint.send(got, peer, uint64_t(i)).wait();
  }
}

int echo(uint16_t port, int count, const std::string& device) {
  Endpoint endpoint(peer_options("echo-peer"));
  echo_loop(endpoint, endpoint.connect("127.0.0.1", port), count, device);
  return 0;
}

// The two ends of the network-namespace test: a server that echoes, and a client that sends
// random tensors and checks what comes back bit for bit.
int net_server(const std::string& host, uint16_t port, int count) {
  Endpoint endpoint(peer_options("net-server"));
  endpoint.listen(host, port);
  echo_loop(endpoint, endpoint.accept(), count, "cpu");
  return 0;
}

int net_mesh(const std::string& host, uint16_t port, int rank, int world,
             const std::string& self_host) {
  auto endpoint = std::make_shared<Endpoint>(peer_options("rank" + std::to_string(rank)));
  if (rank == 0) endpoint->listen(host, port);
  const Group group = Group::rendezvous(endpoint, rank, world, host, port, self_host);
  std::vector<Future<void>> sends;
  for (int other = 0; other < world; ++other) {
    if (other != rank)
      sends.push_back(endpoint->send(testing::mesh_tensor(rank, other), group.peer(other), 2));
  }
  for (int other = 0; other < world; ++other) {
    if (other == rank) continue;
    const Tensor got = endpoint->recv(group.peer(other), 2).get();
    const Tensor want = testing::mesh_tensor(other, rank);
    if (got.sizes() != want.sizes() || got.sub(want).abs().sum().item<double>() != 0.0) {
      std::fprintf(stderr, "transport_peer: rank %d got a wrong tensor from rank %d\n", rank,
                   other);
      return 1;
    }
  }
  for (auto& s : sends) s.wait();
  // Leave together: every rank tells rank 0 it is done, rank 0 lets them go.
  if (rank == 0) {
    for (int other = 1; other < world; ++other) endpoint->recv(group.peer(other), 3).get();
    for (int other = 1; other < world; ++other)
      endpoint->send(zeros({1}), group.peer(other), 4).wait();
  } else {
    endpoint->send(zeros({1}), group.peer(0), 3).wait();
    endpoint->recv(group.peer(0), 4).get();
  }
  std::printf("rank %d of %d at %s exchanged with every rank\n", rank, world, self_host.c_str());
  return 0;
}

int net_client(const std::string& host, uint16_t port, int count, uint64_t seed) {
  Endpoint endpoint(peer_options("net-client"));
  // The server may still be starting in its namespace: retry the connection for a while.
  PeerId server = 0;
  for (int attempt = 0;; ++attempt) {
    try {
      server = endpoint.connect(host, port);
      break;
    } catch (const TransportError&) {
      if (attempt == 100) throw;
      std::this_thread::sleep_for(100ms);
    }
  }
  Generator gen(seed);
  for (int i = 0; i < count; ++i) {
    Tensor t =
        randn({1 + i * 37, 1 + i * 911}, kFloat32, &gen).to(i % 2 == 0 ? kFloat32 : kBFloat16);
    if (i % 3 == 2) t = t.t();
    endpoint.send(t, server, uint64_t(i)).wait();
    const Tensor back = endpoint.recv(server, uint64_t(i)).get();
    if (back.sizes() != t.sizes() || back.scalar_type() != t.scalar_type() ||
        back.to(kFloat64).sub(t.to(kFloat64)).abs().sum().item<double>() != 0.0) {
      std::fprintf(stderr, "transport_peer: tensor %d came back different\n", i);
      return 1;
    }
    // While the server is still there (it leaves after the last echo).
    if (i == 0) std::printf("%s\n", endpoint.describe(server).c_str());
  }
  return 0;
}

int mesh(uint16_t port, int rank, int world) {
  auto endpoint = std::make_shared<Endpoint>(peer_options("rank" + std::to_string(rank)));
  const Group group = Group::rendezvous(endpoint, rank, world, "127.0.0.1", port);
  std::vector<Future<void>> sends;
  for (int other = 0; other < world; ++other) {
    if (other != rank)
      sends.push_back(endpoint->send(testing::mesh_tensor(rank, other), group.peer(other), 2));
  }
  int64_t good = 0;
  for (int other = 0; other < world; ++other) {
    if (other == rank) continue;
    const Tensor got = endpoint->recv(group.peer(other), 2).get();
    const Tensor want = testing::mesh_tensor(other, rank);
    if (got.sizes() == want.sizes() && got.sub(want).abs().sum().item<double>() == 0.0) ++good;
  }
  for (auto& s : sends) s.wait();
  Tensor report = empty({2}, kInt64);
  report[0].fill_(int64_t{rank});
  report[1].fill_(good);
  endpoint->send(report, group.peer(0), 1).wait();
  endpoint->recv(group.peer(0), 3).get();  // the test's go-ahead to leave, once every rank reported
  return 0;
}

// Rank 1 of the GPipe test: the last partition; computes the loss, runs the backward, sends
// the loss and its parameters' gradients to rank 0 (tags 100, 101, ...).
int gpipe(uint16_t port, uint64_t seed, const std::string& checkpoint) {
  auto endpoint = std::make_shared<Endpoint>(peer_options("gpipe-rank1"));
  auto group = std::make_shared<Group>(Group::rendezvous(endpoint, 1, 2, "127.0.0.1", port));
  nn::Sequential model = testing::gpipe_case_model(seed);
  pipeline::GPipe pipe(model, testing::kGPipeCaseBalance, testing::kGPipeCasePlacements,
                       testing::kGPipeCaseChunks, group, checkpoint);
  Tensor total_loss = zeros({});
  for (int step = 0; step < testing::kGPipeCaseSteps; ++step) {
    const auto [x, target] = testing::gpipe_case_data(seed, step);
    const Tensor y = pipe.forward(Tensor());  // the input comes from rank 0
    const Tensor loss = mse_loss(y, target.to(y.device()));
    loss.backward();
    total_loss = total_loss.add(loss.detach().to(kCPU));
  }
  endpoint->send(total_loss, group->peer(0), 100).wait();
  uint64_t tag = 101;
  for (const Tensor& p : pipe.parameters()) endpoint->send(p.grad(), group->peer(0), tag++).wait();
  endpoint->recv(group->peer(0), 99).get();  // rank 0 has everything: leave
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
    if (scenario == "net-mesh" && argc == 7)
      return net_mesh(argv[2], uint16_t(std::stoi(argv[3])), std::stoi(argv[4]), std::stoi(argv[5]),
                      argv[6]);
    if (scenario == "mesh" && argc == 5)
      return mesh(uint16_t(std::stoi(argv[2])), std::stoi(argv[3]), std::stoi(argv[4]));
    if (scenario == "idle" && argc == 3) return idle(uint16_t(std::stoi(argv[2])));
    if (scenario == "net-server" && argc == 5) {
      return net_server(argv[2], uint16_t(std::stoi(argv[3])), std::stoi(argv[4]));
    }
    if (scenario == "net-client" && argc == 6) {
      return net_client(argv[2], uint16_t(std::stoi(argv[3])), std::stoi(argv[4]),
                        std::stoull(argv[5]));
    }
    if (scenario == "gpipe" && argc == 5) {
      return gpipe(uint16_t(std::stoi(argv[2])), std::stoull(argv[3]), argv[4]);
    }
    std::fprintf(
        stderr,
        "usage: transport_peer echo PORT COUNT DEVICE | mesh PORT RANK WORLD | idle PORT | "
        "net-mesh HOST PORT RANK WORLD SELF_HOST | "
        "gpipe PORT SEED MODE | net-server HOST PORT COUNT | net-client HOST PORT COUNT SEED\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "transport_peer: %s\n", e.what());
    return 1;
  }
}
