// The endpoint's UCX context and worker, its progress (by waiters and by a background thread),
// completions, failures and shutdown (see endpoint_state.h).
#include "ferry/transport/endpoint_state.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "ferry/iter/parallel.h"
#include "ferry/memory/pinned_allocator.h"

namespace ferry::transport::detail {
namespace {

[[noreturn]] void ucx_failed(const char* what, ucs_status_t status) {
  throw TransportError(std::string("transport: ") + what + " failed: " + ucs_status_string(status));
}

std::string default_name() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

EndpointOptions with_defaults(EndpointOptions options) {
  if (options.name.empty()) options.name = default_name();
  FERRY_CHECK_AS(TransportError, options.timeout.count() > 0,
                 "transport: expected a positive timeout, got ", options.timeout.count(), " ms");
  return options;
}

}  // namespace

std::string Connection::label() const {
  if (name.empty()) return address;
  return name + " (" + address + ")";
}

EndpointState::EndpointState(EndpointOptions opts)
    : options(with_defaults(std::move(opts))), secret(resolve_secret(options.secret)) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);  // honours UCX_TLS etc.
  if (status != UCS_OK) ucx_failed("reading UCX's configuration", status);
  // Connections detect failed peers (UCP_ERR_HANDLING_MODE_PEER), which UCX 1.13 leaves its
  // shared-memory transports out of unless told they may take part (they then check that the
  // peer process is alive): without this, two processes on one host would talk over TCP.
  const char* env_tls = std::getenv("UCX_TLS");
  const std::string_view tls = env_tls != nullptr ? env_tls : "";
  bool shared_memory_allowed = env_tls == nullptr || tls.starts_with('^');  // "^x": all but x
  for (std::string_view name : {"all", "sm", "mm", "posix", "sysv"}) {
    shared_memory_allowed = shared_memory_allowed || tls.find(name) != std::string_view::npos;
  }
  if (std::getenv("UCX_MM_ERROR_HANDLING") == nullptr && shared_memory_allowed) {
    ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
  }
  if (std::getenv("UCX_NET_DEVICES") == nullptr && !options.network_devices.empty()) {
    status = ucp_config_modify(config, "NET_DEVICES", options.network_devices.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      throw TransportError("transport: expected network devices UCX knows (\"all\", \"lo\", " +
                           std::string("\"eth0\", ...), got \"") + options.network_devices +
                           "\": " + ucs_status_string(status));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK) ucx_failed("ucp_init", status);
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) {
    ucp_cleanup(context_);
    ucx_failed("ucp_worker_create", status);
  }
  status = ucp_worker_create(context_, &worker_params, &cm_worker_);
  if (status != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    ucx_failed("ucp_worker_create", status);
  }
  const auto destroy_workers = [this] {
    ucp_worker_destroy(cm_worker_);
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  };
  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  status = ucp_worker_get_address(worker_, &address, &address_length);
  if (status != UCS_OK) {
    destroy_workers();
    ucx_failed("ucp_worker_get_address", status);
  }
  const auto* address_bytes = reinterpret_cast<const std::byte*>(address);
  worker_address_.assign(address_bytes, address_bytes + address_length);
  ucp_worker_release_address(worker_, address);
  status = ucp_worker_get_efd(worker_, &event_fd_);
  if (status == UCS_OK) status = ucp_worker_get_efd(cm_worker_, &cm_event_fd_);
  if (status != UCS_OK || pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    destroy_workers();
    ucx_failed("setting up the worker's wake-up", status != UCS_OK ? status : UCS_ERR_IO_ERROR);
  }
  release_hook_ = memory::add_pinned_release_hook(
      [this](const memory::PinnedBlockRange& block) { release_registration(block.ptr); });
  progress_thread_ = std::thread([this] { progress_thread_main(); });
}

EndpointState::~EndpointState() { shutdown(); }

