// The wire protocol's encoders and decoders (protocol.h). A Reader never reads past its span and
// raises SwitchError(bad_frame) naming what it needed and what was left.
#include "ferry/switch/protocol.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include "ferry/ops/factories.h"

namespace ferry::switch_ {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the protocol's encoders assume a little-endian host");

[[noreturn]] void fail(ErrorCode code, const std::string& message) {
  throw SwitchError(code, message);
}

class Writer {
 public:
  void u8(uint8_t v) { raw(&v, 1); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    out.insert(out.end(), p, p + n);
  }
  std::vector<std::byte> out;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - pos_; }
  void need(size_t n, const char* what) const {
    if (n > left()) {
      fail(ErrorCode::bad_frame,
           detail::str_cat("truncated payload: expected ", n, " more bytes for ", what, ", but ",
                           left(), " are left"));
    }
  }
  template <typename T>
  T value(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::span<const std::byte> take(size_t n, const char* what) {
    need(n, what);
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  std::string string(size_t n, const char* what) {
    auto s = take(n, what);
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  }
  void finish(const char* what) const {
    if (left() != 0) {
      fail(ErrorCode::bad_frame,
           detail::str_cat(what, ": expected the payload to end, but ", left(), " bytes follow"));
    }
  }

 private:
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
};

constexpr std::array<ScalarType, 14> kDtypeByCode = {
    kBool,     kUInt8,   kInt8,    kInt16,     kInt32,      kInt64,         kFloat16,
    kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128, kFloat8_e4m3fn, kFloat8_e5m2};

void check_name(std::string_view name, const Limits& limits, const char* what) {
  // The wire has 16 bits for a name's length, whatever the limit says.
  const size_t limit = std::min<size_t>(limits.max_name_bytes, 0xFFFF);
  if (name.size() > limit) {
    fail(ErrorCode::bad_input, detail::str_cat(what, " name: expected at most ", limit,
                                               " bytes, but it has ", name.size()));
  }
}

void write_tensors(Writer& w, const std::vector<NamedTensor>& tensors, const Limits& limits) {
  if (tensors.size() > limits.max_tensors) {
    fail(ErrorCode::bad_input, detail::str_cat("expected at most ", limits.max_tensors,
                                               " tensors, but got ", tensors.size()));
  }
  w.u32(static_cast<uint32_t>(tensors.size()));
  for (const NamedTensor& named : tensors) {
    check_name(named.name, limits, "tensor");
    if (!named.tensor.defined()) {
      fail(ErrorCode::bad_input,
           detail::str_cat("tensor '", named.name, "': expected a defined tensor"));
    }
    // The wire has 8 bits for a rank.
    const int64_t max_rank = std::min<int64_t>(limits.max_rank, 0xFF);
    if (named.tensor.dim() > max_rank) {
      fail(ErrorCode::bad_input,
           detail::str_cat("tensor '", named.name, "': expected rank at most ", max_rank,
                           ", but it has ", named.tensor.dim()));
    }
    Tensor t = named.tensor.is_cpu() ? named.tensor : named.tensor.cpu();
    t = t.contiguous();
    w.u16(static_cast<uint16_t>(named.name.size()));
    w.raw(named.name.data(), named.name.size());
    w.u8(dtype_code(t.dtype()));
    w.u8(static_cast<uint8_t>(t.dim()));
    for (int64_t d : t.sizes()) w.i64(d);
    w.u64(t.nbytes());
    if (t.nbytes() > 0) w.raw(t.const_data_ptr(), t.nbytes());
  }
}

std::vector<NamedTensor> read_tensors(Reader& r, const Limits& limits) {
  const uint32_t count = r.value<uint32_t>("the tensor count");
  if (count > limits.max_tensors) {
    fail(ErrorCode::too_large, detail::str_cat("expected at most ", limits.max_tensors,
                                               " tensors, but the frame declares ", count));
  }
  std::vector<NamedTensor> tensors;
  for (uint32_t i = 0; i < count; ++i) {
    const uint16_t name_bytes = r.value<uint16_t>("a tensor name length");
    if (name_bytes > limits.max_name_bytes) {
      fail(ErrorCode::too_large,
           detail::str_cat("tensor ", i, ": expected a name of at most ", limits.max_name_bytes,
                           " bytes, but the frame declares ", name_bytes));
    }
    std::string name = r.string(name_bytes, "a tensor name");
    const ScalarType dtype = dtype_from_code(r.value<uint8_t>("a dtype code"));
    const uint8_t rank = r.value<uint8_t>("a rank");
    if (rank > limits.max_rank) {
      fail(ErrorCode::too_large,
           detail::str_cat("tensor '", name, "': expected rank at most ", limits.max_rank,
                           ", but the frame declares ", static_cast<int>(rank)));
    }
    std::vector<int64_t> shape(rank);
    uint64_t numel = 1;
    for (uint8_t d = 0; d < rank; ++d) {
      shape[d] = r.value<int64_t>("a dimension");
      if (shape[d] < 0) {
        fail(ErrorCode::bad_frame,
             detail::str_cat("tensor '", name, "': dimension ", static_cast<int>(d),
                             " expected >= 0, but it is ", shape[d]));
      }
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(shape[d]), &numel)) {
        fail(ErrorCode::too_large,
             detail::str_cat("tensor '", name, "': its shape's element count overflows"));
      }
    }
    uint64_t expected_bytes = 0;
    if (__builtin_mul_overflow(numel, uint64_t{element_size(dtype)}, &expected_bytes) ||
        expected_bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(ErrorCode::too_large, detail::str_cat("tensor '", name, "': its byte count overflows"));
    }
    const uint64_t byte_count = r.value<uint64_t>("a byte count");
    if (byte_count != expected_bytes) {
      fail(ErrorCode::bad_frame,
           detail::str_cat("tensor '", name, "': expected ", expected_bytes, " bytes (", numel,
                           " elements of ", dtype_name(dtype), "), but the frame declares ",
                           byte_count));
    }
    auto data = r.take(byte_count, "tensor data");
    if (dtype == kBool) {
      for (size_t k = 0; k < data.size(); ++k) {
        if (static_cast<uint8_t>(data[k]) > 1) {
          fail(ErrorCode::bad_frame,
               detail::str_cat("tensor '", name, "': bool element ", k,
                               " expected 0 or 1, but it is ", static_cast<int>(data[k])));
        }
      }
    }
    Tensor t = empty(shape, TensorOptions(dtype));
    if (byte_count > 0) std::memcpy(t.data_ptr(), data.data(), byte_count);
    tensors.push_back(NamedTensor{std::move(name), std::move(t)});
  }
  return tensors;
}

