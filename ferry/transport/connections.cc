// Connections of a transport endpoint: the listener, connecting, the authenticating handshake over
// each connection's UCX stream, peer failures and closing (see endpoint_state.h,
// docs/transport.md).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "ferry/transport/endpoint_state.h"

namespace ferry::transport::detail {
namespace {

enum RecordKind : int {
  kHello = 1,
  kChallenge = 2,
  kProof = 3,
  kVerdict = 4,
  kAddress = 5,       // the length of the worker address that follows
  kAddressBytes = 6,  // the address itself (not a record)
};
constexpr uint32_t kMaxWorkerAddressBytes = 1 << 16;

sockaddr_storage resolve(const std::string& host, uint16_t port, socklen_t* length) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  FERRY_CHECK_AS(TransportError, rc == 0 && found != nullptr, "transport: expected a host name ",
                 "or address, got '", host, "' (", gai_strerror(rc), ")");
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  freeaddrinfo(found);
  return out;
}

std::string address_string(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host));
    port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof(host));
    port = ntohs(in6.sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

void conn_request_callback(ucp_conn_request_h request, void* arg) {
  static_cast<EndpointState*>(arg)->conn_requests.push_back(request);
}

void ep_error_callback(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* conn = static_cast<Connection*>(arg);
  conn->state->ep_errors.emplace_back(conn, status);
}

void stream_send_callback(void* request, ucs_status_t status, void* user_data) {
  auto* conn = static_cast<Connection*>(user_data);
  conn->state->handshake_events.push_back({conn, request, status, false});
}

void stream_recv_callback(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* conn = static_cast<Connection*>(user_data);
  conn->state->handshake_events.push_back({conn, request, status, true});
}

}  // namespace

Connection& EndpointState::new_connection() {
  FERRY_CHECK_AS(TransportError, next_peer_ <= kMaxPeerId, "transport: this endpoint has made ",
                 kMaxPeerId, " connections, the most its tags can tell apart");
  auto conn = std::make_unique<Connection>();
  conn->state = this;
  conn->id = next_peer_++;
  conn->nonce = make_nonce();
  conn->handshake_deadline = Clock::now() + options.timeout;
  Connection& ref = *conn;
  connections_[ref.id] = std::move(conn);
  return ref;
}

uint16_t EndpointState::listen(const std::string& host, uint16_t port) {
  std::lock_guard<std::mutex> lock(mutex);
  FERRY_CHECK_AS(TransportError, listener_ == nullptr, "transport: this endpoint already listens");
  socklen_t length = 0;
  sockaddr_storage addr = resolve(host, port, &length);
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = length;
  params.conn_handler.cb = conn_request_callback;
  params.conn_handler.arg = this;
  ucs_status_t status = ucp_listener_create(cm_worker_, &params, &listener_);
  FERRY_CHECK_AS(TransportError, status == UCS_OK, "transport: cannot listen on ", host, ":", port,
                 ": ", ucs_status_string(status));
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  status = ucp_listener_query(listener_, &attr);
  FERRY_CHECK_AS(TransportError, status == UCS_OK,
                 "transport: ucp_listener_query failed: ", ucs_status_string(status));
  const auto& bound = attr.sockaddr;
  listening_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<const sockaddr_in6&>(bound).sin6_port)
                       : ntohs(reinterpret_cast<const sockaddr_in&>(bound).sin_port);
  return *listening_port;
}

void EndpointState::accept_conn_request(ucp_conn_request_h request) {
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  std::string address = "a client";
  if (ucp_conn_request_query(request, &attr) == UCS_OK)
    address = address_string(attr.client_address);
  if (next_peer_ > kMaxPeerId) {
    ucp_listener_reject(listener_, request);
    return;
  }
  Connection& conn = new_connection();
  conn.server_side = true;
  conn.address = address;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = ep_error_callback;
  params.err_handler.arg = &conn;
  const ucs_status_t status = ucp_ep_create(cm_worker_, &params, &conn.ep);
  if (status != UCS_OK) {
    conn.phase = Phase::failed;
    conn.failure = ucs_status_string(status);
    return;
  }
  stream_recv(conn, kHello, kHandshakeRecordBytes);
}