void EndpointState::shutdown() {
  // First, with no lock of ours held: a hook running now may be waiting for the mutex.
  if (release_hook_ != 0) memory::remove_pinned_release_hook(std::exchange(release_hook_, 0));
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (closed_) return;
    for (auto& [id, conn] : connections_) {
      if (conn->phase == Phase::handshaking || conn->phase == Phase::admitted) {
        disconnect_locked(*conn, "the endpoint was closed", /*orderly=*/true);
      }
    }
    for (const auto& op : live_ops_locked()) {
      if (op->status == OpStatus::pending) cancel_locked(*op, "transport: the endpoint was closed");
    }
    if (listener_ != nullptr) {
      ucp_listener_destroy(listener_);
      listener_ = nullptr;
    }
  }
  stopping_ = true;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = write(wake_pipe_[1], &byte, 1);
  waiters_done_.notify_all();
  if (progress_thread_.joinable()) progress_thread_.join();
  // Let the flushes, closes and cancellations finish (each bounded; the closes are forced after
  // the flushes), then tear UCX down, and only then release the buffers it was using.
  drive_until([this] { return flushing_.empty(); }, Clock::now() + std::chrono::seconds(2));
  {
    std::lock_guard<std::mutex> lock(mutex);
    finish_flushes_locked(/*now=*/true);
  }
  drive_until([this] { return closing_.empty() && live_head_ == nullptr; },
              Clock::now() + std::chrono::seconds(2));
  std::lock_guard<std::mutex> lock(mutex);
  for (void* request : closing_) ucp_request_free(request);
  closing_.clear();
  unmap_all_registrations_locked();
  ucp_worker_destroy(cm_worker_);
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  worker_ = nullptr;
  cm_worker_ = nullptr;
  closed_ = true;
  for (const auto& op : live_ops_locked()) {
    if (op->status == OpStatus::pending) fail_locked(*op, "transport: the endpoint was closed");
    untrack(*op);
  }
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

void EndpointState::progress_thread_main() {
  ::pthread_setname_np(::pthread_self(), "ferry-transport");
  // The pool's CPUs, not the one an OpenMP binding gave the thread that made the endpoint: the
  // progress this thread drives while the caller computes would otherwise wait for the caller.
  ferry::detail::use_pool_cpus();
  uint64_t seen_waits = waits_ended.load();
  while (!stopping_) {
    // A waiter drives progress: stay out of its way (and off the mutex) until no wait has run
    // for a whole 2 ms period. Waiters do not wake this thread when they leave; it looks again
    // in 2 ms.
    const uint64_t ended = waits_ended.load(std::memory_order_relaxed);
    if (waiters.load() > 0 || ended != seen_waits) {
      seen_waits = ended;
      std::unique_lock<std::mutex> lock(park_mutex_);
      waiters_done_.wait_for(lock, std::chrono::milliseconds(2),
                             [this] { return stopping_.load(); });
      continue;
    }
    sleep_on_worker(std::chrono::milliseconds(20));
  }
}

// One round of progress, then arm the worker and sleep until it signals, the wake pipe fires or
// `max_sleep` passes. Staged sends (waiting for a device event) shorten the sleep: events do not
// signal the worker.
void EndpointState::sleep_on_worker(std::chrono::microseconds max_sleep) {
  bool staged = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (closed_) return;
    next_cm_progress_ = Clock::time_point{};  // before sleeping, the connection worker too
    progress_locked();
    for (auto& [id, conn] : connections_) staged = staged || !conn->unposted.empty();
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return;     // more to do at once
    if (ucp_worker_arm(cm_worker_) == UCS_ERR_BUSY) return;  // (next round progresses it)
  }
  if (staged)
    max_sleep = std::min<std::chrono::microseconds>(max_sleep, std::chrono::microseconds(200));
  pollfd fds[3] = {{event_fd_, POLLIN, 0}, {cm_event_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
  const timespec ts{static_cast<time_t>(max_sleep.count() / 1000000),
                    static_cast<long>(max_sleep.count() % 1000000) * 1000};
  ppoll(fds, 3, &ts, nullptr);
  if (fds[1].revents != 0) {
    std::lock_guard<std::mutex> lock(mutex);
    next_cm_progress_ = Clock::time_point{};
  }
}

bool EndpointState::cm_busy_locked() const {
  if (!closing_.empty() || !flushing_.empty() || !conn_requests.empty()) return true;
  for (const auto& [id, conn] : connections_) {
    if (conn->phase == Phase::handshaking) return true;
  }
  return false;
}

void EndpointState::progress_locked() {
  if (closed_) return;
  // The clock is read on every 64th call only: on some VMs a read costs more than a round of
  // shared-memory progress.
  bool cm = cm_busy_locked();
  quick_rounds_allowed_ = !cm;
  if (!cm && ((++progress_calls_ & 63) == 0 || next_cm_progress_ == Clock::time_point{})) {
    cm = Clock::now() >= next_cm_progress_;
  }
  if (cm) next_cm_progress_ = Clock::now() + std::chrono::milliseconds(1);
  drain_locked(cm);
  bool deadlines = false;  // one pass over the connections
  for (auto& [id, conn] : connections_) {
    if (!conn->unposted.empty()) post_ready_sends_locked(*conn);
    deadlines = deadlines || conn->gone_since || conn->phase == Phase::handshaking;
  }
  if (deadlines) check_deadlines_locked();
  if (!flushing_.empty()) finish_flushes_locked(/*now=*/false);
  for (auto it = closing_.begin(); it != closing_.end();) {
    if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
      ucp_request_free(*it);
      it = closing_.erase(it);
    } else {
      ++it;
    }
  }
}

