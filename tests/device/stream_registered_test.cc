// Streams registered after the pool: dedicated streams with a priority and streams created
// outside ferry (wrapped, never destroyed by ferry). Both are plain Stream values that work with
// events, current-stream guards and the caching allocator, like pool streams.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <unordered_set>

#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/device/stream.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/ops/factories.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;
using RegisteredStreamTest = SimTest;

// Queues a gated copy of `n` bytes of 0x4D on `s` into `x`, records `done` behind it, and checks
// that a second stream waiting on `done` sees the bytes.
void check_event_ordering(const Stream& s, Event& done) {
  constexpr size_t n = 1 << 14;
  SimBuffer x(s.device_index(), n);
  PinnedBuffer pattern(n);
  PinnedBuffer out(n);
  std::memset(pattern.get(), 0x4D, n);
  std::memset(out.get(), 0, n);
  Gate gate(10s);
  enqueue_host_function(s, gate.blocker());
  Backend& b = get_backend(DeviceType::Sim);
  b.memcpy_async(s.device_index(), x.get(), pattern.get(), n, CopyKind::HostToDevice, s.raw());
  done.record(s);
  const Stream other = get_stream_from_pool(s.device());
  ASSERT_NE(other, s);
  done.block(other);
  b.memcpy_async(s.device_index(), out.get(), x.get(), n, CopyKind::DeviceToHost, other.raw());
  EXPECT_FALSE(other.query()) << "the waiting stream ran ahead of " << s;
  gate.open();
  other.synchronize();
  EXPECT_TRUE(s.query());
  EXPECT_FALSE(gate.timed_out());
  EXPECT_TRUE(out.all_equal(0x4D)) << s;
}

TEST_F(RegisteredStreamTest, PriorityStreamsAreValuesThatWorkLikePoolStreams) {
  const auto [least, greatest] = stream_priority_range(Device("sim:0"));
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  const Stream high = create_stream_with_priority(Device("sim:0"), -1);
  const Stream low = create_stream_with_priority(Device("sim:0"), 0);
  EXPECT_GT(high.id(), kStreamPoolSize);
  EXPECT_NE(high, low);
  EXPECT_EQ(high.priority(), -1);
  EXPECT_EQ(low.priority(), 0);
  EXPECT_FALSE(high.is_external());
  EXPECT_EQ(high.str(), "sim:0/stream " + std::to_string(high.id()) + " (priority -1)");
  // A value: rebuilt from its id, hashed, copied.
  EXPECT_EQ(Stream(Device("sim:0"), high.id()), high);
  std::unordered_set<Stream> set = {high, low, high, default_stream(Device("sim:0"))};
  EXPECT_EQ(set.size(), 3u);
  Event done;
  check_event_ordering(high, done);
  {
    StreamGuard guard(high);
    EXPECT_EQ(current_stream(Device("sim:0")), high);
  }
  EXPECT_EQ(current_stream(Device("sim:0")), default_stream(Device("sim:0")));

  std::string message =
      error_of<DeviceError>([] { create_stream_with_priority(Device("sim:0"), 1); });
  EXPECT_NE(message.find("sim:0: stream_create_with_priority: expected a priority between 0 "
                         "(lowest) and -5 (highest), but got 1"),
            std::string::npos)
      << message;
  EXPECT_THROW(create_stream_with_priority(Device("sim:0"), -6), DeviceError);
  message = error_of<DeviceError>([] { Stream(Device("sim:1"), 100000); });
  EXPECT_NE(message.find("expected a stream id between 0 and 8"), std::string::npos) << message;
}

TEST_F(RegisteredStreamTest, ExternalStreamsAreWrappedOnceAndNeverDestroyed) {
  Backend& b = sim_backend();
  RawStream raw = b.stream_create(1);
  const Stream s = wrap_external_stream(Device("sim:1"), raw);
  EXPECT_TRUE(s.is_external());
  EXPECT_EQ(s.raw(), raw);
  EXPECT_EQ(s.priority(), 0);
  EXPECT_EQ(s.str().rfind("sim:1/external stream 0x", 0), 0u) << s.str();
  EXPECT_EQ(wrap_external_stream(Device("sim:1"), raw), s) << "wrapping twice gives one Stream";
  EXPECT_EQ(wrap_external_stream(Device("sim:1"), b.default_stream(1)),
            default_stream(Device("sim:1")));
  const Stream pool = get_stream_from_pool(Device("sim:1"));
  EXPECT_EQ(wrap_external_stream(Device("sim:1"), pool.raw()), pool);
  const Stream high = create_stream_with_priority(Device("sim:1"), -2);
  EXPECT_EQ(wrap_external_stream(Device("sim:1"), high.raw()), high);
  std::string message = error_of<DeviceError>([&] { wrap_external_stream(Device("sim:0"), raw); });
  EXPECT_NE(message.find("expected a stream of sim:0, but it belongs to sim:1"), std::string::npos)
      << message;

  Event done;
  check_event_ordering(s, done);
  {
    StreamGuard guard(s);
    EXPECT_EQ(current_stream(Device("sim:1")), s);
  }
  // Still alive: ferry never destroyed it; the caller does.
  EXPECT_TRUE(b.stream_query(1, raw));
  b.stream_destroy(1, raw);
}

TEST_F(RegisteredStreamTest, CachingAllocatorServesRegisteredStreams) {
  const Stream high = create_stream_with_priority(Device("sim:0"), -3);
  RawStream raw = sim_backend().stream_create(0);
  const Stream external = wrap_external_stream(Device("sim:0"), raw);
  for (const Stream& s : {high, external}) {
    StreamGuard guard(s);
    Tensor t = full({1000}, 3.0, TensorOptions(kFloat32).device(Device("sim:0")));
    const Tensor back = t.cpu();
    for (int64_t i = 0; i < back.numel(); ++i) {
      ASSERT_EQ(static_cast<const float*>(back.data_ptr())[i], 3.0f) << s;
    }
    bool found = false;
    for (const memory::SegmentInfo& segment : memory::snapshot(Device("sim:0")).segments) {
      found = found || segment.stream == s;
    }
    EXPECT_TRUE(found) << "no caching-allocator segment serves " << s;
  }
  memory::empty_cache(Device("sim:0"));
  sim_backend().stream_destroy(0, raw);
}

}  // namespace
}  // namespace ferry::testing
