// The transport's wire records and proofs: headers round-trip, hostile headers (random bytes,
// truncations, each field corrupted) are refused with a TransportError naming the field and never
// crash, and a proof only verifies for its own secret, role and nonces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "ferry/transport/auth.h"
#include "ferry/transport/wire.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"

namespace ferry::transport {
namespace {

using ::testing::HasSubstr;

TensorHeader sample_header() {
  TensorHeader h;
  h.dtype = kBFloat16;
  h.sizes = {4, 3, 5};
  h.strides = {1, 20, 4};  // a dense permutation
  h.seq = 12345;
  h.payload_bytes = 4 * 3 * 5 * 2;
  return h;
}

std::string decode_error(const std::vector<std::byte>& message, uint64_t limit = 1 << 30) {
  return ferry::testing::error_of<TransportError>(
      [&] { decode_tensor_header(message, limit, "peer P"); });
}

TEST(TransportWire, HeadersRoundTripWithAndWithoutInlinePayload) {
  TensorHeader h = sample_header();
  auto decoded = decode_tensor_header(encode_tensor_header(h), 1 << 30, "peer P").header;
  EXPECT_EQ(decoded.dtype, h.dtype);
  EXPECT_EQ(decoded.sizes, h.sizes);
  EXPECT_EQ(decoded.strides, h.strides);
  EXPECT_EQ(decoded.seq, h.seq);
  EXPECT_FALSE(decoded.payload_inline);
  std::vector<std::byte> payload(h.payload_bytes);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(i * 7);
  h.payload_inline = true;
  const auto message = encode_tensor_header(h, payload);
  const auto with_payload = decode_tensor_header(message, 1 << 30, "peer P");
  ASSERT_EQ(with_payload.inline_payload.size(), payload.size());
  EXPECT_EQ(std::memcmp(with_payload.inline_payload.data(), payload.data(), payload.size()), 0);
  // A zero-element tensor and a scalar.
  TensorHeader empty;
  empty.sizes = {0, 7};
  empty.strides = {7, 1};
  EXPECT_EQ(decode_tensor_header(encode_tensor_header(empty), 0, "p").header.sizes, empty.sizes);
  TensorHeader scalar;
  scalar.payload_bytes = 4;
  EXPECT_TRUE(decode_tensor_header(encode_tensor_header(scalar), 4, "p").header.sizes.empty());
}

// Writes `value` at `offset` of an encoded sample header.
template <typename T>
std::vector<std::byte> corrupted(size_t offset, T value) {
  auto message = encode_tensor_header(sample_header());
  std::memcpy(message.data() + offset, &value, sizeof(T));
  return message;
}

TEST(TransportWire, EachCorruptedFieldIsRefusedNamingIt) {
  EXPECT_THAT(decode_error(corrupted<uint32_t>(0, 0xdeadbeef)), HasSubstr("wrong magic number"));
  EXPECT_THAT(decode_error(corrupted<uint16_t>(4, 9)), HasSubstr("expected wire version 2, got 9"));
  EXPECT_THAT(decode_error(corrupted<uint8_t>(6, 200)), HasSubstr("expected a dtype code below"));
  EXPECT_THAT(decode_error(corrupted<uint8_t>(7, 17)),
              HasSubstr("expected at most 16 dimensions, got 17"));
  EXPECT_THAT(decode_error(corrupted<uint32_t>(8, 6)), HasSubstr("unknown flags"));
  EXPECT_THAT(decode_error(corrupted<uint64_t>(24, 999)),
              HasSubstr("expected a payload of 60 elements of bfloat16, got 999 bytes"));
  EXPECT_THAT(decode_error(corrupted<int64_t>(32, -4)), HasSubstr("expected sizes >= 0, got -4"));
  EXPECT_THAT(decode_error(corrupted<int64_t>(32, int64_t{1} << 62)),
              HasSubstr("overflows 64 bits"));
  EXPECT_THAT(decode_error(corrupted<int64_t>(56, -1)), HasSubstr("expected strides >= 0, got -1"));
  EXPECT_THAT(decode_error(corrupted<int64_t>(56, 0)),
              HasSubstr("expected strides of a dense, non-overlapping layout"));
  EXPECT_THAT(decode_error(encode_tensor_header(sample_header()), 100),
              HasSubstr("expected a payload of at most 100 bytes"));
  auto truncated = encode_tensor_header(sample_header());
  truncated.resize(40);
  EXPECT_THAT(decode_error(truncated), HasSubstr("expected 80 bytes for 3 dimensions, got 40"));
  truncated.resize(10);
  EXPECT_THAT(decode_error(truncated), HasSubstr("expected at least 32 bytes, got 10"));
  auto longer = encode_tensor_header(sample_header());
  longer.push_back(std::byte{0});
  EXPECT_THAT(decode_error(longer), HasSubstr("expected a message of 80 bytes, got 81"));
}

// An inline payload in a contiguous layout of at most 4 dimensions goes in the compact form
// (sizes only): it decodes to the header it was made from, with contiguous strides; every field
// is checked as in the full form.
TEST(TransportWire, CompactHeadersRoundTripAndEachCorruptedFieldIsRefused) {
  TensorHeader h;
  h.dtype = kFloat32;
  h.sizes = {2};
  h.strides = {1};
  h.payload_bytes = 8;
  h.payload_inline = true;
  h.seq = 77;  // not sent: only a separate payload message needs it
  const std::vector<std::byte> payload = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                                          std::byte{5}, std::byte{6}, std::byte{7}, std::byte{8}};
  ASSERT_TRUE(compact_header_fits(h));
  const auto message = encode_tensor_header(h, payload);
  EXPECT_EQ(message.size(), kCompactFixedBytes + 4 + 8);  // 20 bytes, against 56 in full
  const auto decoded = decode_tensor_header(message, 1 << 30, "peer P");
  EXPECT_EQ(decoded.header.dtype, kFloat32);
  EXPECT_EQ(decoded.header.sizes, h.sizes);
  EXPECT_EQ(decoded.header.strides, h.strides);
  EXPECT_EQ(decoded.header.payload_bytes, 8u);
  EXPECT_TRUE(decoded.header.payload_inline);
  ASSERT_EQ(decoded.inline_payload.size(), 8u);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), decoded.inline_payload.begin()));
  // Not compact: a separate payload, a transpose, five dimensions, a size of 2^32.
  TensorHeader separate = h;
  separate.payload_inline = false;
  EXPECT_FALSE(compact_header_fits(separate));
  EXPECT_EQ(decode_tensor_header(encode_tensor_header(separate), 8, "p").header.seq, 77u);
  TensorHeader transposed = sample_header();
  transposed.payload_inline = true;
  EXPECT_FALSE(compact_header_fits(transposed));
  TensorHeader five = h;
  five.sizes = {1, 1, 2, 1, 1};
  five.strides = {2, 2, 1, 1, 1};
  EXPECT_FALSE(compact_header_fits(five));
  TensorHeader huge = h;
  huge.sizes = {int64_t{1} << 32};
  EXPECT_FALSE(compact_header_fits(huge));
  // A 3-d contiguous one with a size-1 dimension of any stride, and an empty one.
  TensorHeader three;
  three.dtype = kInt16;
  three.sizes = {3, 1, 2};
  three.strides = {2, 7, 1};
  three.payload_bytes = 12;
  three.payload_inline = true;
  const std::vector<std::byte> twelve(12, std::byte{9});
  const auto three_decoded =
      decode_tensor_header(encode_tensor_header(three, twelve), 1 << 30, "p").header;
  EXPECT_EQ(three_decoded.sizes, three.sizes);
  EXPECT_EQ(three_decoded.strides, (DimVector{2, 2, 1}));
  TensorHeader empty;
  empty.sizes = {0, 5};
  empty.strides = {5, 1};
  empty.payload_inline = true;
  EXPECT_EQ(encode_tensor_header(empty).size(), kCompactFixedBytes + 8);
  EXPECT_EQ(decode_tensor_header(encode_tensor_header(empty), 0, "p").header.sizes, empty.sizes);

  const auto corrupt = [&](size_t offset, auto value) {
    auto m = message;
    std::memcpy(m.data() + offset, &value, sizeof(value));
    return decode_error(m);
  };
  EXPECT_THAT(corrupt(4, uint8_t{200}), HasSubstr("expected a dtype code below"));
  EXPECT_THAT(corrupt(5, uint8_t{5}),
              HasSubstr("expected at most 4 dimensions in a compact header, got 5"));
  EXPECT_THAT(corrupt(6, uint16_t{9}), HasSubstr("expected wire version 2, got 9"));
  EXPECT_THAT(corrupt(8, uint32_t{3}), HasSubstr("expected a message of 24 bytes, got 20"));
  EXPECT_THAT(corrupt(5, uint8_t{4}), HasSubstr("expected 24 bytes for 4 dimensions, got 20"));
  EXPECT_THAT(decode_error(message, 4),
              HasSubstr("expected a payload of at most 4 bytes (EndpointOptions::max_message_bytes"
                        "), got 2 elements of float32"));
  auto truncated = message;
  truncated.resize(6);
  EXPECT_THAT(decode_error(truncated),
              HasSubstr("expected at least 8 bytes for a compact header, got 6"));
  // Four sizes of 2^32 - 1: the product overflows.
  std::vector<std::byte> overflowing(kCompactFixedBytes + 16);
  std::memcpy(overflowing.data(), message.data(), 4);
  overflowing[4] = std::byte{static_cast<uint8_t>(kUInt8)};
  overflowing[5] = std::byte{4};
  std::memcpy(overflowing.data() + 6, message.data() + 6, 2);
  std::fill(overflowing.begin() + 8, overflowing.end(), std::byte{0xff});
  EXPECT_THAT(decode_error(overflowing), HasSubstr("the sizes' product overflows 64 bits"));
  // A first size of 0: no elements, but the other sizes' contiguous strides overflow.
  std::memset(overflowing.data() + 8, 0, 4);
  EXPECT_THAT(decode_error(overflowing), HasSubstr("strides of sizes with a 0 overflow"));
}

