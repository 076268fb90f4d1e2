// Event semantics as CUDA defines them: re-recording moves the mark (plain and timing events, also
// onto another stream while the first mark is still pending); a wait captures the mark as it is
// when the wait is queued; elapsed time follows the latest records; an event created but never
// recorded is complete. Pending work is held by Gates, so nothing here depends on timing except
// lower bounds of measured intervals.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "ferry/device/event.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using std::chrono::milliseconds;

void sleep_on(const Stream& s, int ms) {
  enqueue_host_function(s, [ms] { std::this_thread::sleep_for(milliseconds(ms)); });
}

using EventTest = SimTest;

TEST_F(EventTest, ReRecordingAPlainEventMovesItsMark) {
  const Device dev("sim:0");
  const Stream a = get_stream_from_pool(dev);
  const Stream b = get_stream_from_pool(dev);
  const Stream c = get_stream_from_pool(dev);
  const Stream d = get_stream_from_pool(dev);
  ASSERT_TRUE(a != b && a != c && a != d && b != c && b != d && c != d);
  Gate gate(milliseconds(10000));
  enqueue_host_function(a, gate.blocker());
  Event e;
  e.record(a);
  EXPECT_FALSE(e.query());

  // c's wait captures the mark on a, as cudaStreamWaitEvent does; a later record does not
  // change what c waits for.
  e.block(c);
  std::atomic<bool> c_ran{false};
  enqueue_host_function(c, [&] { c_ran = true; });

  e.record(b);  // b has nothing queued: the mark moves there, a's pending mark is forgotten
  EXPECT_TRUE(e.query());
  e.synchronize();  // returns although a is still held
  e.block(d);
  std::atomic<bool> d_ran{false};
  enqueue_host_function(d, [&] { d_ran = true; });
  d.synchronize();
  EXPECT_TRUE(d_ran.load());
  EXPECT_FALSE(gate.timed_out()) << "d waited for a's forgotten mark";
  EXPECT_FALSE(c_ran.load()) << "c must still wait for the mark it captured on a";
  EXPECT_FALSE(c.query());

  gate.open();
  c.synchronize();
  EXPECT_TRUE(c_ran.load());
  EXPECT_FALSE(gate.timed_out());
}

TEST_F(EventTest, ReRecordingATimingEventWhileItsFirstMarkIsPending) {
  const Device dev("sim:0");
  const Stream a = get_stream_from_pool(dev);
  const Stream b = get_stream_from_pool(dev);
  ASSERT_NE(a, b);
  Gate gate(milliseconds(10000));
  enqueue_host_function(a, gate.blocker());
  Event start(true), end(true);
  start.record(a);  // stays pending behind the gate
  start.record(b);
  sleep_on(b, 30);
  end.record(b);
  const float first = start.elapsed_time(end);  // waits for b only
  EXPECT_GE(first, 29.0F);
  EXPECT_FALSE(gate.timed_out()) << "elapsed_time waited for the superseded mark on a";
  EXPECT_FALSE(a.query());

  // The superseded mark runs now; it must not restamp the event.
  gate.open();
  a.synchronize();
  EXPECT_EQ(start.elapsed_time(end), first);
}

TEST_F(EventTest, ElapsedTimeFollowsTheLatestRecords) {
  const Stream s = get_stream_from_pool(Device("sim:1"));
  Event start(true), end(true);
  start.record(s);
  sleep_on(s, 40);
  end.record(s);
  EXPECT_GE(start.elapsed_time(end), 39.0F);

  // Re-recorded after end, start now lies at least 30 ms later than end.
  sleep_on(s, 30);
  start.record(s);
  EXPECT_LE(start.elapsed_time(end), -29.0F);
  EXPECT_GE(end.elapsed_time(start), 29.0F);

  // And re-recording end moves the other side.
  sleep_on(s, 20);
  end.record(s);
  EXPECT_GE(start.elapsed_time(end), 19.0F);
}

TEST_F(EventTest, BackendEventNeverRecordedIsComplete) {
  Backend& b = sim_backend();
  const Stream s0 = get_stream_from_pool(Device("sim:0"));
  for (const bool timing : {false, true}) {
    SCOPED_TRACE(timing ? "timing event" : "plain event");
    for (const int event_device : {0, 1}) {
      RawEvent e = b.event_create(event_device, timing);
      EXPECT_TRUE(b.event_query(event_device, e));
      b.event_synchronize(event_device, e);  // returns at once
      // Waiting on it is a no-op, from the event's device or another one.
      b.stream_wait_event(0, s0.raw(), e);
      EXPECT_EQ(sim::pending_operations(0, s0.raw()), 0u) << "a wait was queued";
      std::atomic<bool> ran{false};
      enqueue_host_function(s0, [&] { ran = true; });
      s0.synchronize();
      EXPECT_TRUE(ran.load());
      b.event_destroy(event_device, e);
    }
  }
  // Elapsed time needs recorded timing events.
  RawEvent t0 = b.event_create(0, true);
  RawEvent t1 = b.event_create(0, true);
  const std::string message = error_of<DeviceError>([&] { b.event_elapsed_ms(0, t0, t1); });
  EXPECT_NE(message.find("sim:0: event_elapsed_ms: expected the start event to be a completed "
                         "timing event, but it is not recorded"),
            std::string::npos)
      << message;
  b.event_destroy(0, t0);
  b.event_destroy(0, t1);
}

TEST_F(EventTest, BackendTimingEventReRecordedAtTheSamePositionOfAnotherStream) {
  // Both streams are fresh, so the two records of `start` get the same queue position (2); the
  // completed record on x must not count for the pending one on y.
  Backend& b = sim_backend();
  RawStream x = b.stream_create(0);
  RawStream y = b.stream_create(0);
  RawEvent start = b.event_create(0, true);
  RawEvent end = b.event_create(0, true);
  b.launch_host_func(0, x, [] {});
  b.event_record(0, start, x);
  b.event_record(0, end, x);
  b.stream_synchronize(0, x);
  EXPECT_GE(b.event_elapsed_ms(0, start, end), 0.0F);
  {
    Gate gate(milliseconds(10000));
    b.launch_host_func(0, y, gate.blocker());
    b.event_record(0, start, y);
    EXPECT_FALSE(b.event_query(0, start));
    const std::string message = error_of<DeviceError>([&] { b.event_elapsed_ms(0, start, end); });
    EXPECT_NE(message.find("expected the start event to be a completed timing event, but it is "
                           "not complete"),
              std::string::npos)
        << message;
    gate.open();
    b.stream_synchronize(0, y);
    EXPECT_FALSE(gate.timed_out());
  }
  EXPECT_TRUE(b.event_query(0, start));
  EXPECT_LE(b.event_elapsed_ms(0, start, end), 0.0F);  // start was re-recorded after end
  b.event_destroy(0, start);
  b.event_destroy(0, end);
  b.stream_destroy(0, x);
  b.stream_destroy(0, y);
}

}  // namespace
}  // namespace ferry::testing
