// Encoding and validation of the transport's wire records (see wire.h).
#include "ferry/transport/wire.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "ferry/core/tensor_impl.h"

namespace ferry::transport {
namespace {

constexpr uint32_t kTensorMagic = 0x534e5446;     // "FTNS"
constexpr uint32_t kCompactMagic = 0x634e5446;    // "FTNc": the compact form
constexpr uint32_t kHandshakeMagic = 0x48595246;  // "FRYH"
constexpr uint16_t kWireVersion = 2;  // 2: the compact header (a version-1 peer could not read it)
constexpr uint32_t kInlineFlag = 1;

class Writer {
 public:
  explicit Writer(std::byte* out) : out_(out) {}
  template <typename T>
  void put(T value) {
    std::memcpy(out_ + at_, &value, sizeof(T));  // little-endian hosts only (checked below)
    at_ += sizeof(T);
  }
  void put_bytes(const void* bytes, size_t n) {
    if (n > 0) std::memcpy(out_ + at_, bytes, n);
    at_ += n;
  }
  size_t at() const { return at_; }

 private:
  std::byte* out_;
  size_t at_ = 0;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  void get_bytes(void* out, size_t n) {
    std::memcpy(out, in_.data() + at_, n);
    at_ += n;
  }
  size_t at() const { return at_; }

