// The ferry serve wire protocol: length-prefixed frames, all integers fixed-width little-endian.
// Encoders and decoders are pure functions over byte buffers. Decoders check every length against
// the Limits and against the bytes actually present before allocating anything, check dtype
// codes, ranks, dims and shape * itemsize == byte count (with overflow checks), and raise
// SwitchError (bad_frame, unsupported_version or too_large) for anything else; they never read
// out of bounds and never trust a length. The layout is documented in docs/switch.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ferry/switch/types.h"

namespace ferry::switch_ {

inline constexpr uint32_t kMagic = 0x59524546;  // "FERY" as bytes on the wire
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kHeaderBytes = 24;

enum class MessageType : uint16_t {
  infer_request = 1,
  infer_response = 2,
  error_response = 3,
};

struct FrameHeader {
  uint32_t magic = kMagic;
  uint16_t version = kProtocolVersion;
  MessageType type = MessageType::infer_request;
  uint64_t request_id = 0;
  uint64_t payload_bytes = 0;
};

struct Limits {
  uint64_t max_frame_bytes = uint64_t{1} << 30;  // header + payload
  uint32_t max_tensors = 64;
  uint32_t max_rank = 16;
  uint32_t max_name_bytes = 256;  // model and tensor names
  uint32_t max_message_bytes = 64 * 1024;
};

struct ErrorResponse {
  ErrorCode code = ErrorCode::internal;
  std::string message;
};

// ---- frames -------------------------------------------------------------------------------
void encode_header(const FrameHeader& header, std::span<std::byte, kHeaderBytes> out);
// Checks magic (bad_frame), version (unsupported_version), type (bad_frame) and that the frame
// fits limits.max_frame_bytes (too_large), so a reader can refuse a frame before its payload.
FrameHeader decode_header(std::span<const std::byte> bytes, const Limits& limits = {});

// Whole frames (header and payload). Tensors may be on any device and in any layout; they are
// written as contiguous CPU bytes. Raises SwitchError(bad_input) for what the protocol cannot
// carry (names too long, too many tensors, rank too high).
std::vector<std::byte> encode_infer_request(const InferRequest& request, const Limits& limits = {});
std::vector<std::byte> encode_infer_response(uint64_t request_id, const InferResult& result,
                                             const Limits& limits = {});
std::vector<std::byte> encode_error_response(uint64_t request_id, ErrorCode code,
                                             std::string_view message, const Limits& limits = {});

// Payload decoders (the header was decoded first). The request's id is the header's.
InferRequest decode_infer_request(const FrameHeader& header, std::span<const std::byte> payload,
                                  const Limits& limits = {});
InferResult decode_infer_response(std::span<const std::byte> payload, const Limits& limits = {});
ErrorResponse decode_error_response(std::span<const std::byte> payload, const Limits& limits = {});

// One whole frame as received (for tests and fuzzing): decodes the header and the payload of
// whichever message it is; `bytes` must hold exactly one frame.
struct DecodedFrame {
  FrameHeader header;
  InferRequest request;  // infer_request
  InferResult response;  // infer_response
  ErrorResponse error;   // error_response
};
DecodedFrame decode_frame(std::span<const std::byte> bytes, const Limits& limits = {});

// Wire codes of dtypes (stable; independent of ScalarType's enum order).
uint8_t dtype_code(ScalarType dtype);
// Raises SwitchError(bad_frame) for an unknown code.
ScalarType dtype_from_code(uint8_t code);

}  // namespace ferry::switch_
