// transport::Group: the processes of one job (ranks 0..size-1) and a connection between every two
// of them, over one Endpoint, as the pipeline across processes uses it. Rank 0 listens at an
// address every rank knows; the others connect to it, learn each other's listening addresses
// through it and connect among themselves (each rank to the ranks below it).
// Guarantees: rendezvous returns only when every rank is connected to every other and
// authenticated; it is bounded by the endpoint's timeout per step and raises TransportError
// naming the step and the rank otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ferry/transport/endpoint.h"

namespace ferry::transport {

class Group {
 public:
  // Connects rank `rank` of `size` ranks; rank 0 listens on host:port (unless its endpoint
  // already listens), the others reach it there. Ranks above 0 listen on a free port of
  // `self_host` (default: `host`, one machine) for the ranks above them, which learn that address
  // through rank 0: across machines, each rank names an address of its own host that the others
  // can reach.
  static Group rendezvous(std::shared_ptr<Endpoint> endpoint, int rank, int size,
                          const std::string& host, uint16_t port,
                          const std::string& self_host = "");

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The connection to another rank (TransportError for this rank or one out of range).
  PeerId peer(int rank) const;
  Endpoint& endpoint() const { return *endpoint_; }
  const std::shared_ptr<Endpoint>& shared_endpoint() const { return endpoint_; }

 private:
  Group(std::shared_ptr<Endpoint> endpoint, int rank, int size)
      : endpoint_(std::move(endpoint)), rank_(rank), size_(size) {}
  std::shared_ptr<Endpoint> endpoint_;
  int rank_ = 0;
  int size_ = 1;
  std::map<int, PeerId> peers_;
};

}  // namespace ferry::transport
