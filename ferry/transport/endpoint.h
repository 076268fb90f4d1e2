// ferry::transport::Endpoint: tensors between processes and hosts over UCX (docs/transport.md).
// One UCX worker per Endpoint; peers connect to a listener (host:port, loopback by default) and
// authenticate with a shared secret before any tensor is accepted. send/recv return futures;
// tensor metadata (dtype, sizes, strides) travels with the payload.
// Guarantees:
// - every wait (connect, accept, Future::wait) is bounded by EndpointOptions::timeout;
// - a peer that disappears fails its pending operations with a TransportError naming it;
// - a received header is validated (dtype, sizes, strides, size limit) before anything is
//   allocated for it;
// - a send of a device tensor reads it after the work queued on its device's current stream
//   (an event, never a device synchronize); a receive into a device tensor is written on the
//   current stream of that device at the time of the recv call, so work queued there later sees
//   it; the buffers involved stay alive until UCX is done with them.
// One copy over shared memory is UCX's to allow, not ferry's: with UCX_CMA_MEMORY_INVALIDATE=y in
// the environment of both processes, payloads above UCX's rendezvous threshold are read by the
// receiver straight out of the sender's memory (cma) instead of through a shared segment
// (1.1-1.9x the bandwidth from 1 MiB up where measured). Then a sender that gives up on a send
// (a timed-out wait, a closed endpoint) while the receiver is alive and still reading must not
// modify that tensor until the receiver is done or gone (docs/transport.md, "One copy").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ferry/core/tensor.h"
#include "ferry/core/tensor_options.h"
#include "ferry/transport/wire.h"

namespace ferry::transport {

using PeerId = uint32_t;

struct EndpointOptions {
  // How this endpoint introduces itself to peers (their errors name it); default host:pid.
  std::string name;
  // The shared secret peers prove they know; default $FERRY_TRANSPORT_SECRET. Required.
  std::string secret;
  // The bound on every wait: connecting, accepting, and each Future::wait.
  std::chrono::milliseconds timeout{60000};
  // A header announcing a larger payload is refused before anything is allocated.
  uint64_t max_message_bytes = uint64_t{1} << 40;
  // The network devices UCX may use for data (UCX_NET_DEVICES, which wins when set): loopback
  // by default, so that nothing but the listener's address is reachable from other hosts
  // unless asked ("all", or e.g. "eth0" across hosts). Shared memory is not a network device:
  // processes on one host use it either way.
  std::string network_devices = "lo";
  // Payloads up to this many bytes travel inside the header message (one message, one copy);
  // larger ones follow as a second message received straight into the tensor.
  size_t inline_bytes = 8192;
  // A CPU tensor that is not dense but whose innermost dimension is contiguous is sent as a list
  // of its rows (UCX iov: no packing copy) when each row holds at least this many bytes, there
  // are at most kMaxSendRows of them, and the connection's data goes over shared memory;
  // otherwise it is packed by the copy engine first (over TCP, UCX sends an iov 2x slower than
  // a packed tensor). 0: always pack. Measurements: docs/transport.md.
  size_t row_send_min_bytes = 4096;
};

inline constexpr size_t kMaxSendRows = 4096;

// How this endpoint's sends went out (counts of sends).
struct SendStats {
  uint64_t own_memory = 0;  // from the tensor's own dense memory
  uint64_t as_rows = 0;     // from the tensor's memory as a list of rows (UCX iov)
  uint64_t packed = 0;      // packed into a contiguous tensor first (copy engine)
  uint64_t staged = 0;      // device tensors copied into pinned memory first
  // Of own_memory: small dense CPU tensors (at most 64 bytes, with their header within UCX's
  // inline limit) that went in one UCX call completing at once, with no operation to track (their
  // futures are ready on return).
  uint64_t at_once = 0;
};

// How this endpoint's receives of small tensors went (counts of receives).
struct RecvStats {
  // Receives into a dense CPU tensor of at most EndpointOptions::inline_bytes whose message was
  // the header that tensor expects (its dtype, sizes and strides, the payload inline): compared
  // byte for byte instead of decoded and checked field by field.
  uint64_t expected_header = 0;
  // Of those, the ones completed inside UCX's callback, as the message arrived for a receive
  // already posted (the others arrived first and were taken when the receive was posted).
  uint64_t in_callback = 0;
};

// What the endpoint's registration cache did (ucp_mem_map of pinned blocks, kept per block).
struct RegistrationStats {
  uint64_t registered = 0;  // blocks registered (ucp_mem_map calls)
  uint64_t reused = 0;      // transfers that found their block registered already
  uint64_t released = 0;    // registrations dropped as their block went back to its backend
  uint64_t failed = 0;      // blocks UCX would not register (sent with UCX's own handling)
  size_t live = 0;          // registrations held now
};

namespace detail {
class EndpointState;
struct Operation;
// Drives the endpoint until `op` is done or `timeout` passes; raises TransportError on failure or
// timeout (a timed-out operation is cancelled first).
void wait_operation(EndpointState& state, Operation& op, std::chrono::milliseconds timeout);
// Drives the endpoint until `op` is done (true; raises TransportError if it failed) or `timeout`
// passes (false; the operation stays pending).
bool wait_operation_for(EndpointState& state, Operation& op, std::chrono::milliseconds timeout);
bool poll_operation(EndpointState& state, Operation& op);
Tensor operation_value(Operation& op);
std::chrono::milliseconds default_timeout(const EndpointState& state);
}  // namespace detail

// The result of a send (T = void) or a receive (T = Tensor). Waiting drives the endpoint's
// progress on the calling thread (no hand-off to another thread on the fast path).
template <typename T>
class Future {
 public:
  Future() = default;
  // True once the operation finished (successfully or not); makes progress, never blocks.
  bool ready() const { return detail::poll_operation(*state_, *op_); }
  // Waits up to the endpoint's timeout; raises TransportError if the operation failed or did not
  // finish in time.
  void wait() const { wait(detail::default_timeout(*state_)); }
  void wait(std::chrono::milliseconds timeout) const {
    detail::wait_operation(*state_, *op_, timeout);
  }
  // Waits up to `timeout`: true when the operation finished (raising TransportError if it
  // failed), false when it is still pending, which it stays (nothing is cancelled).
  bool wait_for(std::chrono::milliseconds timeout) const {
    return detail::wait_operation_for(*state_, *op_, timeout);
  }
  // wait(), then the received tensor (T = Tensor).
  T get() const {
    wait();
    if constexpr (!std::is_void_v<T>) return detail::operation_value(*op_);
  }
  bool valid() const { return op_ != nullptr; }

