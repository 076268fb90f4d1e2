// The bytes ferry's transport puts on the wire, and the checks a receiver makes before it
// allocates anything: the tensor header (dtype, sizes, strides, payload size, sequence number,
// optionally the payload itself), the UCX tag layout, and the handshake records.
// Guarantees: decode_tensor_header accepts only a header whose sizes and strides describe a
// non-overlapping, dense layout of exactly payload_bytes bytes no larger than the caller's limit,
// and raises TransportError naming what was expected and what was given otherwise. All integers
// are little-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"
#include "ferry/iter/function_ref.h"

namespace ferry::transport {

// Every failure of the transport: a refused connection, a malformed message, a peer that went
// away, a timeout. The message names the peer when there is one.
class TransportError : public Error {
 public:
  using Error::Error;
};

// --- tags -------------------------------------------------------------------------------------
// A UCX tag is 64 bits: the receiver's id for the sender (20 bits), a 36-bit field (the user's
// tag for a header, the sender's sequence number for a payload) and the message kind (8 bits).
// Tags are matched per process, not per connection, so the sender's id keeps peers apart.
inline constexpr int kPeerBits = 20;
inline constexpr int kFieldBits = 36;
inline constexpr int kKindBits = 8;
inline constexpr uint64_t kMaxUserTag = (uint64_t{1} << kFieldBits) - 1;
inline constexpr uint32_t kMaxPeerId = (uint32_t{1} << kPeerBits) - 1;
inline constexpr uint64_t kFullTagMask = ~uint64_t{0};

enum class MessageKind : uint8_t { tensor_header = 1, tensor_payload = 2 };

constexpr uint64_t make_tag(uint32_t peer, uint64_t field, MessageKind kind) {
  return (uint64_t{peer} << (kFieldBits + kKindBits)) | ((field & kMaxUserTag) << kKindBits) |
         static_cast<uint64_t>(kind);
}
constexpr uint32_t tag_peer(uint64_t tag) {
  return static_cast<uint32_t>(tag >> (kFieldBits + kKindBits));
}

// --- tensor header ----------------------------------------------------------------------------
inline constexpr int kMaxWireDims = 16;
inline constexpr size_t kHeaderFixedBytes = 32;
inline constexpr size_t kMaxHeaderBytes = kHeaderFixedBytes + 16 * kMaxWireDims;
// The compact form of a header, for a payload that travels inline in a contiguous layout of at
// most kCompactMaxDims dimensions, each below 2^32: magic, dtype, dimension count, version and
// 32-bit sizes, no strides and no sequence number (an 8-byte tensor's message is 20 bytes instead
// of 56, which keeps it within one cache line of UCX's shared-memory queue: one cache-line
// transfer less per message between cores).
inline constexpr int kCompactMaxDims = 4;
inline constexpr size_t kCompactFixedBytes = 8;

struct TensorHeader {
  ScalarType dtype = ScalarType::Float32;
  DimVector sizes;    // inline up to kInlineDims: a header of an ordinary tensor allocates nothing
  DimVector strides;  // in elements; a non-overlapping, dense layout
  uint64_t seq = 0;   // the payload message's tag field when not inline
  uint64_t payload_bytes = 0;
  bool payload_inline = false;  // the payload follows the header in the same message
};

// The header's encoding, followed by `inline_payload` when header.payload_inline (whose size
// must then be header.payload_bytes): the compact form when the header allows it, else the full
// one. Both decode to the same header (the compact form's sequence number reads as 0: only a
// separate payload message uses it).
std::vector<std::byte> encode_tensor_header(const TensorHeader& header,
                                            std::span<const std::byte> inline_payload = {});
// The same, written over `out` (resized; its capacity is kept, so a buffer reused from send to
// send allocates only when a header outgrows it).
void encode_tensor_header(const TensorHeader& header, std::span<const std::byte> inline_payload,
                          std::vector<std::byte>& out);
size_t encoded_header_bytes(size_t ndim);  // the full form's
// Whether `header` is sent in the compact form.
bool compact_header_fits(const TensorHeader& header);

struct DecodedHeader {
  TensorHeader header;
  std::span<const std::byte> inline_payload;  // into the decoded message
};

// Parses and validates a received header message. `from` names the sender in errors.
// `from` names the sender in the error's message; it is called only to raise one (a receive's
// label is a string built from the connection: not worth building for every header).
DecodedHeader decode_tensor_header(std::span<const std::byte> message, uint64_t max_payload_bytes,
                                   FunctionRef<std::string()> from);
inline DecodedHeader decode_tensor_header(std::span<const std::byte> message,
                                          uint64_t max_payload_bytes, const std::string& from) {
  return decode_tensor_header(message, max_payload_bytes, [&] { return from; });
}

// --- the one header a small receive expects --------------------------------------------------
// A receive into a small dense CPU tensor knows the header it expects most: the tensor's dtype,
// sizes and strides with the payload inline, encoded as a sender of such a tensor encodes it. A
// message that is exactly that header (with any sequence number) followed by its payload passes
// every check decode_tensor_header and the receive would make, so comparing bytes replaces
// decoding it. Anything else, valid or not, goes through decode_tensor_header.
inline constexpr int kExpectedHeaderDims = 4;
struct ExpectedHeader {
  std::array<std::byte, kHeaderFixedBytes + 16 * kExpectedHeaderDims> bytes;
  uint8_t size = 0;      // of the header in `bytes`; 0: nothing expected
  bool compact = false;  // the compact form (no sequence number to skip)
  uint64_t payload_bytes = 0;
};
// The expected header of a tensor with these dtype, sizes and strides (a non-overlapping, dense
// layout) and its payload inline; nothing expected (size 0) beyond kExpectedHeaderDims dims.
ExpectedHeader expected_header(ScalarType dtype, std::span<const int64_t> sizes,
                               std::span<const int64_t> strides, uint64_t payload_bytes);
// The inline payload of `message` when it is `expected`'s header with any sequence number,
// followed by exactly its payload; else nothing.
std::optional<std::span<const std::byte>> match_expected_header(std::span<const std::byte> message,
                                                                const ExpectedHeader& expected);

// --- handshake ----------------------------------------------------------------------------------
// Three records over the connection's UCX stream before any tensor is accepted (docs/transport.md):
// the client's hello (its nonce, its id for the server, its name), the server's challenge (its
// nonce, its id for the client, its proof of the secret, its name), the client's proof. Then the
// server's verdict.
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kNameBytes = 64;

struct HandshakeRecord {
  uint32_t kind = 0;  // 1 hello, 2 challenge, 3 proof, 4 verdict
  uint32_t id = 0;    // the sender's id for the receiver (hello, challenge); verdict: 1 = admitted
  std::array<uint8_t, kNonceBytes> nonce{};
  std::array<uint8_t, kProofBytes> proof{};
  std::string name;
};
inline constexpr size_t kHandshakeRecordBytes = 16 + kNonceBytes + kProofBytes + kNameBytes;

std::array<std::byte, kHandshakeRecordBytes> encode_handshake(const HandshakeRecord& record);
// Raises TransportError when the magic or the version differ or the kind is not `expected_kind`.
HandshakeRecord decode_handshake(std::span<const std::byte, kHandshakeRecordBytes> bytes,
                                 uint32_t expected_kind, const std::string& from);

}  // namespace ferry::transport
