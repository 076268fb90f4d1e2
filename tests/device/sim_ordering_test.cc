// Ordering on the sim device: in-order streams, overlapping streams, events between streams,
// blocking synchronization and timing. Delays come from FERRY_SIM_LATENCY-style settings or
// sleeping host functions, so the assertions hold on a loaded two-core machine.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"

namespace ferry::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

using SimOrderingTest = SimTest;

TEST_F(SimOrderingTest, WorkOnOneStreamRunsInOrder) {
  const Stream s = get_stream_from_pool(Device("sim:0"));
  std::vector<int> order;  // touched only by the stream's worker until synchronize
  for (int i = 0; i < 500; ++i) enqueue_host_function(s, [&order, i] { order.push_back(i); });
  s.synchronize();
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(order[static_cast<size_t>(i)], i);

  // The same for copies: each step reads what the previous one wrote.
  constexpr size_t n = 1 << 16;
  SimBuffer x(0, n), y(0, n);
  PinnedBuffer out(n);
  Backend& b = sim_backend();
  b.memset_async(0, x.get(), 1, n, s.raw());
  b.memcpy_async(0, y.get(), x.get(), n, CopyKind::DeviceToDevice, s.raw());
  b.memset_async(0, x.get(), 2, n, s.raw());
  b.memcpy_async(0, out.get(), y.get(), n, CopyKind::DeviceToHost, s.raw());
  s.synchronize();
  EXPECT_TRUE(out.all_equal(1));
  EXPECT_EQ(read_back(x.get(), n, 0), std::vector<unsigned char>(n, 2));
}

class SimLatencyTest : public SimTest {
 protected:
  static constexpr int kLatencyMs = 150;
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.latency[static_cast<size_t>(sim::Link::HostToDevice)] = milliseconds(kLatencyMs);
    return c;
  }
};

TEST_F(SimLatencyTest, TwoStreamsOverlapUnlessOneWaits) {
  const Device dev("sim:0");
  const Stream a = get_stream_from_pool(dev);
  const Stream b = get_stream_from_pool(dev);
  ASSERT_NE(a, b);
  SimBuffer x(0, 4096), y(0, 4096);
  PinnedBuffer src(4096);
  Backend& backend = sim_backend();

  for (bool wait : {false, true}) {
    SCOPED_TRACE(wait ? "b waits for a" : "independent streams");
    Event a0(true), a1(true), b0(true), b1(true);
    a0.record(a);
    backend.memcpy_async(0, x.get(), src.get(), 4096, CopyKind::HostToDevice, a.raw());
    a1.record(a);
    if (wait) wait_stream(b, a);
    b0.record(b);
    backend.memcpy_async(0, y.get(), src.get(), 4096, CopyKind::HostToDevice, b.raw());
    b1.record(b);
    a.synchronize();
    b.synchronize();
    EXPECT_GE(a0.elapsed_time(a1), kLatencyMs - 5);
    EXPECT_GE(b0.elapsed_time(b1), kLatencyMs - 5);
    if (wait) {
      EXPECT_GE(a1.elapsed_time(b0), 0.0F);  // b started after a finished
      EXPECT_GE(a0.elapsed_time(b1), 2 * kLatencyMs - 10);
    } else {
      EXPECT_LT(a0.elapsed_time(b0), a0.elapsed_time(a1));  // b started before a finished
      EXPECT_LT(a0.elapsed_time(b1), 1.6 * kLatencyMs);
    }
  }
}

TEST_F(SimLatencyTest, BandwidthAndLatencyApplyToCopies) {
  const Stream s = get_stream_from_pool(Device("sim:1"));
  SimBuffer x(1, 4096);
  std::vector<unsigned char> pageable(4096, 3);
  const auto start = Clock::now();
  // Pageable memory: the copy is done (and its simulated time spent) before the call returns.
  sim_backend().memcpy_async(1, x.get(), pageable.data(), 4096, CopyKind::HostToDevice, s.raw());
  EXPECT_GE(ms_since(start), kLatencyMs - 5);
  EXPECT_TRUE(s.query());
  EXPECT_EQ(read_back(x.get(), 4096, 1), pageable);
}

TEST_F(SimOrderingTest, EventRecordedBeforeAWriteOrdersAReadOnAnotherStream) {
  constexpr size_t n = 1 << 16;
  const Device dev("sim:0");
  const Stream writer = get_stream_from_pool(dev);
  const Stream reader = get_stream_from_pool(dev);
  SimBuffer x(0, n);
  PinnedBuffer out(n);
  Backend& b = sim_backend();
  b.memset(0, x.get(), 0, n);
  {
    // The writer is held shut until the reader's work is queued; without the event the reader
    // would copy zeros.
    Gate gate;
    enqueue_host_function(writer, gate.blocker());
    b.memset_async(0, x.get(), 7, n, writer.raw());
    Event written;
    written.record(writer);
    EXPECT_FALSE(written.query());
    written.block(reader);
    b.memcpy_async(0, out.get(), x.get(), n, CopyKind::DeviceToHost, reader.raw());
    EXPECT_FALSE(reader.query()) << "the read must wait for the gated write";
    gate.open();
    reader.synchronize();
    EXPECT_FALSE(gate.timed_out());
    EXPECT_TRUE(written.query());
    EXPECT_TRUE(out.all_equal(7));
  }
  {
    // And the other way round: the reader's event lets the writer overwrite only after the read.
    Gate gate;
    enqueue_host_function(reader, gate.blocker());
    b.memcpy_async(0, out.get(), x.get(), n, CopyKind::DeviceToHost, reader.raw());
    Event read_done;
    read_done.record(reader);
    writer.wait_event(read_done);
    b.memset_async(0, x.get(), 9, n, writer.raw());
    EXPECT_FALSE(writer.query()) << "the overwrite must wait for the gated read";
    gate.open();
    writer.synchronize();
    reader.synchronize();
    EXPECT_FALSE(gate.timed_out());
    EXPECT_TRUE(out.all_equal(7));
    EXPECT_EQ(read_back(x.get(), n, 0), std::vector<unsigned char>(n, 9));
  }
}

