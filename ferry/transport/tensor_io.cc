// Tensors over a transport connection: what a send puts on the wire (a header, the payload inline
// or as a second message), staging of device tensors through pinned memory in stream order, and
// where a received payload lands (see endpoint_state.h, docs/transport.md).
#include <algorithm>
#include <cstring>

#include "ferry/device/guard.h"
#include "ferry/iter/memory_overlap.h"
#include "ferry/ops/factories.h"
#include "ferry/transport/endpoint_state.h"

namespace ferry::transport::detail {
namespace {

// The largest payload the small-tensor path (send_at_once) tries: with a header of one to four
// dimensions (48-96 bytes), about what UCX's transports send inline; a larger message fails the
// attempt at once and goes the ordinary way.
constexpr uint64_t kAtOnceBytes = 64;

std::span<const std::byte> bytes_of(const Tensor& t, uint64_t nbytes) {
  return {static_cast<const std::byte*>(t.data_ptr()), static_cast<size_t>(nbytes)};
}

// The layout the bytes travel in: the tensor's own when it is dense (any order of dimensions),
// else contiguous.
Tensor dense_like(const Tensor& t, TensorOptions options) {
  if (t.is_non_overlapping_and_dense()) return empty_strided(t.sizes(), t.strides(), options);
  return empty(t.sizes(), options);
}

bool same_layout(const Tensor& t, const TensorHeader& h) {
  if (t.numel() <= 1) return true;
  for (size_t d = 0; d < h.sizes.size(); ++d) {
    if (h.sizes[d] != 1 && t.stride(static_cast<int64_t>(d)) != h.strides[d]) return false;
  }
  return true;
}

// `t`'s bytes in C order as rows of its innermost dimensions (those that are contiguous
// together), when each row holds at least `min_row_bytes` and there are at most kMaxSendRows;
// else nothing.
std::vector<ucp_dt_iov_t> rows_of(const Tensor& t, size_t min_row_bytes) {
  if (min_row_bytes == 0 || t.numel() == 0) return {};
  const int64_t item = static_cast<int64_t>(t.element_size());
  // Merge dimensions from the innermost while they are contiguous together.
  int64_t d = t.dim() - 1;
  while (d >= 0 && t.size(d) == 1) --d;
  if (d < 0 || t.stride(d) != 1) return {};
  int64_t row = t.size(d);
  for (--d; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) != row) break;
    row *= t.size(d);
  }
  const int64_t outer_dims = d + 1;
  const size_t row_bytes = static_cast<size_t>(row * item);
  const size_t count = static_cast<size_t>(t.numel() / row);
  if (row_bytes < min_row_bytes || count > kMaxSendRows) return {};
  std::vector<ucp_dt_iov_t> rows(count);
  std::vector<int64_t> index(static_cast<size_t>(outer_dims), 0);
  const auto* base = static_cast<const char*>(t.data_ptr());
  for (size_t r = 0; r < count; ++r) {
    int64_t offset = 0;
    for (int64_t k = 0; k < outer_dims; ++k) offset += index[static_cast<size_t>(k)] * t.stride(k);
    rows[r].buffer = const_cast<char*>(base + offset * item);
    rows[r].length = row_bytes;
    for (int64_t k = outer_dims - 1; k >= 0; --k) {  // the next outer index, last fastest
      if (++index[static_cast<size_t>(k)] < t.size(k)) break;
      index[static_cast<size_t>(k)] = 0;
    }
  }
  return rows;
}

}  // namespace

// Prepares the payload of a send outside the endpoint's lock (it may run a copy): a CPU tensor is
// sent from its own memory when dense, as a list of its rows when they are long enough, else
// packed by the copy engine; a device tensor is copied into pinned memory on its device's current
// stream, and the send waits for that copy's event.
void prepare_send(Operation& op, const Tensor& tensor, const EndpointOptions& options,
                  bool rows_allowed) {
  FERRY_CHECK_AS(TransportError, tensor.defined(), "transport: expected a tensor to send, got an ",
                 "undefined one");
  if (tensor.device().is_cpu()) {
    if (tensor.is_non_overlapping_and_dense()) {
      op.payload = tensor;
    } else {
      const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
      if (rows_allowed && bytes > options.inline_bytes) {
        op.rows = rows_of(tensor, options.row_send_min_bytes);
      }
      op.payload = op.rows.empty() ? tensor.contiguous() : tensor;
    }
  } else {
    op.payload = dense_like(tensor, TensorOptions(tensor.scalar_type()).pinned_memory(true));
    op.payload.copy_(tensor, /*non_blocking=*/true);
    op.staged.emplace();
    op.staged->record(current_stream(tensor.device()));
    op.source = tensor;  // alive until the copy from it is done
  }
  op.header.dtype = op.payload.scalar_type();
  op.header.sizes.assign(op.payload.sizes().begin(), op.payload.sizes().end());
  if (op.rows.empty()) {
    op.header.strides.assign(op.payload.strides().begin(), op.payload.strides().end());
  } else {  // the rows arrive one after another: contiguous
    const auto strides = contiguous_strides(op.payload.sizes());
    op.header.strides.assign(strides.begin(), strides.end());
  }
  FERRY_CHECK_AS(TransportError, op.header.sizes.size() <= static_cast<size_t>(kMaxWireDims),
                 "transport: tensors of at most ", kMaxWireDims, " dimensions can be sent, got ",
                 op.header.sizes.size());
  op.header.payload_bytes = static_cast<uint64_t>(op.payload.numel()) * op.payload.element_size();
}