std::vector<std::byte> frame(MessageType type, uint64_t request_id, Writer&& payload,
                             const Limits& limits) {
  const uint64_t total = kHeaderBytes + payload.out.size();
  if (total > limits.max_frame_bytes) {
    fail(ErrorCode::too_large,
         detail::str_cat("expected a frame of at most ", limits.max_frame_bytes,
                         " bytes, but it has ", total));
  }
  std::vector<std::byte> out(kHeaderBytes);
  FrameHeader header;
  header.type = type;
  header.request_id = request_id;
  header.payload_bytes = payload.out.size();
  encode_header(header, std::span<std::byte, kHeaderBytes>(out.data(), kHeaderBytes));
  out.insert(out.end(), payload.out.begin(), payload.out.end());
  return out;
}

}  // namespace

std::pair<ErrorCode, std::string> classify_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const SwitchError& e) {
    return {e.code(), e.what()};
  } catch (const ShapeError& e) {
    return {ErrorCode::bad_input, e.what()};
  } catch (const DTypeError& e) {
    return {ErrorCode::bad_input, e.what()};
  } catch (const IndexError& e) {
    return {ErrorCode::bad_input, e.what()};
  } catch (const std::exception& e) {
    return {ErrorCode::internal, e.what()};
  } catch (...) {
    return {ErrorCode::internal, "unknown exception"};
  }
}