 private:
  std::span<const std::byte> in_;
  size_t at_ = 0;
};

static_assert(std::endian::native == std::endian::little,
              "ferry's transport writes its records in host order, which must be little-endian");

[[noreturn]] void malformed(const std::string& from, const std::string& what) {
  throw TransportError("transport: malformed tensor header from " + from + ": " + what);
}

}  // namespace

size_t encoded_header_bytes(size_t ndim) { return kHeaderFixedBytes + 16 * ndim; }

namespace {

size_t compact_header_bytes(size_t ndim) { return kCompactFixedBytes + 4 * ndim; }

bool compact_fits(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  if (sizes.size() > static_cast<size_t>(kCompactMaxDims) || strides.size() != sizes.size()) {
    return false;
  }
  for (int64_t s : sizes) {
    if (s < 0 || s > int64_t{UINT32_MAX}) return false;
  }
  return compute_contiguous(sizes, strides);  // (size-1 dimensions' strides do not matter)
}

// The full form's fixed part, sizes and strides.
void put_full_header(Writer& w, ScalarType dtype, std::span<const int64_t> sizes,
                     std::span<const int64_t> strides, bool payload_inline, uint64_t seq,
                     uint64_t payload_bytes) {
  w.put<uint32_t>(kTensorMagic);
  w.put<uint16_t>(kWireVersion);
  w.put<uint8_t>(static_cast<uint8_t>(dtype));
  w.put<uint8_t>(static_cast<uint8_t>(sizes.size()));
  w.put<uint32_t>(payload_inline ? kInlineFlag : 0);
  w.put<uint32_t>(0);
  w.put<uint64_t>(seq);
  w.put<uint64_t>(payload_bytes);
  for (int64_t s : sizes) w.put<int64_t>(s);
  for (int64_t s : strides) w.put<int64_t>(s);
}

void put_compact_header(Writer& w, ScalarType dtype, std::span<const int64_t> sizes) {
  w.put<uint32_t>(kCompactMagic);
  w.put<uint8_t>(static_cast<uint8_t>(dtype));
  w.put<uint8_t>(static_cast<uint8_t>(sizes.size()));
  w.put<uint16_t>(kWireVersion);
  for (int64_t s : sizes) w.put<uint32_t>(static_cast<uint32_t>(s));
}

}  // namespace

bool compact_header_fits(const TensorHeader& header) {
  return header.payload_inline && compact_fits(header.sizes, header.strides);
}

std::vector<std::byte> encode_tensor_header(const TensorHeader& header,
                                            std::span<const std::byte> inline_payload) {
  std::vector<std::byte> out;
  encode_tensor_header(header, inline_payload, out);
  return out;
}

void encode_tensor_header(const TensorHeader& header, std::span<const std::byte> inline_payload,
                          std::vector<std::byte>& out) {
  FERRY_CHECK_AS(TransportError, header.sizes.size() == header.strides.size(),
                 "transport: a header needs one stride per size, but got ", header.sizes.size(),
                 " sizes and ", header.strides.size(), " strides");
  FERRY_CHECK_AS(TransportError, header.sizes.size() <= static_cast<size_t>(kMaxWireDims),
                 "transport: tensors of at most ", kMaxWireDims,
                 " dimensions can be sent, but got ", header.sizes.size());
  FERRY_CHECK_AS(TransportError,
                 !header.payload_inline || inline_payload.size() == header.payload_bytes,
                 "transport: an inline payload of ", header.payload_bytes, " bytes was announced, ",
                 "but ", inline_payload.size(), " were given");
  const size_t ndim = header.sizes.size();
  if (compact_header_fits(header)) {
    out.resize(compact_header_bytes(ndim) + inline_payload.size());
    Writer w(out.data());
    put_compact_header(w, header.dtype, header.sizes);
    w.put_bytes(inline_payload.data(), inline_payload.size());
    return;
  }
  out.resize(encoded_header_bytes(ndim) + (header.payload_inline ? inline_payload.size() : 0));
  Writer w(out.data());
  put_full_header(w, header.dtype, header.sizes, header.strides, header.payload_inline, header.seq,
                  header.payload_bytes);
  if (header.payload_inline) w.put_bytes(inline_payload.data(), inline_payload.size());
}

ExpectedHeader expected_header(ScalarType dtype, std::span<const int64_t> sizes,
                               std::span<const int64_t> strides, uint64_t payload_bytes) {
  ExpectedHeader out;
  if (sizes.size() > static_cast<size_t>(kExpectedHeaderDims) || strides.size() != sizes.size()) {
    return out;
  }
  Writer w(out.bytes.data());
  out.payload_bytes = payload_bytes;
  if (compact_fits(sizes, strides)) {  // as encode_tensor_header would send it
    put_compact_header(w, dtype, sizes);
    out.size = static_cast<uint8_t>(w.at());
    out.compact = true;
    return out;
  }
  // (The sequence number, 0 here, is not compared.)
  put_full_header(w, dtype, sizes, strides, /*payload_inline=*/true, /*seq=*/0, payload_bytes);
  out.size = static_cast<uint8_t>(w.at());
  return out;
}

std::optional<std::span<const std::byte>> match_expected_header(std::span<const std::byte> message,
                                                                const ExpectedHeader& expected) {
  constexpr size_t kSeqAt = 16, kSeqEnd = 24;  // the full form's sequence number
  if (expected.size == 0 || message.size() != expected.size + expected.payload_bytes) {
    return std::nullopt;
  }
  if (expected.compact) {
    if (std::memcmp(message.data(), expected.bytes.data(), expected.size) != 0) return std::nullopt;
    return message.subspan(expected.size);
  }
  if (std::memcmp(message.data(), expected.bytes.data(), kSeqAt) != 0 ||
      std::memcmp(message.data() + kSeqEnd, expected.bytes.data() + kSeqEnd,
                  expected.size - kSeqEnd) != 0) {
    return std::nullopt;
  }
  return message.subspan(expected.size);
}

namespace {

// The version and dtype checks both forms make.
void check_version_and_dtype(uint16_t version, uint8_t dtype, FunctionRef<std::string()> from) {
  if (version != kWireVersion) {
    malformed(from(), "expected wire version " + std::to_string(kWireVersion) + ", got " +
                          std::to_string(version));
  }
  if (dtype >= kNumScalarTypes) {
    malformed(from(), "expected a dtype code below " + std::to_string(kNumScalarTypes) + ", got " +
                          std::to_string(dtype));
  }
}

// The checks of the full form below, for the compact one (whose layout is contiguous by
// construction and whose payload is inline).
DecodedHeader decode_compact_header(std::span<const std::byte> message, uint64_t max_payload_bytes,
                                    FunctionRef<std::string()> from) {
  if (message.size() < kCompactFixedBytes) {
    malformed(from(), "expected at least " + std::to_string(kCompactFixedBytes) +
                          " bytes for a compact header, got " + std::to_string(message.size()));
  }
  Reader r(message);
  r.get<uint32_t>();  // the magic number, read by the caller
  const auto dtype = r.get<uint8_t>();
  const auto ndim = r.get<uint8_t>();
  const auto version = r.get<uint16_t>();
  check_version_and_dtype(version, dtype, from);
  if (ndim > kCompactMaxDims) {
    malformed(from(), "expected at most " + std::to_string(kCompactMaxDims) +
                          " dimensions in a compact header, got " + std::to_string(ndim));
  }
  const size_t header_bytes = compact_header_bytes(ndim);
  if (message.size() < header_bytes) {
    malformed(from(), "expected " + std::to_string(header_bytes) + " bytes for " +
                          std::to_string(ndim) + " dimensions, got " +
                          std::to_string(message.size()));
  }
  DecodedHeader out;
  TensorHeader& h = out.header;
  h.dtype = static_cast<ScalarType>(dtype);
  h.payload_inline = true;
  h.sizes.resize(ndim);
  uint64_t numel = 1;
  for (auto& s : h.sizes) {
    const uint32_t size = r.get<uint32_t>();
    s = size;
    if (__builtin_mul_overflow(numel, uint64_t{size}, &numel)) {
      malformed(from(), "the sizes' product overflows 64 bits");
    }
  }
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(element_size(h.dtype)),
                             &h.payload_bytes) ||
      h.payload_bytes > max_payload_bytes) {
    malformed(from(), "expected a payload of at most " + std::to_string(max_payload_bytes) +
                          " bytes (EndpointOptions::max_message_bytes), got " +
                          std::to_string(numel) + " elements of " +
                          std::string(dtype_name(h.dtype)));
  }
  if (message.size() != header_bytes + h.payload_bytes) {
    malformed(from(), "expected a message of " + std::to_string(header_bytes + h.payload_bytes) +
                          " bytes, got " + std::to_string(message.size()));
  }
  // The contiguous strides; their product can only overflow next to a size of 0.
  h.strides.resize(ndim);
  int64_t stride = 1;
  for (size_t d = ndim; d-- > 0;) {
    h.strides[d] = stride;
    if (d > 0 && __builtin_mul_overflow(stride, std::max<int64_t>(h.sizes[d], 1), &stride)) {
      malformed(from(), "the contiguous strides of sizes with a 0 overflow 64 bits");
    }
  }
  out.inline_payload = message.subspan(header_bytes, h.payload_bytes);
  return out;
}

}  // namespace