// Random bytes, and valid headers with random bytes flipped: every one either decodes to a header
// that passes the checks or raises TransportError; nothing else happens.
TEST(TransportWire, RandomAndMutatedBytesNeverGetPastTheChecks) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> message;
    if (i % 3 == 0) {
      message.resize(rng() % 400);
      for (auto& b : message) b = std::byte(rng());
    } else if (i % 3 == 1) {
      TensorHeader compact;  // a [3, 4] float32 with its payload: the compact form
      compact.sizes = {3, 4};
      compact.strides = {4, 1};
      compact.payload_bytes = 48;
      compact.payload_inline = true;
      message = encode_tensor_header(compact, std::vector<std::byte>(48));
      for (int flips = 1 + int(rng() % 4); flips > 0; --flips) {
        message[rng() % message.size()] = std::byte(rng());
      }
    } else {
      message = encode_tensor_header(sample_header());
      for (int flips = 1 + int(rng() % 4); flips > 0; --flips) {
        message[rng() % message.size()] = std::byte(rng());
      }
    }
    try {
      const auto decoded = decode_tensor_header(message, 1 << 20, "fuzz");
      uint64_t numel = 1;
      for (int64_t s : decoded.header.sizes) numel *= uint64_t(s);
      EXPECT_EQ(numel * element_size(decoded.header.dtype), decoded.header.payload_bytes);
      EXPECT_LE(decoded.header.payload_bytes, uint64_t{1} << 20);
      ++accepted;
    } catch (const TransportError&) {
    }
  }
  EXPECT_GT(accepted, 0);  // some mutations (e.g. of the sequence number) stay valid
}