// Progresses the data worker (and the connection worker when `cm`) until idle, handling what
// the callbacks queued.
void EndpointState::drain_locked(bool cm) {
  for (int round = 0; round < 64; ++round) {
    // Until the worker is idle, or a completion came (then it is handled before polling more).
    while (ucp_worker_progress(worker_) != 0 && completions.empty()) {
    }
    if (cm) {
      while (ucp_worker_progress(cm_worker_) != 0) {
      }
    }
    if (!dispatch_queued_locked()) break;
  }
}

// Handles what UCX's callbacks queued during progress; false if there was nothing.
bool EndpointState::dispatch_queued_locked() {
  if (completions.empty() && handshake_events.empty() && ep_errors.empty() &&
      conn_requests.empty()) {
    return false;
  }
  auto conns = std::move(conn_requests);
  conn_requests.clear();
  for (auto request : conns) accept_conn_request(request);
  auto events = std::move(handshake_events);
  handshake_events.clear();
  for (const auto& e : events) handle_handshake_event(e);
  // Completions before failures: what arrived before a peer left is delivered. The two vectors
  // trade buffers, so that a round with completions allocates nothing.
  while (!completions.empty()) {
    std::vector<Completion> done = std::move(completions_spare_);
    done.swap(completions);
    for (const auto& c : done) handle_completion(c);
    done.clear();
    completions_spare_ = std::move(done);
  }
  auto errors = std::move(ep_errors);
  ep_errors.clear();
  for (auto [conn, status] : errors) handle_ep_error(*conn, status);
  return true;
}

bool EndpointState::quick_progress_locked() {
  if (closed_ || !quick_rounds_allowed_) return false;
  if (ucp_worker_progress(worker_) == 0) return false;  // idle
  dispatch_queued_locked();  // (a small receive may have finished in its callback)
  return true;
}

void EndpointState::release_request_locked(Operation& op, void* request) {
  if (request != nullptr) {
    if (void** it = std::find(op.requests.begin(), op.requests.end(), request);
        it != op.requests.end()) {
      op.requests.erase(it);
    }
    ucp_request_free(request);  // (UCX allows it from the request's own callback)
  }
  --op.outstanding;
}