void raise_deadline_before_start(const InferRequest& request,
                                 std::chrono::steady_clock::time_point now) {
  throw SwitchError(ErrorCode::deadline_exceeded,
                    detail::str_cat("expected to start within ", request.deadline_ms,
                                    " ms, but model '", request.model, "' waited for a device for ",
                                    ms_between(request.received, now), " ms"));
}

void raise_unknown_model(const std::string& model, const std::vector<std::string>& known) {
  std::string list;
  for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
  throw SwitchError(ErrorCode::unknown_model,
                    "unknown model '" + model + "' (this server has: " + list + ")");
}

std::string error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::bad_frame:
      return "bad_frame";
    case ErrorCode::unsupported_version:
      return "unsupported_version";
    case ErrorCode::too_large:
      return "too_large";
    case ErrorCode::unknown_model:
      return "unknown_model";
    case ErrorCode::bad_input:
      return "bad_input";
    case ErrorCode::deadline_exceeded:
      return "deadline_exceeded";
    case ErrorCode::internal:
      return "internal";
    case ErrorCode::shutting_down:
      return "shutting_down";
    case ErrorCode::busy:
      return "busy";
    case ErrorCode::preempted:
      return "preempted";
  }
  return detail::str_cat("code ", static_cast<unsigned>(code));
}

uint8_t dtype_code(ScalarType dtype) {
  for (size_t i = 0; i < kDtypeByCode.size(); ++i) {
    if (kDtypeByCode[i] == dtype) return static_cast<uint8_t>(i + 1);
  }
  fail(ErrorCode::bad_input, detail::str_cat("no wire code for dtype ", dtype_name(dtype)));
}

ScalarType dtype_from_code(uint8_t code) {
  if (code == 0 || code > kDtypeByCode.size()) {
    fail(ErrorCode::bad_frame,
         detail::str_cat("expected a dtype code from 1 to ", kDtypeByCode.size(), ", but got ",
                         static_cast<int>(code)));
  }
  return kDtypeByCode[code - 1];
}

void encode_header(const FrameHeader& header, std::span<std::byte, kHeaderBytes> out) {
  Writer w;
  w.u32(header.magic);
  w.u16(header.version);
  w.u16(static_cast<uint16_t>(header.type));
  w.u64(header.request_id);
  w.u64(header.payload_bytes);
  std::memcpy(out.data(), w.out.data(), kHeaderBytes);
}

FrameHeader decode_header(std::span<const std::byte> bytes, const Limits& limits) {
  if (bytes.size() < kHeaderBytes) {
    fail(ErrorCode::bad_frame, detail::str_cat("truncated header: expected ", kHeaderBytes,
                                               " bytes, but got ", bytes.size()));
  }
  Reader r(bytes.first(kHeaderBytes));
  FrameHeader h;
  h.magic = r.value<uint32_t>("the magic");
  if (h.magic != kMagic) {
    fail(ErrorCode::bad_frame,
         detail::str_cat("expected the magic 0x", std::hex, kMagic, ", but got 0x", h.magic));
  }
  h.version = r.value<uint16_t>("the version");
  if (h.version != kProtocolVersion) {
    fail(ErrorCode::unsupported_version,
         detail::str_cat("expected protocol version ", kProtocolVersion, ", but got ", h.version));
  }
  const uint16_t type = r.value<uint16_t>("the message type");
  if (type < 1 || type > 3) {
    fail(ErrorCode::bad_frame,
         detail::str_cat("expected a message type from 1 to 3, but got ", type));
  }
  h.type = static_cast<MessageType>(type);
  h.request_id = r.value<uint64_t>("the request id");
  h.payload_bytes = r.value<uint64_t>("the payload length");
  if (h.payload_bytes >
      limits.max_frame_bytes - std::min<uint64_t>(limits.max_frame_bytes, kHeaderBytes)) {
    fail(ErrorCode::too_large,
         detail::str_cat("expected a frame of at most ", limits.max_frame_bytes,
                         " bytes, but the header declares a payload of ", h.payload_bytes));
  }
  return h;
}

