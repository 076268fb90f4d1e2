// Tensors over a transport connection: what a send puts on the wire (a header, the payload inline
// or as a second message), staging of device tensors through pinned memory in stream order, and
// where a received payload lands (see endpoint_state.h, docs/transport.md).
#include <cstring>

#include "ferry/device/guard.h"
#include "ferry/ops/factories.h"
#include "ferry/transport/endpoint_state.h"

namespace ferry::transport::detail {
namespace {

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
    op->staged.reset();
    op->source = Tensor();
    TensorHeader& h = op->header;
    h.payload_inline = h.payload_bytes <= options.inline_bytes;
    if (h.payload_inline) {
      op->message = encode_tensor_header(h, bytes_of(op->payload, h.payload_bytes));
      op->payload = Tensor();  // its bytes are in the message
    } else {
      op->message = encode_tensor_header(h);
    }
    post_tag_send(*op, conn, op->message.data(), op->message.size(),
                  make_tag(conn.remote_id, op->tag, MessageKind::tensor_header));
    if (!h.payload_inline && !op->rows.empty()) {
      post_tag_send_rows(*op, conn, make_tag(conn.remote_id, h.seq, MessageKind::tensor_payload));
    } else if (!h.payload_inline) {
      post_tag_send(*op, conn, op->payload.data_ptr(), h.payload_bytes,
                    make_tag(conn.remote_id, h.seq, MessageKind::tensor_payload),
                    registration_locked(op->payload));
    }
    // Every message went at once (an inline header on shared memory): done, no completion to
    // wait for.
    if (op->outstanding == 0 && op->status == OpStatus::pending) {
      op->status = OpStatus::done;
      op->payload = Tensor();
      op->rows.clear();
      live_.erase(op.get());
    }
  }
}

// The header of a receive arrived: validate it, decide where the payload lands (the destination
// itself when it is on the CPU in the sent layout, else a pinned or plain landing tensor), and
// take the inline payload or post the payload's receive.
void EndpointState::handle_header(Operation& op, size_t length) {
  const auto from = [&] { return label(op.peer); };  // built only for an error's message
  const DecodedHeader decoded = decode_tensor_header(
      std::span<const std::byte>(op.header_buffer.get(), length), options.max_message_bytes, from);
  op.header = decoded.header;
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
    op.header_buffer.reset();
    finish_recv(op);
    return;
  }
  op.header_buffer.reset();
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
  op.status = OpStatus::done;
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

std::shared_ptr<Operation> start_send(EndpointState& state, const Tensor& tensor, PeerId peer,
                                      uint64_t tag) {
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
  state.track(op);
  conn.unposted.push_back(op);
  state.post_ready_sends_locked(conn);
  state.progress_locked();
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
    FERRY_CHECK_AS(TransportError, into->is_non_overlapping_and_dense() || into->numel() <= 1,
                   "transport: expected a destination whose elements do not overlap, got strides ",
                   into->strides());
  }
  op->into = std::move(into);
  op->options = options;
  op->header_capacity = kMaxHeaderBytes + state.options.inline_bytes;
  op->header_buffer.reset(new std::byte[op->header_capacity]);  // not zeroed: UCX fills it
  std::lock_guard<std::mutex> lock(state.mutex);
  state.receivable(peer, make_tag(peer, tag, MessageKind::tensor_header));
  state.track(op);
  state.post_tag_recv(*op, op->header_buffer.get(), op->header_capacity,
                      make_tag(peer, tag, MessageKind::tensor_header));
  state.progress_locked();
  return op;
}

}  // namespace ferry::transport::detail