void EndpointState::handle_completion(const Completion& c) {
  Operation& op = *c.op;
  release_request_locked(op, c.request);
  const std::shared_ptr<Operation> keep = op.self;  // untrack() below may drop the last owner
  if (op.status == OpStatus::pending) {
    if (c.status != UCS_OK) {
      std::string what = c.status == UCS_ERR_MESSAGE_TRUNCATED
                             ? "a message larger than any tensor header (" +
                                   std::to_string(op.header_capacity) + " bytes)"
                             : std::string(ucs_status_string(c.status));
      fail_locked(op, "transport: " + std::string(op.is_send ? "sending to " : "receiving from ") +
                          label(op.peer) + " (tag " + std::to_string(op.tag) + ") failed: " + what);
    } else if (op.is_send) {
      if (op.outstanding == 0) op.status.store(OpStatus::done, std::memory_order_release);
    } else if (!op.header_received) {
      op.header_received = true;
      try {
        handle_header(op, c.length);
      } catch (const Error& e) {
        fail_locked(op, e.what());
      }
    } else {
      try {
        if (c.length != op.header.payload_bytes) {
          throw TransportError("transport: expected a payload of " +
                               std::to_string(op.header.payload_bytes) + " bytes from " +
                               label(op.peer) + ", got " + std::to_string(c.length));
        }
        finish_recv(op);
      } catch (const Error& e) {
        fail_locked(op, e.what());
      }
    }
  }
  if (op.outstanding == 0 && op.status != OpStatus::pending) untrack(op);
}

void EndpointState::track(const std::shared_ptr<Operation>& op) {
  if (op->self) return;
  op->self = op;
  op->live_prev = nullptr;
  op->live_next = live_head_;
  if (live_head_ != nullptr) live_head_->live_prev = op.get();
  live_head_ = op.get();
}

void EndpointState::untrack(Operation& op) {
  if (!op.self) return;
  if (op.live_prev != nullptr) {
    op.live_prev->live_next = op.live_next;
  } else {
    live_head_ = op.live_next;
  }
  if (op.live_next != nullptr) op.live_next->live_prev = op.live_prev;
  op.live_prev = op.live_next = nullptr;
  const std::shared_ptr<Operation> last = std::move(op.self);  // op may be freed on return
}

std::vector<std::shared_ptr<Operation>> EndpointState::live_ops_locked() const {
  std::vector<std::shared_ptr<Operation>> ops;
  for (Operation* op = live_head_; op != nullptr; op = op->live_next) ops.push_back(op->self);
  return ops;
}

std::unique_ptr<std::byte[]> EndpointState::take_header_buffer_locked() {
  if (header_buffers_.empty()) {
    return std::unique_ptr<std::byte[]>(new std::byte[kMaxHeaderBytes + options.inline_bytes]);
  }
  auto buffer = std::move(header_buffers_.back());
  header_buffers_.pop_back();
  return buffer;
}

void EndpointState::give_header_buffer_locked(std::unique_ptr<std::byte[]> buffer) {
  constexpr size_t kKeptHeaderBuffers = 16;  // enough for a window of receives in flight
  if (buffer && header_buffers_.size() < kKeptHeaderBuffers) {
    header_buffers_.push_back(std::move(buffer));
  }
}

void EndpointState::fail_locked(Operation& op, std::string message) {
  if (op.status != OpStatus::pending) return;
  op.error = std::move(message);
  op.status.store(OpStatus::failed, std::memory_order_release);
}

void EndpointState::cancel_locked(Operation& op, std::string message) {
  fail_locked(op, std::move(message));
  for (void* request : op.requests) ucp_request_cancel(worker_, request);
  if (op.is_send) {
    auto it = connections_.find(op.peer);
    if (it != connections_.end()) {
      std::erase_if(it->second->unposted, [&](const auto& queued) { return queued.get() == &op; });
    }
  }
  if (op.outstanding == 0) untrack(op);
}

void EndpointState::fail_peer_ops_locked(PeerId peer, const std::string& message) {
  for (const auto& op : live_ops_locked()) {
    if (op->peer == peer && op->status == OpStatus::pending) cancel_locked(*op, message);
  }
}

void EndpointState::check_deadlines_locked() {
  std::optional<Clock::time_point> now;  // read only when a connection has a deadline
  const auto clock = [&] {
    if (!now) now = Clock::now();
    return *now;
  };
  for (auto& [id, conn] : connections_) {
    if (conn->gone_since && conn->phase == Phase::admitted &&
        clock() - *conn->gone_since >= kPeerGoneGrace) {
      const std::string failure = conn->failure;
      disconnect_locked(*conn, failure);
    } else if (conn->phase == Phase::handshaking && clock() > conn->handshake_deadline) {
      disconnect_locked(*conn, "the handshake did not finish within " +
                                   std::to_string(options.timeout.count()) + " ms");
    }
  }
}

