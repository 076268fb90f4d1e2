// The inside of a transport Endpoint (internal; endpoint.h is the interface): the UCX context and
// worker, connections and their handshake, operations in flight, and progress. Everything here is
// guarded by EndpointState::mutex; UCX runs in serialized mode, one thread at a time inside it.
// Progress is driven by whoever waits (spinning briefly, then sleeping on the worker's event fd)
// and, when nobody waits, by a background thread, so that connections are accepted, rendezvous
// transfers advance and failed peers are noticed while the caller computes.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ferry/core/small_vector.h"
#include "ferry/core/tensor.h"
#include "ferry/core/tensor_options.h"
#include "ferry/device/event.h"
#include "ferry/device/stream.h"
#include "ferry/transport/auth.h"
#include "ferry/transport/endpoint.h"

namespace ferry::transport::detail {

using Clock = std::chrono::steady_clock;
class EndpointState;

// How long a connection whose peer UCX reported gone keeps receiving what the peer sent before.
inline constexpr std::chrono::milliseconds kPeerGoneGrace{200};

enum class OpStatus { pending, done, failed };

struct Operation {
  EndpointState* state = nullptr;
  bool is_send = false;
  PeerId peer = 0;
  uint64_t tag = 0;
  std::atomic<OpStatus> status{OpStatus::pending};
  std::string error;
  int outstanding = 0;             // UCX requests not yet completed
  SmallVector<void*, 2> requests;  // those requests, for cancelling
  // Held until UCX is done with them:
  std::vector<std::byte> message;              // send: the header (+ inline payload), when
                                               // UCX did not take it at once
  std::unique_ptr<std::byte[]> header_buffer;  // recv: where the header lands (not zeroed;
                                               // from the endpoint's pool, returned to it)
  size_t header_capacity = 0;
  Tensor payload;                  // send: the bytes sent; recv: where they land
  std::vector<ucp_dt_iov_t> rows;  // send: payload's rows, when it goes as a list of them
  // send
  Tensor source;                // the caller's tensor, until a staged copy from it is done
  std::optional<Event> staged;  // the copy of a device tensor into `payload` is done when this is
  TensorHeader header;
  // recv
  std::optional<Tensor> into;      // recv(into, ...)
  TensorOptions options;           // recv(peer, tag, options)
  std::optional<Stream> consumer;  // a device destination is written on this stream
  ExpectedHeader expected;         // into a small dense CPU tensor: the header it takes as is
  bool header_received = false;
  bool posting = false;  // inside ucp_tag_recv_nbx (post_tag_recv)
  Tensor value;  // recv: the result (unset when it is `into`, landed by its expected header)
  // While in flight, the endpoint's list of live operations holds the operation (EndpointState::
  // track): a caller may drop its future while UCX still writes into the operation's buffers.
  std::shared_ptr<Operation> self;
  Operation* live_prev = nullptr;
  Operation* live_next = nullptr;
};

enum class Phase { handshaking, admitted, failed, closed };

struct Connection {
  EndpointState* state = nullptr;
  PeerId id = 0;               // our id for the peer (in the tags it sends us)
  uint32_t remote_id = 0;      // the peer's id for us (in the tags we send it)
  ucp_ep_h ep = nullptr;       // made through the listener: the handshake
  ucp_ep_h data_ep = nullptr;  // made from the peer's worker address: the tensors
  bool server_side = false;
  std::string name;     // the name the peer gave
  std::string address;  // host:port
  Phase phase = Phase::handshaking;
  bool was_admitted = false;  // tensors it sent before leaving may still be received
  bool answered = false;      // a handshake record came from the peer (connect retries until)
  std::optional<Clock::time_point> gone_since;  // UCX reported the peer gone (connections.cc)
  std::optional<bool> rows_pay;   // sending lists of rows beats packing them (rows_pay_locked)
  void* flush_request = nullptr;  // an orderly close's flush in flight
  Clock::time_point flush_deadline;
  std::string failure;
  // Handshake
  int step = 0;  // what is awaited next (connections.cc, RecordKind)
  Nonce nonce{}, peer_nonce{};
  Clock::time_point handshake_deadline;
  std::vector<std::byte> in;                    // the record or address awaited
  std::deque<std::vector<std::byte>> outgoing;  // what was sent, alive until the connection goes
  int handshake_requests = 0;
  // Sends
  uint64_t next_seq = 0;
  std::deque<std::shared_ptr<Operation>> unposted;  // in send order, behind a staged copy

  std::string label() const;  // "name (address)", or the address before the hello
};

struct Completion {
  Operation* op;
  void* request;
  ucs_status_t status;
  size_t length;
};
struct HandshakeEvent {
  Connection* conn;
  void* request;
  ucs_status_t status;
  bool is_recv;
};

class EndpointState {
 public:
  explicit EndpointState(EndpointOptions options);
  ~EndpointState();
  void shutdown();  // idempotent; the Endpoint's destructor

