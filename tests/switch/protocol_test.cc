// The wire protocol as pure functions: round trips for every dtype, and hostile frames
// (truncated, oversized, wrong magic or version, bad dtype codes, shape/byte mismatches,
// overflowing shapes) raise SwitchError with the right code and never crash; a seeded fuzz loop
// feeds thousands of random and mutated frames to the decoder.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ferry/ferry.h"
#include "ferry/switch/protocol.h"
#include "tests/support/random.h"

namespace ferry::switch_ {
namespace {

using ::testing::HasSubstr;

Tensor filled(ScalarType dtype, std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = empty(shape, TensorOptions(dtype));
  std::mt19937_64 rng(seed);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  if (dtype == kBool) {
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes().vec() == b.sizes().vec() &&
         std::memcmp(a.const_data_ptr(), b.const_data_ptr(), a.nbytes()) == 0;
}

ErrorCode code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const SwitchError& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected a SwitchError";
  return ErrorCode::internal;
}

std::vector<ScalarType> all_dtypes() {
  return {kBool,     kUInt8,   kInt8,    kInt16,     kInt32,      kInt64,         kFloat16,
          kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128, kFloat8_e4m3fn, kFloat8_e5m2};
}

InferRequest sample_request() {
  InferRequest r;
  r.id = 42;
  r.model = "mlp";
  r.deadline_ms = 250;
  r.inputs.push_back({"x", filled(kFloat32, {2, 3}, 1)});
  r.inputs.push_back({"mask", filled(kBool, {2}, 2)});
  return r;
}

TEST(SwitchProtocol, RequestRoundTripsEveryDtype) {
  InferRequest r;
  r.id = 7;
  r.model = "every-dtype";
  r.deadline_ms = 1234;
  uint64_t seed = 1;
  for (ScalarType dtype : all_dtypes()) {
    r.inputs.push_back({std::string(dtype_name(dtype)), filled(dtype, {3, 1, 2}, seed++)});
  }
  r.inputs.push_back({"scalar", filled(kFloat64, {}, 99)});
  r.inputs.push_back({"empty", filled(kInt32, {0, 5}, 100)});
  const auto frame = encode_infer_request(r);
  const DecodedFrame d = decode_frame(frame);
  EXPECT_EQ(d.header.type, MessageType::infer_request);
  EXPECT_EQ(d.request.id, 7u);
  EXPECT_EQ(d.request.model, "every-dtype");
  EXPECT_EQ(d.request.deadline_ms, 1234u);
  ASSERT_EQ(d.request.inputs.size(), r.inputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    EXPECT_EQ(d.request.inputs[i].name, r.inputs[i].name);
    EXPECT_TRUE(same_bytes(d.request.inputs[i].tensor, r.inputs[i].tensor)) << r.inputs[i].name;
  }
}

TEST(SwitchProtocol, ResponseAndErrorRoundTrip) {
  InferResult result;
  result.timings = {1.5, 2.25, 3.125};
  for (ScalarType dtype : all_dtypes()) {
    result.outputs.push_back({"out", filled(dtype, {4}, static_cast<uint64_t>(dtype) + 10)});
  }
  const DecodedFrame d = decode_frame(encode_infer_response(9, result));
  EXPECT_EQ(d.header.request_id, 9u);
  EXPECT_EQ(d.response.timings.queue_ms, 1.5);
  EXPECT_EQ(d.response.timings.transfer_ms, 2.25);
  EXPECT_EQ(d.response.timings.compute_ms, 3.125);
  ASSERT_EQ(d.response.outputs.size(), result.outputs.size());
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    EXPECT_TRUE(same_bytes(d.response.outputs[i].tensor, result.outputs[i].tensor));
  }
  const DecodedFrame e = decode_frame(encode_error_response(3, ErrorCode::unknown_model, "nope"));
  EXPECT_EQ(e.header.type, MessageType::error_response);
  EXPECT_EQ(e.error.code, ErrorCode::unknown_model);
  EXPECT_EQ(e.error.message, "nope");
}

TEST(SwitchProtocol, NonContiguousTensorsAreSentContiguous) {
  Tensor t = filled(kInt16, {3, 4}, 5);
  InferRequest r;
  r.model = "m";
  r.inputs.push_back({"t", t.transpose(0, 1)});
  const DecodedFrame d = decode_frame(encode_infer_request(r));
  EXPECT_TRUE(same_bytes(d.request.inputs[0].tensor, t.transpose(0, 1).contiguous()));
}

TEST(SwitchProtocol, HeaderChecks) {
  auto frame = encode_infer_request(sample_request());
  auto bad_magic = frame;
  bad_magic[0] = std::byte{'X'};
  EXPECT_EQ(code_of([&] { decode_header(bad_magic); }), ErrorCode::bad_frame);
  auto bad_version = frame;
  bad_version[4] = std::byte{2};
  EXPECT_EQ(code_of([&] { decode_header(bad_version); }), ErrorCode::unsupported_version);
  auto bad_type = frame;
  bad_type[6] = std::byte{9};
  EXPECT_EQ(code_of([&] { decode_header(bad_type); }), ErrorCode::bad_frame);
  EXPECT_EQ(code_of([&] { decode_header(std::span(frame).first(10)); }), ErrorCode::bad_frame);
  Limits small;
  small.max_frame_bytes = 64;
  EXPECT_EQ(code_of([&] { decode_header(frame, small); }), ErrorCode::too_large);
  auto huge = frame;
  const uint64_t length = ~uint64_t{0};
  std::memcpy(huge.data() + 16, &length, 8);
  EXPECT_EQ(code_of([&] { decode_header(huge); }), ErrorCode::too_large);
}

TEST(SwitchProtocol, TruncatedFramesAtEveryLength) {
  const auto frame = encode_infer_request(sample_request());
  for (size_t n = 0; n < frame.size(); ++n) {
    EXPECT_EQ(code_of([&] { decode_frame(std::span(frame).first(n)); }), ErrorCode::bad_frame)
        << "length " << n;
    if (n >= kHeaderBytes) {
      // The header agrees with the truncated payload: the payload decoder must notice.
      auto cut = std::vector<std::byte>(frame.begin(), frame.begin() + n);
      const uint64_t payload = n - kHeaderBytes;
      std::memcpy(cut.data() + 16, &payload, 8);
      EXPECT_EQ(code_of([&] { decode_frame(cut); }), ErrorCode::bad_frame) << "length " << n;
    }
  }
}

// Offsets into sample_request()'s frame: header 24, deadline 4, model length 2 + "mlp" 3,
// count 4, then tensor "x": name length 2 + 1, dtype 1, rank 1, dims 2 x 8, byte count 8.
constexpr size_t kFirstTensor = kHeaderBytes + 4 + 2 + 3 + 4;
constexpr size_t kDtypeAt = kFirstTensor + 3;
constexpr size_t kRankAt = kDtypeAt + 1;
constexpr size_t kDimsAt = kRankAt + 1;
constexpr size_t kByteCountAt = kDimsAt + 16;

TEST(SwitchProtocol, TensorFieldChecks) {
  const auto frame = encode_infer_request(sample_request());
  ASSERT_EQ(static_cast<uint8_t>(frame[kDtypeAt]), dtype_code(kFloat32));
  auto patch = [&](size_t at, const void* value, size_t n) {
    auto f = frame;
    std::memcpy(f.data() + at, value, n);
    return f;
  };
  const uint8_t zero = 0, big = 200;
  EXPECT_THAT(
      [&] {
        try {
          decode_frame(patch(kDtypeAt, &big, 1));
        } catch (const SwitchError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("dtype code"));
  EXPECT_EQ(code_of([&] { decode_frame(patch(kDtypeAt, &zero, 1)); }), ErrorCode::bad_frame);
  EXPECT_EQ(code_of([&] { decode_frame(patch(kRankAt, &big, 1)); }), ErrorCode::too_large);
  const int64_t negative = -1, huge = int64_t{1} << 62;
  EXPECT_EQ(code_of([&] { decode_frame(patch(kDimsAt, &negative, 8)); }), ErrorCode::bad_frame);
  EXPECT_EQ(code_of([&] { decode_frame(patch(kDimsAt, &huge, 8)); }), ErrorCode::too_large);
  const int64_t three = 3;
  EXPECT_EQ(code_of([&] { decode_frame(patch(kDimsAt, &three, 8)); }), ErrorCode::bad_frame);
  const uint64_t wrong_bytes = 20;
  EXPECT_EQ(code_of([&] { decode_frame(patch(kByteCountAt, &wrong_bytes, 8)); }),
            ErrorCode::bad_frame);
  // A bool byte other than 0 or 1 (the last byte of the frame is the mask's second element).
  auto bad_bool = frame;
  bad_bool.back() = std::byte{7};
  EXPECT_EQ(code_of([&] { decode_frame(bad_bool); }), ErrorCode::bad_frame);
  // Trailing bytes.
  auto trailing = frame;
  trailing.push_back(std::byte{0});
  const uint64_t payload = trailing.size() - kHeaderBytes;
  std::memcpy(trailing.data() + 16, &payload, 8);
  EXPECT_EQ(code_of([&] { decode_frame(trailing); }), ErrorCode::bad_frame);
}

TEST(SwitchProtocol, LimitsOnCountsAndNames) {
  Limits limits;
  limits.max_tensors = 1;
  const auto frame = encode_infer_request(sample_request());
  EXPECT_EQ(code_of([&] { decode_frame(frame, limits); }), ErrorCode::too_large);
  EXPECT_EQ(code_of([&] { encode_infer_request(sample_request(), limits); }), ErrorCode::bad_input);
  Limits names;
  names.max_name_bytes = 2;
  EXPECT_EQ(code_of([&] { decode_frame(frame, names); }), ErrorCode::too_large);
  InferRequest long_name = sample_request();
  long_name.model = std::string(300, 'm');
  EXPECT_EQ(code_of([&] { encode_infer_request(long_name); }), ErrorCode::bad_input);
  // Error messages are cut, not refused.
  Limits short_messages;
  short_messages.max_message_bytes = 4;
  const auto e =
      decode_frame(encode_error_response(1, ErrorCode::internal, "a long message", short_messages));
  EXPECT_EQ(e.error.message, "a lo");
}

// Thousands of random and mutated frames: each decodes or raises SwitchError, nothing else.
TEST(SwitchProtocol, FuzzDecoder) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  std::mt19937_64 rng = ::ferry::testing::test_rng();
  std::vector<std::vector<std::byte>> seeds = {
      encode_infer_request(sample_request()),
      encode_infer_response(1, InferResult{{{"y", filled(kFloat16, {2, 2}, 3)}}, {1, 2, 3}}),
      encode_error_response(1, ErrorCode::bad_input, "message")};
  int decoded = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> f = seeds[rng() % seeds.size()];
    switch (rng() % 4) {
      case 0:  // flip bytes
        for (int k = 0, n = 1 + static_cast<int>(rng() % 8); k < n; ++k) {
          f[rng() % f.size()] = static_cast<std::byte>(rng());
        }
        break;
      case 1:  // truncate or extend
        f.resize(rng() % (f.size() + 16), std::byte{0});
        break;
      case 2: {  // random bytes behind a valid header prefix
        const size_t keep = std::min<size_t>(f.size(), rng() % (kHeaderBytes + 1));
        f.resize(keep + rng() % 128);
        for (size_t k = keep; k < f.size(); ++k) f[k] = static_cast<std::byte>(rng());
        break;
      }
      default: {  // a field overwritten with an extreme value
        if (f.size() < 8) break;
        const uint64_t extremes[] = {
            0, 1, 0xFF, 0xFFFF, 0xFFFFFFFF, ~uint64_t{0}, uint64_t{1} << 63};
        const uint64_t v = extremes[rng() % 7];
        std::memcpy(f.data() + rng() % (f.size() - 7), &v, 8);
      }
    }
    try {
      decode_frame(f);
      ++decoded;
    } catch (const SwitchError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_EQ(decoded + refused, 20000);
}

}  // namespace
}  // namespace ferry::switch_