std::vector<std::byte> encode_infer_request(const InferRequest& request, const Limits& limits) {
  check_name(request.model, limits, "model");
  Writer w;
  w.u32(request.deadline_ms);
  w.u16(static_cast<uint16_t>(request.model.size()));
  w.raw(request.model.data(), request.model.size());
  write_tensors(w, request.inputs, limits);
  return frame(MessageType::infer_request, request.id, std::move(w), limits);
}

std::vector<std::byte> encode_infer_response(uint64_t request_id, const InferResult& result,
                                             const Limits& limits) {
  Writer w;
  w.f64(result.timings.queue_ms);
  w.f64(result.timings.transfer_ms);
  w.f64(result.timings.compute_ms);
  write_tensors(w, result.outputs, limits);
  return frame(MessageType::infer_response, request_id, std::move(w), limits);
}

std::vector<std::byte> encode_error_response(uint64_t request_id, ErrorCode code,
                                             std::string_view message, const Limits& limits) {
  // A message is cut to the limit rather than refused: an error must always be sendable.
  message = message.substr(0, limits.max_message_bytes);
  Writer w;
  w.u16(static_cast<uint16_t>(code));
  w.u32(static_cast<uint32_t>(message.size()));
  w.raw(message.data(), message.size());
  return frame(MessageType::error_response, request_id, std::move(w), limits);
}

InferRequest decode_infer_request(const FrameHeader& header, std::span<const std::byte> payload,
                                  const Limits& limits) {
  Reader r(payload);
  InferRequest request;
  request.id = header.request_id;
  request.deadline_ms = r.value<uint32_t>("the deadline");
  const uint16_t model_bytes = r.value<uint16_t>("the model name length");
  if (model_bytes > limits.max_name_bytes) {
    fail(ErrorCode::too_large,
         detail::str_cat("expected a model name of at most ", limits.max_name_bytes,
                         " bytes, but the frame declares ", model_bytes));
  }
  request.model = r.string(model_bytes, "the model name");
  request.inputs = read_tensors(r, limits);
  r.finish("infer request");
  return request;
}

InferResult decode_infer_response(std::span<const std::byte> payload, const Limits& limits) {
  Reader r(payload);
  InferResult result;
  result.timings.queue_ms = r.value<double>("the queue time");
  result.timings.transfer_ms = r.value<double>("the transfer time");
  result.timings.compute_ms = r.value<double>("the compute time");
  result.outputs = read_tensors(r, limits);
  r.finish("infer response");
  return result;
}

ErrorResponse decode_error_response(std::span<const std::byte> payload, const Limits& limits) {
  Reader r(payload);
  ErrorResponse error;
  error.code = static_cast<ErrorCode>(r.value<uint16_t>("the error code"));
  const uint32_t message_bytes = r.value<uint32_t>("the message length");
  if (message_bytes > limits.max_message_bytes) {
    fail(ErrorCode::too_large,
         detail::str_cat("expected an error message of at most ", limits.max_message_bytes,
                         " bytes, but the frame declares ", message_bytes));
  }
  error.message = r.string(message_bytes, "the error message");
  r.finish("error response");
  return error;
}

DecodedFrame decode_frame(std::span<const std::byte> bytes, const Limits& limits) {
  DecodedFrame frame;
  frame.header = decode_header(bytes, limits);
  const auto payload = bytes.subspan(kHeaderBytes);
  if (payload.size() != frame.header.payload_bytes) {
    fail(ErrorCode::bad_frame, detail::str_cat("expected a payload of ", frame.header.payload_bytes,
                                               " bytes, but got ", payload.size()));
  }
  switch (frame.header.type) {
    case MessageType::infer_request:
      frame.request = decode_infer_request(frame.header, payload, limits);
      break;
    case MessageType::infer_response:
      frame.response = decode_infer_response(payload, limits);
      break;
    case MessageType::error_response:
      frame.error = decode_error_response(payload, limits);
      break;
  }
  return frame;
}

}  // namespace ferry::switch_