  // One round of UCX progress and of what follows from it. Caller holds `mutex`.
  void progress_locked();
  // A lighter round for a waiter's spin between full ones: the data worker and the completions it
  // brings, none of the connection upkeep (the connection worker, staged sends, deadlines,
  // closes). False, doing nothing, while the last full round found the connection worker busy.
  bool quick_progress_locked();
  // Drives progress until done() (evaluated under the mutex) or the deadline; false on timeout.
  template <typename Done>
  bool drive_until(Done done, Clock::time_point deadline);

  Connection& admitted(PeerId peer);  // raises TransportError unless admitted; under the mutex
  // For a receive: the connection if admitted, or if it was and a message under `tag` from it
  // is already here (what a peer sent before leaving stays receivable); else raises.
  Connection& receivable(PeerId peer, uint64_t tag);
  std::string label(PeerId peer) const;
  void fail_locked(Operation& op, std::string message);
  void cancel_locked(Operation& op, std::string message);
  // `memh`: the registration of the memory (registration_locked), or nullptr for UCX's own.
  void post_tag_send(Operation& op, Connection& conn, const void* data, size_t bytes, uint64_t tag,
                     ucp_mem_h memh = nullptr);
  void post_tag_recv(Operation& op, void* data, size_t bytes, uint64_t tag,
                     ucp_mem_h memh = nullptr);
  // The small-tensor path of a receive, from its header's UCX callback (inside progress): when
  // the message is the header `op` expects (Operation::expected) with its payload, lands the
  // payload, frees the request and completes `op` there (which may free `op`); false, touching
  // nothing, otherwise (the message is then handled as a completion).
  bool finish_small_recv_locked(Operation& op, void* request, size_t length);
  bool take_expected_header_locked(Operation& op, size_t length);
  // Forgets a UCX request of `op` that completed (nullptr: one that failed when posted), frees it
  // and counts it off op.outstanding.
  void release_request_locked(Operation& op, void* request);
  // Whether a strided tensor sent to `conn` as a list of rows beats packing it: when the data
  // goes over shared memory only (decided once per connection from UCX's lanes).
  bool rows_pay_locked(Connection& conn);
  // Sends op.rows (UCX iov) as one message.
  void post_tag_send_rows(Operation& op, Connection& conn, uint64_t tag);
  // Counts a posted send's request as outstanding, or its immediate result as a completion.
  void account_send(Operation& op, ucs_status_ptr_t request);
  // The registration (ucp_mem_map) of the pinned block holding `t`'s bytes, made on its first
  // use and kept until the block goes back to its backend (a pinned allocator release hook);
  // nullptr for memory of another kind. Under the mutex.
  ucp_mem_h registration_locked(const Tensor& t);
  RegistrationStats registration_stats() const;
  // The list of operations in flight (intrusive, so that an operation costs no allocation to
  // track): track() links `op` and keeps it alive, untrack() unlinks it (which may free it).
  void track(const std::shared_ptr<Operation>& op);
  void untrack(Operation& op);
  // Header buffers of recv (kMaxHeaderBytes + inline_bytes each), reused from receive to receive.
  std::unique_ptr<std::byte[]> take_header_buffer_locked();
  void give_header_buffer_locked(std::unique_ptr<std::byte[]> buffer);
  // The encoded header of the send being posted; it moves into the operation only when UCX keeps
  // a pointer to it (a send that did not complete at once).
  std::vector<std::byte> message_scratch;

  // Connections
  uint16_t listen(const std::string& host, uint16_t port);
  std::optional<PeerId> accept(std::chrono::milliseconds timeout);
  PeerId connect(const std::string& host, uint16_t port);
  PeerId start_connect(const std::string& host, uint16_t port);
  // Fails the peer's pending operations and closes the connection; `orderly` (our own disconnect
  // or shutdown) flushes what was sent first.
  void disconnect_locked(Connection& conn, const std::string& why, bool orderly = false);
  std::string describe(PeerId peer);

  // Sends in order per peer: posts the queue's ready head(s).
  void post_ready_sends_locked(Connection& conn);
  // Posts one send whose payload is ready (tracked while UCX still refers to it).
  void post_send_locked(const std::shared_ptr<Operation>& op, Connection& conn);

  const EndpointOptions options;
  const std::string secret;
  mutable std::mutex mutex;
  std::atomic<int> waiters{0};
  // Waits that have ended (the progress thread's cue: it stays parked while this moves; a count,
  // not a time, so that leaving a wait reads no clock).
  std::atomic<uint64_t> waits_ended{0};
  std::optional<uint16_t> listening_port;
  SendStats send_stats;  // under the mutex
  RecvStats recv_stats;  // under the mutex

  // Called from UCX callbacks (inside progress).
  std::vector<Completion> completions;
  std::vector<HandshakeEvent> handshake_events;
  std::vector<std::pair<Connection*, ucs_status_t>> ep_errors;
  std::vector<ucp_conn_request_h> conn_requests;