 private:
  friend class Endpoint;
  Future(std::shared_ptr<detail::EndpointState> state, std::shared_ptr<detail::Operation> op)
      : state_(std::move(state)), op_(std::move(op)) {}
  std::shared_ptr<detail::EndpointState> state_;
  std::shared_ptr<detail::Operation> op_;
};

class Endpoint {
 public:
  explicit Endpoint(EndpointOptions options = {});
  // Fails pending operations ("endpoint closed"), then closes every connection.
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Listens on host:port (port 0: any free port) and returns the port. Loopback unless told.
  uint16_t listen(const std::string& host = "127.0.0.1", uint16_t port = 0);
  // The port listen() bound, if it was called.
  std::optional<uint16_t> listening_port() const;
  // The next peer that connected and proved the secret; waits up to the timeout.
  PeerId accept();
  // The next such peer if one comes within `timeout`, else nothing (for a serving loop that
  // also watches for its own stop).
  std::optional<PeerId> accept(std::chrono::milliseconds timeout);
  // Connects to a listening endpoint and authenticates both ways; waits up to the timeout,
  // retrying while nothing listens there yet (so ranks may start in any order).
  PeerId connect(const std::string& host, uint16_t port);
  // The name the peer gave and its address, e.g. "rank1 (127.0.0.1:40112)".
  std::string peer_name(PeerId peer) const;
  // Closes the connection; the peer's pending operations with us fail.
  void disconnect(PeerId peer);

  // Sends `tensor` (any dtype, shape, strides, device) to `peer` under `tag` (< 2^36). The
  // future completes when the bytes have left the tensor: it may then be changed or freed.
  Future<void> send(const Tensor& tensor, PeerId peer, uint64_t tag);
  // Receives the next tensor `peer` sent under `tag`, into a new tensor with the sent sizes and
  // strides, on options' device (CPU by default; pinned if asked) and in options' dtype if given.
  Future<Tensor> recv(PeerId peer, uint64_t tag, TensorOptions options = {});
  // Receives into `into`, whose dtype and sizes must equal the sent ones (any strides whose
  // elements do not overlap, any device).
  Future<Tensor> recv(Tensor into, PeerId peer, uint64_t tag);

  const EndpointOptions& options() const;
  // UCX's own description of the transports a connection uses (ucp_ep_print_info).
  std::string describe(PeerId peer) const;
  // Payloads in pinned memory (pinned tensors, the staging of device tensors, pinned landings)
  // go with a registration of their whole pinned block, made once per block and reused by every
  // later transfer from or into it until the block goes back to its backend
  // (memory::pinned_empty_cache).
  RegistrationStats registration_stats() const;
  SendStats send_stats() const;
  RecvStats recv_stats() const;

 private:
  std::shared_ptr<detail::EndpointState> state_;
};

}  // namespace ferry::transport