// The same layout of the same elements: equal strides wherever a size is above 1 (or no
// elements at all).
bool same_dense_layout(const TensorHeader& a, const TensorHeader& b) {
  if (a.sizes != b.sizes) return false;
  if (std::find(a.sizes.begin(), a.sizes.end(), 0) != a.sizes.end()) return true;
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.sizes[d] > 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

// A random dense layout of up to `max_dims` dimensions (sizes 0-4, any order of strides).
TensorHeader random_dense_header(std::mt19937_64& rng, int max_dims) {
  constexpr ScalarType kTypes[] = {kFloat32, kBFloat16, kInt64, kUInt8, kFloat64, kBool};
  TensorHeader h;
  h.dtype = kTypes[rng() % std::size(kTypes)];
  const size_t ndim = rng() % static_cast<size_t>(max_dims + 1);
  std::vector<size_t> order(ndim);
  for (size_t d = 0; d < ndim; ++d) {
    h.sizes.push_back(static_cast<int64_t>(rng() % 5));
    order[d] = d;
  }
  std::shuffle(order.begin(), order.end(), rng);
  h.strides.resize(ndim);
  int64_t stride = 1;
  for (size_t d : order) {  // the first in `order` is innermost
    h.strides[d] = stride;
    stride *= std::max<int64_t>(h.sizes[d], 1);
  }
  uint64_t numel = 1;
  for (int64_t s : h.sizes) numel *= static_cast<uint64_t>(s);
  h.payload_bytes = numel * element_size(h.dtype);
  h.payload_inline = true;
  h.seq = rng();
  return h;
}

// The small-receive path's comparison: a message matches the expected header exactly when it is
// that header's encoding with any sequence number and its payload; whatever matches also passes
// decode_tensor_header with the same dtype, sizes and strides, so comparing bytes checks no less.
TEST(TransportWire, TheExpectedHeaderMatchesItsOwnEncodingOnly) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  auto rng = ferry::testing::test_rng();
  int matched_mutants = 0;
  for (int i = 0; i < 3000; ++i) {
    const TensorHeader h = random_dense_header(rng, kExpectedHeaderDims);
    std::vector<std::byte> payload(h.payload_bytes);
    for (auto& b : payload) b = std::byte(rng());
    const auto message = encode_tensor_header(h, payload);
    const ExpectedHeader expected = expected_header(h.dtype, h.sizes, h.strides, h.payload_bytes);
    ASSERT_EQ(expected.size + payload.size(), message.size());  // the form the encoder chose
    EXPECT_EQ(expected.compact, compact_header_fits(h));
    const auto taken = match_expected_header(message, expected);
    ASSERT_TRUE(taken.has_value()) << "dims " << h.sizes.size();
    ASSERT_EQ(taken->size(), payload.size());
    EXPECT_TRUE(std::equal(taken->begin(), taken->end(), payload.begin()));
    // One byte changed: a match only if it was the sequence number's; and any match decodes to
    // the expected tensor.
    auto mutant = message;
    const size_t at = rng() % mutant.size();
    mutant[at] ^= std::byte(1 + rng() % 255);
    const bool in_seq = !expected.compact && at >= 16 && at < 24;
    const bool in_payload = at >= expected.size;
    const auto mutant_taken = match_expected_header(mutant, expected);
    EXPECT_EQ(mutant_taken.has_value(), in_seq || in_payload) << "byte " << at;
    if (mutant_taken) {
      ++matched_mutants;
      const auto decoded = decode_tensor_header(mutant, 1 << 20, "peer P").header;
      EXPECT_EQ(decoded.dtype, h.dtype);
      EXPECT_EQ(decoded.sizes, h.sizes);
      EXPECT_TRUE(same_dense_layout(decoded, h));
    }
    // One byte more or less, and a header without its payload inline: no match.
    auto longer = message;
    longer.push_back(std::byte{0});
    EXPECT_FALSE(match_expected_header(longer, expected).has_value());
    EXPECT_FALSE(
        match_expected_header(std::span(message).first(message.size() - 1), expected).has_value());
    TensorHeader separate = h;
    separate.payload_inline = false;
    EXPECT_FALSE(match_expected_header(encode_tensor_header(separate), expected).has_value());
  }
  EXPECT_GT(matched_mutants, 0);
  // Past kExpectedHeaderDims dimensions nothing is expected, and nothing matches.
  const std::vector<int64_t> sizes(kExpectedHeaderDims + 1, 1), strides(sizes.size(), 1);
  const ExpectedHeader none = expected_header(kFloat32, sizes, strides, 4);
  EXPECT_EQ(none.size, 0);
  TensorHeader five;
  five.sizes.assign(sizes.begin(), sizes.end());
  five.strides.assign(strides.begin(), strides.end());
  five.payload_bytes = 4;
  five.payload_inline = true;
  const std::vector<std::byte> four_bytes(4);
  EXPECT_FALSE(match_expected_header(encode_tensor_header(five, four_bytes), none).has_value());
}