// Posts queued sends in order while the head's payload is ready (no copy pending).
void EndpointState::post_ready_sends_locked(Connection& conn) {
  while (!conn.unposted.empty()) {
    auto op = conn.unposted.front();
    if (op->staged && !op->staged->query()) return;
    conn.unposted.pop_front();
    post_send_locked(op, conn);
  }
}

// Puts one send whose payload is ready on the wire: its header (with the payload inline when
// small), then the payload as a second message or as a list of rows.
void EndpointState::post_send_locked(const std::shared_ptr<Operation>& op, Connection& conn) {
  op->staged.reset();
  op->source = Tensor();
  TensorHeader& h = op->header;
  h.payload_inline = h.payload_bytes <= options.inline_bytes;
  if (h.payload_inline) {
    encode_tensor_header(h, bytes_of(op->payload, h.payload_bytes), message_scratch);
    op->payload = Tensor();  // its bytes are in the message
  } else {
    encode_tensor_header(h, {}, message_scratch);
  }
  const int before = op->outstanding;
  post_tag_send(*op, conn, message_scratch.data(), message_scratch.size(),
                make_tag(conn.remote_id, op->tag, MessageKind::tensor_header));
  // UCX keeps a pointer to the message until the send completes: the operation keeps it (the
  // bytes do not move with the vector). A message sent at once leaves the buffer for the next.
  if (op->outstanding != before) op->message = std::exchange(message_scratch, {});
  if (!h.payload_inline && !op->rows.empty()) {
    post_tag_send_rows(*op, conn, make_tag(conn.remote_id, h.seq, MessageKind::tensor_payload));
  } else if (!h.payload_inline) {
    post_tag_send(*op, conn, op->payload.data_ptr(), h.payload_bytes,
                  make_tag(conn.remote_id, h.seq, MessageKind::tensor_payload),
                  registration_locked(op->payload));
  }
  if (op->outstanding == 0 && op->status == OpStatus::pending) {
    // Every message went at once (an inline header on shared memory): done, with no completion
    // to wait for and nothing for UCX to hold.
    op->status.store(OpStatus::done, std::memory_order_release);
    op->payload = Tensor();
    op->rows.clear();
    untrack(*op);
  } else {
    track(op);  // UCX's callbacks refer to it until the last completes
  }
}

// The small-tensor path of a receive: when the header message is the one `op` expects (its
// destination's own, payload inline), lands the payload and completes `op`.
bool EndpointState::take_expected_header_locked(Operation& op, size_t length) {
  const auto payload = match_expected_header({op.header_buffer.get(), length}, op.expected);
  if (!payload) return false;
  if (!payload->empty()) std::memcpy(op.into->data_ptr(), payload->data(), payload->size());
  give_header_buffer_locked(std::move(op.header_buffer));
  op.status.store(OpStatus::done, std::memory_order_release);
  ++recv_stats.expected_header;
  return true;
}

bool EndpointState::finish_small_recv_locked(Operation& op, void* request, size_t length) {
  // Not while ucp_tag_recv_nbx is still posting the request (a message that had arrived already
  // completes inside it, before post_tag_recv has counted and recorded the request).
  if (op.posting || op.header_received || op.status != OpStatus::pending) return false;
  if (!take_expected_header_locked(op, length)) return false;
  op.header_received = true;
  release_request_locked(op, request);
  ++recv_stats.in_callback;
  if (op.outstanding == 0) untrack(op);  // may free op
  return true;
}

