// The request/response vocabulary of ferry serve, shared by the protocol, the server, the client
// and request handlers: named tensors, timings, the error codes and SwitchError, the one error
// type that carries a code across the wire. Tensors here are CPU and contiguous once decoded.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/tensor.h"

namespace ferry::switch_ {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct Timings {
  double queue_ms = 0, transfer_ms = 0, compute_ms = 0;
};

struct InferRequest {
  uint64_t id = 0;
  std::string model;
  uint32_t deadline_ms = 0;  // 0: no deadline
  std::vector<NamedTensor> inputs;
  // When the server had the whole request (set by the server, not sent on the wire).
  std::chrono::steady_clock::time_point received{};
};

struct InferResult {
  std::vector<NamedTensor> outputs;
  Timings timings;
};

// The codes of an error response. Values are part of the wire format: append, never renumber.
enum class ErrorCode : uint16_t {
  bad_frame = 1,
  unsupported_version = 2,
  too_large = 3,
  unknown_model = 4,
  bad_input = 5,
  deadline_exceeded = 6,
  internal = 7,
  shutting_down = 8,
  busy = 9,        // the server is at its connection limit
  preempted = 10,  // between a worker and its controller only: the run was stopped between layers
};
inline constexpr uint16_t kMaxErrorCode = 10;

// "bad_frame", "unknown_model", ...; "code <n>" for a value outside the enum.
std::string error_code_name(ErrorCode code);

// An error with a protocol code: raised by the decoder, by handlers (the server answers with the
// code and message) and by the client (carrying the server's code and message).
class SwitchError : public Error {
 public:
  SwitchError(ErrorCode code, const std::string& message) : Error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// What a handler's exception answers: a SwitchError keeps its code; ShapeError, DTypeError and
// IndexError are bad_input; anything else is internal. With the exception's message.
std::pair<ErrorCode, std::string> classify_error(const std::exception_ptr& error);

// Milliseconds from `a` to `b`, for timings.
inline double ms_between(std::chrono::steady_clock::time_point a,
                         std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Raises SwitchError(deadline_exceeded): `request` waited for a device from its arrival to `now`,
// past its deadline.
[[noreturn]] void raise_deadline_before_start(const InferRequest& request,
                                              std::chrono::steady_clock::time_point now);

// Raises SwitchError(unknown_model) naming `model` and the models a server has.
[[noreturn]] void raise_unknown_model(const std::string& model,
                                      const std::vector<std::string>& known);

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // Runs one request; may be called from several threads at once. Raises ferry::Error (a
  // SwitchError keeps its code; ShapeError, DTypeError and IndexError answer bad_input; any
  // other error answers internal).
  virtual InferResult handle(const InferRequest& request) = 0;
};

}  // namespace ferry::switch_