TEST(TransportWire, HandshakeRecordsRoundTripAndRefuseTheWrongKind) {
  HandshakeRecord r;
  r.kind = 2;
  r.id = 77;
  r.nonce = make_nonce();
  r.name = std::string(100, 'x');  // cut to fit
  const auto bytes = encode_handshake(r);
  const auto back = decode_handshake(bytes, 2, "p");
  EXPECT_EQ(back.id, 77u);
  EXPECT_EQ(back.nonce, r.nonce);
  EXPECT_EQ(back.name, std::string(kNameBytes - 1, 'x'));
  EXPECT_THAT(ferry::testing::error_of<TransportError>([&] { decode_handshake(bytes, 3, "p"); }),
              HasSubstr("expected handshake record 3 from p, got 2"));
  // A peer of another wire version (version 1 could not read compact headers) is refused at once.
  auto older = bytes;
  const uint16_t version_1 = 1;
  std::memcpy(older.data() + 4, &version_1, sizeof(version_1));
  EXPECT_THAT(ferry::testing::error_of<TransportError>([&] { decode_handshake(older, 2, "p"); }),
              HasSubstr("p speaks wire version 1, expected 2"));
}

TEST(TransportAuth, AProofVerifiesOnlyForItsSecretRoleAndNonces) {
  const Nonce c = make_nonce(), s = make_nonce();
  EXPECT_NE(c, s);
  const Proof proof = make_proof("secret", Role::client, c, s);
  EXPECT_TRUE(verify_proof("secret", Role::client, c, s, proof));
  EXPECT_FALSE(verify_proof("secreT", Role::client, c, s, proof));
  EXPECT_FALSE(verify_proof("secret", Role::server, c, s, proof));
  EXPECT_FALSE(verify_proof("secret", Role::client, s, c, proof));
  EXPECT_FALSE(verify_proof("secret", Role::client, c, make_nonce(), proof));
}

}  // namespace
}  // namespace ferry::transport