// The header of a receive arrived: validate it, decide where the payload lands (the destination
// itself when it is on the CPU in the sent layout, else a pinned or plain landing tensor), and
// take the inline payload or post the payload's receive.
void EndpointState::handle_header(Operation& op, size_t length) {
  if (take_expected_header_locked(op, length)) return;
  const std::span<const std::byte> message(op.header_buffer.get(), length);
  const auto from = [&] { return label(op.peer); };  // built only for an error's message
  DecodedHeader decoded = decode_tensor_header(message, options.max_message_bytes, from);
  op.header = std::move(decoded.header);
  const TensorHeader& h = op.header;
  const TensorOptions sent(h.dtype);
  if (op.into) {
    const Tensor& into = *op.into;
    FERRY_CHECK_AS(TransportError, into.scalar_type() == h.dtype, "transport: expected ",
                   dtype_name(into.scalar_type()), " from ", from(), " (tag ", op.tag, "), got ",
                   dtype_name(h.dtype));
    FERRY_CHECK_AS(TransportError, into.sizes() == IntArrayRef(h.sizes),
                   "transport: expected sizes ", into.sizes(), " from ", from(), " (tag ", op.tag,
                   "), got ", IntArrayRef(h.sizes));
    if (into.device().is_cpu() && same_layout(into, h)) {
      op.payload = into;
    } else {
      op.payload = empty_strided(h.sizes, h.strides, sent.pinned_memory(!into.device().is_cpu()));
    }
  } else {
    const Device device = op.options.device();
    if (device.is_cpu()) {
      op.payload =
          empty_strided(h.sizes, h.strides, sent.pinned_memory(op.options.pinned_memory()));
    } else {
      op.payload = empty_strided(h.sizes, h.strides, sent.pinned_memory(true));
    }
  }
  if (h.payload_inline) {
    if (h.payload_bytes > 0) {
      std::memcpy(op.payload.data_ptr(), decoded.inline_payload.data(), h.payload_bytes);
    }
    give_header_buffer_locked(std::move(op.header_buffer));
    finish_recv(op);
    return;
  }
  give_header_buffer_locked(std::move(op.header_buffer));
  post_tag_recv(op, op.payload.data_ptr(), h.payload_bytes,
                make_tag(op.peer, h.seq, MessageKind::tensor_payload),
                registration_locked(op.payload));
}

// The payload is in op.payload: move it to its destination (on the consumer's stream for a
// device) and complete the receive.
void EndpointState::finish_recv(Operation& op) {
  if (op.into) {
    Tensor into = *op.into;
    if (op.payload.data_ptr() != into.data_ptr() || !into.device().is_cpu()) {
      if (op.consumer) {
        StreamGuard guard(*op.consumer);
        into.copy_(op.payload, /*non_blocking=*/true);
      } else {
        into.copy_(op.payload);
      }
    }
    op.value = into;
  } else if (op.consumer) {
    StreamGuard guard(*op.consumer);
    const ScalarType dtype = op.options.dtype_opt().value_or(op.header.dtype);
    Tensor out = empty_strided(op.header.sizes, op.header.strides,
                               TensorOptions(dtype).device(op.consumer->device()));
    out.copy_(op.payload, /*non_blocking=*/true);
    op.value = out;
  } else {
    const ScalarType dtype = op.options.dtype_opt().value_or(op.header.dtype);
    op.value = dtype != op.header.dtype ? op.payload.to(dtype) : op.payload;
  }
  op.payload = Tensor();
  op.status.store(OpStatus::done, std::memory_order_release);
}

// A new send or receive with `peer` under `tag` (checked).
std::shared_ptr<Operation> new_operation(EndpointState& state, bool is_send, PeerId peer,
                                         uint64_t tag) {
  FERRY_CHECK_AS(TransportError, tag <= kMaxUserTag, "transport: expected a tag below 2^",
                 kFieldBits, ", got ", tag);
  auto op = std::make_shared<Operation>();
  op->state = &state;
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  return op;
}

// Every send that went at once shares this operation: done, holding nothing.
const std::shared_ptr<Operation>& sent_at_once() {
  static const std::shared_ptr<Operation> done = [] {
    auto op = std::make_shared<Operation>();
    op->is_send = true;
    op->status = OpStatus::done;
    return op;
  }();
  return done;
}

// The small-tensor path: a dense CPU tensor small enough to travel inside its header, to a peer
// with no send queued ahead, goes in one UCX call that must complete at once (UCX copies it), with
// no operation of its own. False when UCX could not take it at once: the caller sends it the
// ordinary way.
bool send_at_once(EndpointState& state, const Tensor& tensor, PeerId peer, uint64_t tag) {
  TensorHeader h;
  h.dtype = tensor.scalar_type();
  h.sizes = tensor.sizes();
  h.strides = tensor.strides();
  h.payload_bytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
  h.payload_inline = true;
  std::lock_guard<std::mutex> lock(state.mutex);
  Connection& conn = state.admitted(peer);
  if (!conn.unposted.empty()) return false;  // in order behind a staged send
  h.seq = conn.next_seq;
  encode_tensor_header(h, bytes_of(tensor, h.payload_bytes), state.message_scratch);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
  const ucs_status_ptr_t status =
      ucp_tag_send_nbx(conn.data_ep, state.message_scratch.data(), state.message_scratch.size(),
                       make_tag(conn.remote_id, tag, MessageKind::tensor_header), &param);
  // UCS_ERR_NO_RESOURCE: UCX could not send it inline (a header and payload past the transport's
  // inline limit, 93 bytes on shared memory; a connection still wiring up; a full queue), or an
  // error, which the ordinary path reports. Nothing was sent.
  if (status != nullptr) return false;
  ++conn.next_seq;
  ++state.send_stats.own_memory;
  ++state.send_stats.at_once;
  return true;
}

