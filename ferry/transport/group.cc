// Group::rendezvous: how the ranks of a job find and connect to each other (see group.h).
#include "ferry/transport/group.h"

#include <cstring>

#include "ferry/ops/factories.h"

namespace ferry::transport {
namespace {

// Tags of the rendezvous (the top of the tag space, clear of what users pick).
constexpr uint64_t kRankTag = kMaxUserTag;
constexpr uint64_t kPortsTag = kMaxUserTag - 1;
constexpr uint64_t kHostTag = kMaxUserTag - 2;
constexpr uint64_t kHostsTag = kMaxUserTag - 3;
constexpr size_t kMaxHostBytes = 255;

Tensor text_tensor(const std::string& text) {
  Tensor t = empty({static_cast<int64_t>(text.size())}, kUInt8);
  if (!text.empty()) std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

std::string text_of(const Tensor& t, size_t max_bytes, const std::string& what) {
  FERRY_CHECK_AS(
      TransportError,
      t.scalar_type() == kUInt8 && t.dim() == 1 && static_cast<size_t>(t.numel()) <= max_bytes,
      "transport: rendezvous expected ", what, " as at most ", max_bytes, " bytes of text, got ",
      dtype_name(t.scalar_type()), " ", t.sizes());
  const Tensor dense = t.contiguous();
  return std::string(static_cast<const char*>(dense.data_ptr()), static_cast<size_t>(t.numel()));
}

void check_host(const std::string& host, const std::string& what) {
  FERRY_CHECK_AS(
      TransportError,
      !host.empty() && host.size() <= kMaxHostBytes && host.find('\n') == std::string::npos,
      "transport: rendezvous expected ", what, " of 1 to ", kMaxHostBytes,
      " bytes without a newline, got \"", host, "\"");
}

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
                        const std::string& host, uint16_t port, const std::string& self_host) {
  FERRY_CHECK_AS(TransportError, size >= 1 && rank >= 0 && rank < size, "transport: expected ",
                 "0 <= rank < size, got rank ", rank, " of ", size);
  const std::string own_host = self_host.empty() ? host : self_host;
  check_host(own_host, "this rank's host");
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
    std::vector<std::string> hosts(static_cast<size_t>(size), host);
    for (int i = 1; i < size; ++i) {
      const Tensor hello = accept_rank();
      const int64_t other = hello[0].item<int64_t>();
      ports[other].fill_(hello[1].item<int64_t>());
      const PeerId p = group.peers_.at(int(other));
      hosts[static_cast<size_t>(other)] =
          text_of(ep.recv(p, kHostTag).get(), kMaxHostBytes, "rank's host");
      check_host(hosts[static_cast<size_t>(other)], "rank " + std::to_string(other) + "'s host");
    }
    std::string table;
    for (const std::string& h : hosts) table += h + "\n";
    const Tensor hosts_tensor = text_tensor(table);
    std::vector<Future<void>> sends;
    for (auto [other, p] : group.peers_) {
      sends.push_back(ep.send(ports, p, kPortsTag));
      sends.push_back(ep.send(hosts_tensor, p, kHostsTag));
    }
    for (auto& s : sends) s.wait();
    return group;
  }
  const PeerId root = ep.connect(host, port);
  group.peers_[0] = root;
  const uint16_t own = ep.listen(own_host, 0);
  ep.send(hello_of(rank, own), root, kRankTag).wait();
  ep.send(text_tensor(own_host), root, kHostTag).wait();
  const Tensor ports = ep.recv(root, kPortsTag).get();
  const std::string table =
      text_of(ep.recv(root, kHostsTag).get(), (kMaxHostBytes + 1) * size_t(size), "the hosts");
  std::vector<std::string> hosts;
  for (size_t at = 0, end; (end = table.find('\n', at)) != std::string::npos; at = end + 1) {
    hosts.push_back(table.substr(at, end - at));
  }
  FERRY_CHECK_AS(TransportError, ports.numel() == size && static_cast<int>(hosts.size()) == size,
                 "transport: rendezvous expected the ports and hosts of ", size, " ranks from ",
                 "rank 0, got ", ports.numel(), " ports and ", hosts.size(), " hosts");
  for (int other = 1; other < rank; ++other) {
    const PeerId p =
        ep.connect(hosts[static_cast<size_t>(other)], uint16_t(ports[other].item<int64_t>()));
    ep.send(hello_of(rank, own), p, kRankTag).wait();
    group.peers_[other] = p;
  }
  for (int i = rank + 1; i < size; ++i) accept_rank();
  return group;
}

}  // namespace ferry::transport