TEST_F(SimOrderingTest, CrossDeviceEventWait) {
  const Stream s0 = get_stream_from_pool(Device("sim:0"));
  const Stream s1 = get_stream_from_pool(Device("sim:1"));
  std::atomic<bool> first_done{false};
  bool ordered = false;
  enqueue_host_function(s0, [&] {
    std::this_thread::sleep_for(milliseconds(30));
    first_done = true;
  });
  Event e;
  e.record(s0);
  EXPECT_EQ(e.device(), Device("sim:0"));
  e.block(s1);
  enqueue_host_function(s1, [&] { ordered = first_done.load(); });
  s1.synchronize();
  EXPECT_TRUE(ordered);
  // Bound to sim:0 now: recording on sim:1 is an error naming both.
  EXPECT_THROW(e.record(s1), DeviceError);
}

TEST_F(SimOrderingTest, SynchronizeBlocksUntilDone) {
  const Stream s = get_stream_from_pool(Device("sim:1"));
  std::atomic<bool> finished{false};
  const auto start = Clock::now();
  enqueue_host_function(s, [&] {
    std::this_thread::sleep_for(milliseconds(80));
    finished = true;
  });
  Event e;
  e.record(s);
  EXPECT_FALSE(s.query());
  EXPECT_FALSE(e.query());
  e.synchronize();
  EXPECT_TRUE(finished.load());
  EXPECT_GE(ms_since(start), 75);
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(s.query());

  finished = false;
  enqueue_host_function(s, [&] {
    std::this_thread::sleep_for(milliseconds(40));
    finished = true;
  });
  s.synchronize();
  EXPECT_TRUE(finished.load());

  finished = false;
  enqueue_host_function(s, [&] {
    std::this_thread::sleep_for(milliseconds(40));
    finished = true;
  });
  device_synchronize(Device("sim:1"));
  EXPECT_TRUE(finished.load());
}

TEST_F(SimOrderingTest, EventLifecycle) {
  Event never;
  EXPECT_FALSE(never.is_created());
  EXPECT_TRUE(never.query());
  never.synchronize();
  never.block(get_stream_from_pool(Device("sim:0")));  // no-op

  const Stream s = get_stream_from_pool(Device("sim:0"));
  Event moved_from;
  moved_from.record(s);
  EXPECT_TRUE(moved_from.is_created());
  Event moved(std::move(moved_from));
  EXPECT_TRUE(moved.is_created());
  EXPECT_FALSE(moved_from.is_created());  // NOLINT(bugprone-use-after-move)
  moved.synchronize();

  {
    StreamGuard guard(s);
    Event current;
    current.record();  // the current stream of the current sim device
    EXPECT_EQ(current.device(), Device("sim:0"));
    current.synchronize();
  }

  Event plain;
  plain.record(s);
  Event timed(true);
  timed.record(s);
  EXPECT_THROW(plain.elapsed_time(timed), DeviceError);
  Event unrecorded(true);
  EXPECT_THROW(timed.elapsed_time(unrecorded), DeviceError);
}

TEST_F(SimOrderingTest, ElapsedTimeMeasuresQueuedWork) {
  const Stream s = get_stream_from_pool(Device("sim:0"));
  Event start(true), end(true);
  start.record(s);
  enqueue_host_function(s, [] { std::this_thread::sleep_for(milliseconds(40)); });
  end.record(s);
  const float ms = start.elapsed_time(end);  // waits for both
  EXPECT_GE(ms, 39.0F);
  EXPECT_LT(ms, 2000.0F);
}

TEST_F(SimOrderingTest, ManyThreadsEnqueueConcurrently) {
  // Thread safety of enqueue/record/wait (run under ThreadSanitizer).
  constexpr int kThreads = 4;
  constexpr int kOps = 200;
  const Device dev("sim:0");
  std::atomic<int> count{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Stream mine = get_stream_from_pool(dev);
      const Stream other = get_stream_from_pool(Device(DeviceType::Sim, t % 2));
      for (int i = 0; i < kOps; ++i) {
        enqueue_host_function(mine, [&] { count.fetch_add(1); });
        if (i % 20 == 0) wait_stream(other, mine);
      }
      mine.synchronize();
      other.synchronize();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(count.load(), kThreads * kOps);
}

}  // namespace
}  // namespace ferry::testing