std::shared_ptr<Operation> start_send(EndpointState& state, const Tensor& tensor, PeerId peer,
                                      uint64_t tag) {
  FERRY_CHECK_AS(TransportError, tag <= kMaxUserTag, "transport: expected a tag below 2^",
                 kFieldBits, ", got ", tag);
  if (tensor.defined() && tensor.device().is_cpu() && tensor.dim() <= kMaxWireDims) {
    const uint64_t bytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    if (bytes <= std::min<uint64_t>(kAtOnceBytes, state.options.inline_bytes) &&
        tensor.is_non_overlapping_and_dense() && send_at_once(state, tensor, peer, tag)) {
      return sent_at_once();
    }
  }
  auto op = new_operation(state, /*is_send=*/true, peer, tag);
  bool rows_allowed = false;
  if (tensor.defined() && tensor.device().is_cpu() && state.options.row_send_min_bytes > 0 &&
      !tensor.is_non_overlapping_and_dense()) {
    std::lock_guard<std::mutex> lock(state.mutex);
    rows_allowed = state.rows_pay_locked(state.admitted(peer));
  }
  prepare_send(*op, tensor, state.options, rows_allowed);
  std::lock_guard<std::mutex> lock(state.mutex);
  SendStats& counts = state.send_stats;
  ++(!tensor.device().is_cpu()                     ? counts.staged
     : !op->rows.empty()                           ? counts.as_rows
     : op->payload.data_ptr() == tensor.data_ptr() ? counts.own_memory
                                                   : counts.packed);
  Connection& conn = state.admitted(peer);
  op->header.seq = conn.next_seq++;
  if (conn.unposted.empty() && !op->staged) {
    state.post_send_locked(op, conn);  // nothing ahead of it: straight onto the wire
  } else {
    state.track(op);
    conn.unposted.push_back(op);
    state.post_ready_sends_locked(conn);
  }
  // No progress here: UCX puts the message (or a rendezvous's announcement) on the wire inside
  // ucp_tag_send_nbx, and the wait or the progress thread takes it from there. A round per send
  // cost a poll of the TCP socket each time, which read the receiver's replies one by one instead
  // of many per poll (docs/transport.md, "Bandwidth over TCP").
  return op;
}

std::shared_ptr<Operation> start_recv(EndpointState& state, std::optional<Tensor> into,
                                      TensorOptions options, PeerId peer, uint64_t tag) {
  auto op = new_operation(state, /*is_send=*/false, peer, tag);
  const Device device = into ? into->device() : options.device();
  if (!device.is_cpu()) op->consumer = current_stream(device);
  if (into) {
    FERRY_CHECK_AS(TransportError, into->defined(), "transport: expected a tensor to receive ",
                   "into, got an undefined one");
    // Any strides whose elements do not overlap: a destination in another layout than the
    // sent one takes the payload through a landing tensor and a copy (finish_recv).
    FERRY_CHECK_AS(TransportError,
                   into->numel() <= 1 || has_internal_overlap(*into) == MemOverlap::No,
                   "transport: expected a destination whose elements do not overlap, got sizes ",
                   into->sizes(), " and strides ", into->strides());
  }
  if (into && device.is_cpu() && into->is_non_overlapping_and_dense()) {
    const uint64_t bytes = static_cast<uint64_t>(into->numel()) * into->element_size();
    if (bytes <= state.options.inline_bytes) {
      op->expected = expected_header(into->scalar_type(), into->sizes(), into->strides(), bytes);
    }
  }
  op->into = std::move(into);
  op->options = options;
  op->header_capacity = kMaxHeaderBytes + state.options.inline_bytes;
  std::lock_guard<std::mutex> lock(state.mutex);
  state.receivable(peer, make_tag(peer, tag, MessageKind::tensor_header));
  op->header_buffer = state.take_header_buffer_locked();  // not zeroed: UCX fills it
  state.track(op);
  // No progress here: UCX matches the receive against what already arrived when it is posted,
  // and the wait (or the progress thread) delivers it.
  state.post_tag_recv(*op, op->header_buffer.get(), op->header_capacity,
                      make_tag(peer, tag, MessageKind::tensor_header));
  return op;
}

}  // namespace ferry::transport::detail