 private:
  void progress_thread_main();
  void sleep_on_worker(std::chrono::microseconds max_sleep);
  void handle_completion(const Completion& c);
  void handle_header(Operation& op, size_t length);
  void finish_recv(Operation& op);
  void handle_handshake_event(const HandshakeEvent& e);
  void advance_handshake(Connection& conn);
  void accept_conn_request(ucp_conn_request_h request);
  void handle_ep_error(Connection& conn, ucs_status_t status);
  void fail_peer_ops_locked(PeerId peer, const std::string& message);
  void check_deadlines_locked();
  Connection& new_connection();
  void stream_send(Connection& conn, std::vector<std::byte> bytes);
  void stream_send(Connection& conn, const HandshakeRecord& record);
  void stream_recv(Connection& conn, int step, size_t bytes);
  void send_worker_address(Connection& conn);
  void open_data_ep(Connection& conn);
  void close_ep(Connection& conn, bool flush);
  void force_close(Connection& conn);
  void finish_flushes_locked(bool now);

  // Registrations of pinned blocks by block start (registration_locked).
  struct Registration {
    size_t size = 0;
    ucp_mem_h memh = nullptr;
  };
  std::unordered_map<const void*, Registration> registrations_;
  RegistrationStats registration_stats_;
  uint64_t release_hook_ = 0;
  void release_registration(const void* block);
  void unmap_all_registrations_locked();

  ucp_context_h context_ = nullptr;
  // Two workers: the data worker carries the tensors (data endpoints, tag messages) and is
  // progressed on every round; the connection worker carries the listener and the handshake
  // endpoints (TCP), whose polling costs a system call, and is progressed on every round only
  // while something happens there (a handshake, a close), else once a millisecond and whenever
  // its event fd fires. Its TCP connection is what notices a peer process that died.
  ucp_worker_h worker_ = nullptr;
  ucp_worker_h cm_worker_ = nullptr;
  int cm_event_fd_ = -1;
  Clock::time_point next_cm_progress_{};  // {}: at the next progress call
  bool quick_rounds_allowed_ = false;     // the last full round found no connection work
  void drain_locked(bool cm);             // the workers until idle, and what they brought
  bool dispatch_queued_locked();          // what UCX's callbacks queued; false if nothing
  uint64_t progress_calls_ = 0;
  bool cm_busy_locked() const;
  ucp_listener_h listener_ = nullptr;
  std::vector<std::byte> worker_address_;
  int event_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  bool closed_ = false;
  std::thread progress_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex park_mutex_;  // the progress thread's, while it keeps out of a waiter's way
  std::condition_variable waiters_done_;
  std::map<PeerId, std::unique_ptr<Connection>> connections_;
  PeerId next_peer_ = 1;
  std::deque<PeerId> accept_queue_;
  Operation* live_head_ = nullptr;                                  // track()
  std::vector<std::shared_ptr<Operation>> live_ops_locked() const;  // a snapshot of the list
  std::vector<std::unique_ptr<std::byte[]>> header_buffers_;
  std::vector<Completion> completions_spare_;  // progress_locked swaps it with completions
  std::vector<void*> closing_;                 // ep close requests in flight
  std::vector<Connection*> flushing_;          // orderly closes waiting for their flush

  friend void wait_operation(EndpointState&, Operation&, std::chrono::milliseconds);
  friend bool poll_operation(EndpointState&, Operation&);
};

template <typename Done>
bool EndpointState::drive_until(Done done, Clock::time_point deadline) {
  waiters.fetch_add(1);
  struct Leave {
    EndpointState* s;
    ~Leave() {
      s->waits_ended.fetch_add(1, std::memory_order_relaxed);
      s->waiters.fetch_sub(1);
    }
  } leave{this};
  // Spin (UCX progress, no sleep) for about the first 50 microseconds: a reply on a fast
  // transport arrives within a few. Then sleep on the worker's event fd between rounds. The
  // clock is first read after 8 rounds: a wait that ends sooner reads none.
  // Each full round is followed, under the same lock, by up to kQuickRounds rounds of the data
  // worker alone (quick_progress_locked): an arrival is noticed sooner than if every poll paid
  // for the lock and the connection upkeep, and the lock is held for at most about a
  // microsecond at a time.
  constexpr int kQuickRounds = 15;
  Clock::time_point spin_until{};
  for (uint32_t round = 1;; ++round) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (round == 1 && done()) return true;  // a send that went at once
      progress_locked();
      if (done()) return true;
      for (int quick = 0; quick < kQuickRounds && quick_rounds_allowed_; ++quick) {
        if (!quick_progress_locked()) continue;
        if (done()) return true;
        break;  // something else happened: a full round next
      }
    }
    if (round % 8 != 0) continue;  // the clock is dear on some VMs: read it every 8th round
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (round == 8) spin_until = now + std::chrono::microseconds(50);
    if (now >= spin_until) {
      sleep_on_worker(std::chrono::duration_cast<std::chrono::microseconds>(
          std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(1))));
    }
  }
}

}  // namespace ferry::transport::detail
