// The ferry serve client (client.h).
#include "ferry/switch/client.h"

#include <algorithm>
#include <limits>

#include "ferry/switch/frame_io.h"
#include "ferry/switch/socket_io.h"

namespace ferry::switch_ {

Client::Client(std::string socket_path, ClientOptions options)
    : socket_path_(std::move(socket_path)), options_(options) {
  connect();
}

Client::Client(uint16_t port, ClientOptions options) : tcp_port_(port), options_(options) {
  connect();
}

Client Client::tcp(uint16_t port, ClientOptions options) { return Client(port, options); }

void Client::connect() {
  fd_ = socket_path_.empty() ? connect_loopback_tcp(tcp_port_, options_.connect_timeout)
                             : connect_unix(socket_path_, options_.connect_timeout);
}

InferResult Client::infer(const std::string& model, const std::vector<NamedTensor>& inputs,
                          std::chrono::milliseconds deadline) {
  std::lock_guard lock(mutex_);
  InferRequest request;
  request.id = next_id_++;
  request.model = model;
  request.deadline_ms = static_cast<uint32_t>(
      std::clamp<int64_t>(deadline.count(), 0, std::numeric_limits<uint32_t>::max()));
  request.inputs = inputs;
  const std::vector<std::byte> frame = encode_infer_request(request, options_.limits);
  if (!fd_.valid()) connect();
  const auto wait = options_.answer_timeout + deadline;
  const auto fail = [&](const std::string& why) -> InferResult {
    fd_.reset();
    throw SwitchError(ErrorCode::internal, "client: " + why);
  };
  // A server that refuses the request (too large, busy) answers and closes while the request is
  // still being sent: then its answer is read all the same, for a short while.
  const bool sent = write_full(fd_.get(), frame, Clock::now() + wait);
  const auto answer_wait = sent ? wait : std::chrono::milliseconds(1000);
  FrameRead answer;
  try {
    answer = read_frame(fd_.get(), options_.limits, Clock::now() + answer_wait, answer_wait, -1);
  } catch (const SwitchError& e) {
    return fail(std::string("the server's answer has a bad header: ") + e.what());
  }
  if (!sent &&
      (answer.status != ReadStatus::ok || answer.header.type != MessageType::error_response)) {
    return fail("sending the request failed (the server closed the connection or timed out)");
  }
  switch (answer.status) {
    case ReadStatus::ok:
      break;
    case ReadStatus::timeout:
      return fail("no answer within " + std::to_string(wait.count()) + " ms");
    default:
      return fail("the server closed the connection before answering");
  }
  if (answer.header.type == MessageType::error_response) {
    ErrorResponse error = decode_error_response(answer.payload, options_.limits);
    // The server closes the connection after errors about framing; reconnect next time then.
    if (error.code == ErrorCode::bad_frame || error.code == ErrorCode::too_large ||
        error.code == ErrorCode::unsupported_version || error.code == ErrorCode::busy ||
        error.code == ErrorCode::shutting_down) {
      fd_.reset();
    }
    throw SwitchError(error.code, error_code_name(error.code) + ": " + error.message);
  }
  if (answer.header.type != MessageType::infer_response || answer.header.request_id != request.id) {
    return fail("expected the answer to request " + std::to_string(request.id) +
                ", but got message type " + std::to_string(static_cast<int>(answer.header.type)) +
                " for request " + std::to_string(answer.header.request_id));
  }
  try {
    return decode_infer_response(answer.payload, options_.limits);
  } catch (const SwitchError& e) {
    return fail(std::string("the server's answer is malformed: ") + e.what());
  }
}

}  // namespace ferry::switch_