// Connects, retrying every 50 ms while nothing answers (the server may not listen yet: ranks
// start in any order) until the timeout; a server that answered and then refused is final.
PeerId EndpointState::connect(const std::string& host, uint16_t port) {
  const auto deadline = Clock::now() + options.timeout;
  while (true) {
    const PeerId id = start_connect(host, port);
    auto phase = [&] { return connections_.at(id)->phase; };
    const bool finished = drive_until([&] { return phase() != Phase::handshaking; }, deadline);
    std::unique_lock<std::mutex> lock(mutex);
    Connection& conn = *connections_.at(id);
    if (!finished) disconnect_locked(conn, "timed out");
    if (conn.phase == Phase::admitted) return id;
    if (conn.answered || Clock::now() + std::chrono::milliseconds(50) >= deadline) {
      throw TransportError("transport: connecting to " + conn.address + " failed: " + conn.failure);
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

PeerId EndpointState::start_connect(const std::string& host, uint16_t port) {
  std::lock_guard<std::mutex> lock(mutex);
  socklen_t length = 0;
  sockaddr_storage addr = resolve(host, port, &length);
  Connection& conn = new_connection();
  conn.address = host + ":" + std::to_string(port);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = length;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = ep_error_callback;
  params.err_handler.arg = &conn;
  const ucs_status_t status = ucp_ep_create(cm_worker_, &params, &conn.ep);
  if (status != UCS_OK) {
    connections_.erase(conn.id);
    throw TransportError("transport: cannot connect to " + host + ":" + std::to_string(port) +
                         ": " + ucs_status_string(status));
  }
  HandshakeRecord hello;
  hello.kind = kHello;
  hello.id = conn.id;
  hello.nonce = conn.nonce;
  hello.name = options.name;
  stream_send(conn, hello);
  stream_recv(conn, kChallenge, kHandshakeRecordBytes);
  return conn.id;
}

std::optional<PeerId> EndpointState::accept(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    FERRY_CHECK_AS(TransportError, listener_ != nullptr || !accept_queue_.empty(),
                   "transport: accept() needs listen() first");
  }
  drive_until([&] { return !accept_queue_.empty(); }, Clock::now() + timeout);
  std::lock_guard<std::mutex> lock(mutex);
  if (accept_queue_.empty()) return std::nullopt;
  const PeerId id = accept_queue_.front();
  accept_queue_.pop_front();
  return id;
}

void EndpointState::stream_send(Connection& conn, std::vector<std::byte> bytes) {
  conn.outgoing.push_back(std::move(bytes));  // kept until the connection goes
  const auto& buffer = conn.outgoing.back();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = stream_send_callback;
  param.user_data = &conn;
  ucs_status_ptr_t request = ucp_stream_send_nbx(conn.ep, buffer.data(), buffer.size(), &param);
  ++conn.handshake_requests;
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    handshake_events.push_back({&conn, nullptr, UCS_PTR_STATUS(request), false});
  }
}

void EndpointState::stream_send(Connection& conn, const HandshakeRecord& record) {
  const auto bytes = encode_handshake(record);
  stream_send(conn, std::vector<std::byte>(bytes.begin(), bytes.end()));
}

void EndpointState::stream_recv(Connection& conn, int step, size_t bytes) {
  conn.step = step;
  conn.in.assign(bytes, std::byte{0});
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.recv_stream = stream_recv_callback;
  param.user_data = &conn;
  param.flags = UCP_STREAM_RECV_FLAG_WAITALL;
  size_t length = 0;
  ucs_status_ptr_t request =
      ucp_stream_recv_nbx(conn.ep, conn.in.data(), conn.in.size(), &length, &param);
  ++conn.handshake_requests;
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    handshake_events.push_back({&conn, nullptr, UCS_PTR_STATUS(request), true});
  }
}

void EndpointState::handle_handshake_event(const HandshakeEvent& e) {
  Connection& conn = *e.conn;
  --conn.handshake_requests;
  if (e.request != nullptr) ucp_request_free(e.request);
  if (conn.phase != Phase::handshaking) return;
  if (e.status != UCS_OK) {
    disconnect_locked(conn,
                      std::string("the handshake failed: ") + ucs_status_string(e.status) +
                          (conn.server_side ? "" : " (a wrong secret closes the connection)"));
    return;
  }
  if (!e.is_recv) return;  // a record went out; nothing waits on that
  conn.answered = true;
  try {
    advance_handshake(conn);
  } catch (const Error& error) {
    disconnect_locked(conn, error.what());
  }
}

// Once both sides are authenticated, each sends its UCX worker address over the connection and
// the other opens a second endpoint to it for the tensors: UCX 1.13 gives an endpoint made
// through its sockaddr connection manager network transports only, while one made from a worker
// address gets every transport the two processes share (shared memory on one host).
void EndpointState::send_worker_address(Connection& conn) {
  HandshakeRecord record;
  record.kind = kAddress;
  record.id = static_cast<uint32_t>(worker_address_.size());
  stream_send(conn, record);
  stream_send(conn, worker_address_);
}