DecodedHeader decode_tensor_header(std::span<const std::byte> message, uint64_t max_payload_bytes,
                                   FunctionRef<std::string()> from) {
  if (message.size() >= sizeof(uint32_t)) {
    uint32_t magic = 0;
    std::memcpy(&magic, message.data(), sizeof(magic));
    if (magic == kCompactMagic) return decode_compact_header(message, max_payload_bytes, from);
  }
  if (message.size() < kHeaderFixedBytes) {
    malformed(from(), "expected at least " + std::to_string(kHeaderFixedBytes) + " bytes, got " +
                          std::to_string(message.size()));
  }
  Reader r(message);
  const auto magic = r.get<uint32_t>();
  const auto version = r.get<uint16_t>();
  const auto dtype = r.get<uint8_t>();
  const auto ndim = r.get<uint8_t>();
  const auto flags = r.get<uint32_t>();
  r.get<uint32_t>();
  DecodedHeader out;
  TensorHeader& h = out.header;
  h.seq = r.get<uint64_t>();
  h.payload_bytes = r.get<uint64_t>();
  if (magic != kTensorMagic) malformed(from(), "not a ferry tensor header (wrong magic number)");
  check_version_and_dtype(version, dtype, from);
  h.dtype = static_cast<ScalarType>(dtype);
  if (ndim > kMaxWireDims) {
    malformed(from(), "expected at most " + std::to_string(kMaxWireDims) + " dimensions, got " +
                          std::to_string(ndim));
  }
  if ((flags & ~kInlineFlag) != 0) malformed(from(), "unknown flags " + std::to_string(flags));
  h.payload_inline = (flags & kInlineFlag) != 0;
  const size_t header_bytes = encoded_header_bytes(ndim);
  if (message.size() < header_bytes) {
    malformed(from(), "expected " + std::to_string(header_bytes) + " bytes for " +
                          std::to_string(ndim) + " dimensions, got " +
                          std::to_string(message.size()));
  }
  h.sizes.resize(ndim);
  h.strides.resize(ndim);
  for (auto& s : h.sizes) s = r.get<int64_t>();
  for (auto& s : h.strides) s = r.get<int64_t>();
  uint64_t numel = 1;
  for (int64_t s : h.sizes) {
    if (s < 0) malformed(from(), "expected sizes >= 0, got " + std::to_string(s));
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel)) {
      malformed(from(), "the sizes' product overflows 64 bits");
    }
  }
  for (int64_t s : h.strides) {
    if (s < 0) malformed(from(), "expected strides >= 0, got " + std::to_string(s));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(element_size(h.dtype)), &bytes) ||
      bytes != h.payload_bytes) {
    malformed(from(), "expected a payload of " + std::to_string(numel) + " elements of " +
                          std::string(dtype_name(h.dtype)) + ", got " +
                          std::to_string(h.payload_bytes) + " bytes");
  }
  if (h.payload_bytes > max_payload_bytes) {
    malformed(from(), "expected a payload of at most " + std::to_string(max_payload_bytes) +
                          " bytes (EndpointOptions::max_message_bytes), got " +
                          std::to_string(h.payload_bytes));
  }
  if (numel > 1 && !compute_non_overlapping_and_dense(h.sizes, h.strides)) {
    malformed(from(), "expected strides of a dense, non-overlapping layout, got other strides");
  }
  const size_t expected = header_bytes + (h.payload_inline ? h.payload_bytes : 0);
  if (message.size() != expected) {
    malformed(from(), "expected a message of " + std::to_string(expected) + " bytes, got " +
                          std::to_string(message.size()));
  }
  if (h.payload_inline) out.inline_payload = message.subspan(header_bytes, h.payload_bytes);
  return out;
}

