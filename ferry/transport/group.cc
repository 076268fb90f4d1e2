// Group::rendezvous: how the ranks of a job find and connect to each other (see group.h).
#include "ferry/transport/group.h"

#include "ferry/ops/factories.h"

namespace ferry::transport {
namespace {

// Tags of the rendezvous (the top of the tag space, clear of what users pick).
constexpr uint64_t kRankTag = kMaxUserTag;
constexpr uint64_t kPortsTag = kMaxUserTag - 1;

// What a rank says first on a rendezvous connection: [its rank, its listening port].
Tensor hello_of(int rank, uint16_t port) {
  Tensor hello = empty({2}, kInt64);
  hello[0].fill_(int64_t{rank});
  hello[1].fill_(int64_t{port});
  return hello;
}

}  // namespace

PeerId Group::peer(int rank) const {
  auto it = peers_.find(rank);
  FERRY_CHECK_AS(TransportError, it != peers_.end(), "transport: expected a rank of the group ",
                 "other than ", rank_, " (0..", size_ - 1, "), got ", rank);
  return it->second;
}

Group Group::rendezvous(std::shared_ptr<Endpoint> endpoint, int rank, int size,
                        const std::string& host, uint16_t port) {
  FERRY_CHECK_AS(TransportError, size >= 1 && rank >= 0 && rank < size, "transport: expected ",
                 "0 <= rank < size, got rank ", rank, " of ", size);
  Group group(std::move(endpoint), rank, size);
  Endpoint& ep = *group.endpoint_;
  // Accepts the next rank, which must be a new one above this rank; returns its hello.
  auto accept_rank = [&]() {
    const PeerId p = ep.accept();
    const Tensor hello = ep.recv(p, kRankTag).get();
    const int64_t other = hello[0].item<int64_t>();
    FERRY_CHECK_AS(TransportError, other > rank && other < size && !group.peers_.count(int(other)),
                   "transport: rendezvous expected a new rank in ", rank + 1, "..", size - 1,
                   " from ", ep.peer_name(p), ", got ", other);
    group.peers_[int(other)] = p;
    return hello;
  };
  if (rank == 0) {
    if (!ep.listening_port()) ep.listen(host, port);
    Tensor ports = zeros({size}, kInt64);
    for (int i = 1; i < size; ++i) {
      const Tensor hello = accept_rank();
      ports[hello[0].item<int64_t>()].fill_(hello[1].item<int64_t>());
    }
    std::vector<Future<void>> sends;
    for (auto [other, p] : group.peers_) sends.push_back(ep.send(ports, p, kPortsTag));
    for (auto& s : sends) s.wait();
    return group;
  }
  const PeerId root = ep.connect(host, port);
  group.peers_[0] = root;
  const uint16_t own = ep.listen(host, 0);
  ep.send(hello_of(rank, own), root, kRankTag).wait();
  const Tensor ports = ep.recv(root, kPortsTag).get();
  for (int other = 1; other < rank; ++other) {
    const PeerId p = ep.connect(host, uint16_t(ports[other].item<int64_t>()));
    ep.send(hello_of(rank, own), p, kRankTag).wait();
    group.peers_[other] = p;
  }
  for (int i = rank + 1; i < size; ++i) accept_rank();
  return group;
}

}  // namespace ferry::transport