void EndpointState::open_data_ep(Connection& conn) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(conn.in.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = ep_error_callback;
  params.err_handler.arg = &conn;
  const ucs_status_t status = ucp_ep_create(worker_, &params, &conn.data_ep);
  FERRY_CHECK_AS(TransportError, status == UCS_OK, "transport: cannot open the data endpoint to ",
                 conn.label(), ": ", ucs_status_string(status));
  conn.phase = Phase::admitted;
  conn.was_admitted = true;
  if (conn.server_side) accept_queue_.push_back(conn.id);
}

// The record (or address) in conn.in has arrived; answer it.
void EndpointState::advance_handshake(Connection& conn) {
  const std::string from = conn.label();
  if (conn.step == kAddressBytes) {
    open_data_ep(conn);
    return;
  }
  const auto record = decode_handshake(
      std::span<const std::byte, kHandshakeRecordBytes>(conn.in.data(), kHandshakeRecordBytes),
      static_cast<uint32_t>(conn.step), from);
  switch (conn.step) {
    case kHello: {  // server
      conn.peer_nonce = record.nonce;
      conn.remote_id = record.id;
      conn.name = record.name;
      HandshakeRecord challenge;
      challenge.kind = kChallenge;
      challenge.id = conn.id;
      challenge.nonce = conn.nonce;
      challenge.proof = make_proof(secret, Role::server, conn.peer_nonce, conn.nonce);
      challenge.name = options.name;
      stream_send(conn, challenge);
      stream_recv(conn, kProof, kHandshakeRecordBytes);
      return;
    }
    case kChallenge: {  // client
      conn.peer_nonce = record.nonce;
      conn.remote_id = record.id;
      conn.name = record.name;
      if (!verify_proof(secret, Role::server, conn.nonce, conn.peer_nonce, record.proof)) {
        throw TransportError("the server did not prove it knows the shared secret");
      }
      HandshakeRecord proof;
      proof.kind = kProof;
      proof.proof = make_proof(secret, Role::client, conn.nonce, conn.peer_nonce);
      stream_send(conn, proof);
      stream_recv(conn, kVerdict, kHandshakeRecordBytes);
      return;
    }
    case kProof: {  // server
      if (!verify_proof(secret, Role::client, conn.peer_nonce, conn.nonce, record.proof)) {
        throw TransportError("the client did not prove it knows the shared secret");
      }
      HandshakeRecord verdict;
      verdict.kind = kVerdict;
      verdict.id = 1;
      stream_send(conn, verdict);
      send_worker_address(conn);
      stream_recv(conn, kAddress, kHandshakeRecordBytes);
      return;
    }
    case kVerdict:  // client
      FERRY_CHECK_AS(TransportError, record.id == 1, "the server refused the connection");
      send_worker_address(conn);
      stream_recv(conn, kAddress, kHandshakeRecordBytes);
      return;
    case kAddress:
      FERRY_CHECK_AS(TransportError, record.id > 0 && record.id <= kMaxWorkerAddressBytes,
                     "transport: expected a worker address of 1 to ", kMaxWorkerAddressBytes,
                     " bytes from ", from, ", got ", record.id);
      stream_recv(conn, kAddressBytes, record.id);
      return;
    default:
      throw TransportError("an unexpected handshake step");
  }
}

// UCX can report a peer's departure before it has handed over everything the peer sent before
// leaving (a shared-memory FIFO is read after the liveness check that failed, a socket's last
// bytes after its reset). So a failure is taken in two steps: no new operation with the peer
// starts from now, and its pending ones fail, and the connection closes, kPeerGoneGrace later,
// receiving what arrives meanwhile.
void EndpointState::handle_ep_error(Connection& conn, ucs_status_t status) {
  if (conn.phase == Phase::closed || conn.phase == Phase::failed || conn.gone_since) return;
  if (conn.phase != Phase::admitted) {
    disconnect_locked(conn, std::string("the connection failed: ") + ucs_status_string(status));
    return;
  }
  conn.failure = std::string("the connection failed: ") + ucs_status_string(status);
  conn.gone_since = Clock::now();
}