namespace {
void send_callback(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->state->completions.push_back({op, request, status, 0});
}
void tag_recv_callback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                       void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  const size_t length = info != nullptr ? info->length : 0;
  if (status == UCS_OK && op->state->finish_small_recv_locked(*op, request, length)) return;
  op->state->completions.push_back({op, request, status, length});
}
}  // namespace

void EndpointState::post_tag_send(Operation& op, Connection& conn, const void* data, size_t bytes,
                                  uint64_t tag, ucp_mem_h memh) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  if (memh != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = memh;
  }
  param.cb.send = send_callback;
  param.user_data = &op;
  account_send(op, ucp_tag_send_nbx(conn.data_ep, data, bytes, tag, &param));
}

void EndpointState::post_tag_send_rows(Operation& op, Connection& conn, uint64_t tag) {
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  param.cb.send = send_callback;
  param.user_data = &op;
  param.datatype = ucp_dt_make_iov();
  account_send(op, ucp_tag_send_nbx(conn.data_ep, op.rows.data(), op.rows.size(), tag, &param));
}

void EndpointState::account_send(Operation& op, ucs_status_ptr_t request) {
  if (request == nullptr) return;  // done at once (the caller completes the op when all are)
  ++op.outstanding;
  if (UCS_PTR_IS_ERR(request)) {
    completions.push_back({&op, nullptr, UCS_PTR_STATUS(request), 0});
  } else {
    op.requests.push_back(request);
  }
}

void EndpointState::post_tag_recv(Operation& op, void* data, size_t bytes, uint64_t tag,
                                  ucp_mem_h memh) {
  ucp_request_param_t param{};
  // Always completed through the callback, which carries the received length (UCX 1.13 leaves
  // recv_info unfilled on an immediate completion).
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  if (memh != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = memh;
  }
  param.cb.recv = tag_recv_callback;
  param.user_data = &op;
  op.posting = true;
  ucs_status_ptr_t request = ucp_tag_recv_nbx(worker_, data, bytes, tag, kFullTagMask, &param);
  op.posting = false;
  ++op.outstanding;
  if (UCS_PTR_IS_ERR(request)) {
    completions.push_back({&op, nullptr, UCS_PTR_STATUS(request), 0});
  } else {
    op.requests.push_back(request);
  }
}

void wait_operation(EndpointState& state, Operation& op, std::chrono::milliseconds timeout) {
  // A send that went at once is done before its wait: no lock, no progress.
  if (op.status.load(std::memory_order_acquire) == OpStatus::done) return;
  const bool done =
      state.drive_until([&] { return op.status != OpStatus::pending; }, Clock::now() + timeout);
  if (!done) {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.cancel_locked(op, "transport: timed out after " + std::to_string(timeout.count()) +
                                " ms " + (op.is_send ? "sending to " : "receiving from ") +
                                state.label(op.peer) + " (tag " + std::to_string(op.tag) + ")");
  }
  if (op.status == OpStatus::failed) {
    std::lock_guard<std::mutex> lock(state.mutex);
    throw TransportError(op.error);
  }
}

bool wait_operation_for(EndpointState& state, Operation& op, std::chrono::milliseconds timeout) {
  if (op.status.load(std::memory_order_acquire) == OpStatus::done) return true;
  if (!state.drive_until([&] { return op.status != OpStatus::pending; }, Clock::now() + timeout)) {
    return false;
  }
  if (op.status == OpStatus::failed) {
    std::lock_guard<std::mutex> lock(state.mutex);
    throw TransportError(op.error);
  }
  return true;
}

bool poll_operation(EndpointState& state, Operation& op) {
  if (op.status == OpStatus::pending) {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.progress_locked();
  }
  return op.status != OpStatus::pending;
}

Tensor operation_value(Operation& op) {
  // A receive completed by its expected header leaves the value in its destination.
  return op.value.defined() || !op.into ? op.value : *op.into;
}

std::chrono::milliseconds default_timeout(const EndpointState& state) {
  return state.options.timeout;
}

}  // namespace ferry::transport::detail