std::array<std::byte, kHandshakeRecordBytes> encode_handshake(const HandshakeRecord& record) {
  std::array<std::byte, kHandshakeRecordBytes> out{};
  Writer w(out.data());
  w.put<uint32_t>(kHandshakeMagic);
  w.put<uint16_t>(kWireVersion);
  w.put<uint16_t>(0);
  w.put<uint32_t>(record.kind);
  w.put<uint32_t>(record.id);
  w.put_bytes(record.nonce.data(), kNonceBytes);
  w.put_bytes(record.proof.data(), kProofBytes);
  char name[kNameBytes] = {};
  std::memcpy(name, record.name.data(), std::min(record.name.size(), kNameBytes - 1));
  w.put_bytes(name, kNameBytes);
  return out;
}

HandshakeRecord decode_handshake(std::span<const std::byte, kHandshakeRecordBytes> bytes,
                                 uint32_t expected_kind, const std::string& from) {
  Reader r(bytes);
  const auto magic = r.get<uint32_t>();
  const auto version = r.get<uint16_t>();
  r.get<uint16_t>();
  HandshakeRecord out;
  out.kind = r.get<uint32_t>();
  out.id = r.get<uint32_t>();
  r.get_bytes(out.nonce.data(), kNonceBytes);
  r.get_bytes(out.proof.data(), kProofBytes);
  char name[kNameBytes];
  r.get_bytes(name, kNameBytes);
  name[kNameBytes - 1] = '\0';
  out.name = name;
  FERRY_CHECK_AS(TransportError, magic == kHandshakeMagic, "transport: ", from,
                 " did not speak ferry's handshake (wrong magic number)");
  FERRY_CHECK_AS(TransportError, version == kWireVersion, "transport: ", from,
                 " speaks wire version ", version, ", expected ", kWireVersion);
  FERRY_CHECK_AS(TransportError, out.kind == expected_kind, "transport: expected handshake record ",
                 expected_kind, " from ", from, ", got ", out.kind);
  return out;
}

}  // namespace ferry::transport
