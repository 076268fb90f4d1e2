// ferry::transport::Endpoint's public calls (see endpoint.h); the work is in endpoint_state.cc,
// connections.cc and tensor_io.cc.
#include "ferry/transport/endpoint.h"

#include "ferry/transport/endpoint_state.h"

namespace ferry::transport {
namespace detail {
std::shared_ptr<Operation> start_send(EndpointState& state, const Tensor& tensor, PeerId peer,
                                      uint64_t tag);
std::shared_ptr<Operation> start_recv(EndpointState& state, std::optional<Tensor> into,
                                      TensorOptions options, PeerId peer, uint64_t tag);
}  // namespace detail

Endpoint::Endpoint(EndpointOptions options)
    : state_(std::make_shared<detail::EndpointState>(std::move(options))) {}

Endpoint::~Endpoint() { state_->shutdown(); }

uint16_t Endpoint::listen(const std::string& host, uint16_t port) {
  return state_->listen(host, port);
}
PeerId Endpoint::accept() {
  const std::optional<PeerId> peer = state_->accept(state_->options.timeout);
  FERRY_CHECK_AS(TransportError, peer.has_value(), "transport: no peer connected and ",
                 "authenticated within ", state_->options.timeout.count(), " ms");
  return *peer;
}
std::optional<PeerId> Endpoint::accept(std::chrono::milliseconds timeout) {
  return state_->accept(timeout);
}
std::optional<uint16_t> Endpoint::listening_port() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->listening_port;
}
PeerId Endpoint::connect(const std::string& host, uint16_t port) {
  return state_->connect(host, port);
}

RegistrationStats Endpoint::registration_stats() const { return state_->registration_stats(); }

RecvStats Endpoint::recv_stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->recv_stats;
}

SendStats Endpoint::send_stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->send_stats;
}

std::string Endpoint::peer_name(PeerId peer) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->label(peer);
}

void Endpoint::disconnect(PeerId peer) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->disconnect_locked(state_->admitted(peer), "disconnected by " + state_->options.name,
                            /*orderly=*/true);
}

Future<void> Endpoint::send(const Tensor& tensor, PeerId peer, uint64_t tag) {
  return Future<void>(state_, detail::start_send(*state_, tensor, peer, tag));
}

Future<Tensor> Endpoint::recv(PeerId peer, uint64_t tag, TensorOptions options) {
  return Future<Tensor>(state_, detail::start_recv(*state_, std::nullopt, options, peer, tag));
}

Future<Tensor> Endpoint::recv(Tensor into, PeerId peer, uint64_t tag) {
  return Future<Tensor>(state_, detail::start_recv(*state_, std::move(into), {}, peer, tag));
}

const EndpointOptions& Endpoint::options() const { return state_->options; }

std::string Endpoint::describe(PeerId peer) const { return state_->describe(peer); }

}  // namespace ferry::transport