void EndpointState::disconnect_locked(Connection& conn, const std::string& why, bool orderly) {
  const bool was_admitted = conn.phase == Phase::admitted;
  conn.phase = orderly ? Phase::closed : Phase::failed;
  conn.failure = why;
  if (was_admitted || !conn.unposted.empty()) {
    fail_peer_ops_locked(conn.id, "transport: peer " + conn.label() + " is gone: " + why);
  }
  conn.unposted.clear();
  std::erase(accept_queue_, conn.id);
  close_ep(conn, /*flush=*/orderly && was_admitted && !conn.gone_since);
}

// An orderly close first flushes the data endpoint (what was sent before it is delivered) for up
// to a second, then closes both endpoints by force; a failed or refused connection is closed by
// force at once. Forcing the close ends whatever UCX still holds for the connection, so nothing
// outlives the worker.
void EndpointState::close_ep(Connection& conn, bool flush) {
  if (flush && conn.data_ep != nullptr && conn.flush_request == nullptr) {
    ucp_request_param_t param{};
    ucs_status_ptr_t request = ucp_ep_flush_nbx(conn.data_ep, &param);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
      conn.flush_request = request;
      conn.flush_deadline = Clock::now() + std::chrono::seconds(1);
      flushing_.push_back(&conn);
      return;
    }
  }
  force_close(conn);
}

void EndpointState::force_close(Connection& conn) {
  if (conn.flush_request != nullptr) {
    ucp_request_free(conn.flush_request);  // UCX completes it as the endpoint goes
    conn.flush_request = nullptr;
  }
  for (ucp_ep_h* ep : {&conn.data_ep, &conn.ep}) {
    if (*ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t request = ucp_ep_close_nbx(*ep, &param);
    *ep = nullptr;
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing_.push_back(request);
  }
}

// Closes the connections whose flush finished or ran out of time.
void EndpointState::finish_flushes_locked(bool now) {
  const auto t = Clock::now();
  std::erase_if(flushing_, [&](Connection* conn) {
    if (!now && t < conn->flush_deadline &&
        ucp_request_check_status(conn->flush_request) == UCS_INPROGRESS) {
      return false;
    }
    force_close(*conn);
    return true;
  });
}

Connection& EndpointState::admitted(PeerId peer) {
  auto it = connections_.find(peer);
  FERRY_CHECK_AS(TransportError, it != connections_.end(), "transport: expected a connected ",
                 "peer id, got ", peer);
  Connection& conn = *it->second;
  FERRY_CHECK_AS(TransportError, conn.phase == Phase::admitted && !conn.gone_since,
                 "transport: peer ", conn.label(), " is not connected: ",
                 conn.phase == Phase::handshaking ? "still authenticating" : conn.failure);
  return conn;
}

Connection& EndpointState::receivable(PeerId peer, uint64_t tag) {
  const auto departed = [&]() -> Connection* {
    auto it = connections_.find(peer);
    return it != connections_.end() && it->second->was_admitted &&
                   (it->second->phase != Phase::admitted || it->second->gone_since)
               ? it->second.get()
               : nullptr;
  };
  if (departed() != nullptr) {
    progress_locked();  // take in what the peer sent before it left
    if (Connection* conn = departed(); conn != nullptr) {
      ucp_tag_recv_info_t info{};
      if (ucp_tag_probe_nb(worker_, tag, kFullTagMask, 0, &info) != nullptr) return *conn;
    }
  }
  return admitted(peer);
}

std::string EndpointState::label(PeerId peer) const {
  auto it = connections_.find(peer);
  return it == connections_.end() ? "peer " + std::to_string(peer) : it->second->label();
}

namespace {
std::string print_info(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  FERRY_CHECK_AS(TransportError, stream != nullptr, "transport: open_memstream failed");
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  std::string out(text, size);
  std::free(text);
  return out;
}
}  // namespace

std::string EndpointState::describe(PeerId peer) {
  std::lock_guard<std::mutex> lock(mutex);
  return print_info(admitted(peer).data_ep);
}

bool EndpointState::rows_pay_locked(Connection& conn) {
  if (!conn.rows_pay) {
    // Every lane a shared-memory transport ("sysv/memory", "posix/memory", ...): UCX 1.13 then
    // sends an iov at memory speed, while over TCP it falls back to small copied fragments
    // (measured in docs/transport.md).
    const std::string info = print_info(conn.data_ep);
    bool memory_only = false;
    for (size_t at = info.find("lane["); at != std::string::npos; at = info.find("lane[", at + 1)) {
      const std::string line = info.substr(at, info.find('\n', at) - at);
      memory_only = line.find("/memory") != std::string::npos;
      if (!memory_only) break;
    }
    conn.rows_pay = memory_only;
  }
  return *conn.rows_pay;
}

}  // namespace ferry::transport::detail
