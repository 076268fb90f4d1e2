// Stream values, the pool, current streams per thread, guards, wait_stream and device errors.
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using StreamTest = SimTest;

TEST_F(StreamTest, TheIssueExampleCompilesAndBehaves) {
  ferry::Device dev("sim:0");
  ferry::Stream side = ferry::get_stream_from_pool(dev);
  ferry::Stream main = ferry::current_stream(dev);
  {
    ferry::StreamGuard guard(side);
    EXPECT_EQ(ferry::current_stream(dev), side);
    ferry::Event done;
    done.record(side);
    done.block(main);
  }
  EXPECT_EQ(ferry::current_stream(dev), main);
  ferry::wait_stream(main, side);
  main.synchronize();
  EXPECT_EQ(ferry::device_count(ferry::DeviceType::Sim), 2);
}

TEST_F(StreamTest, EqualityHashingAndPrinting) {
  const Stream a(Device("sim:0"), 3);
  const Stream b(Device("sim:0"), 3);
  const Stream c(Device("sim:1"), 3);
  const Stream d(Device("sim:0"), 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  EXPECT_EQ(std::hash<Stream>()(a), std::hash<Stream>()(b));
  std::unordered_set<Stream> set{a, b, c, d, default_stream(Device("sim:0")), Stream()};
  EXPECT_EQ(set.size(), 5u);

  EXPECT_EQ(a.str(), "sim:0/stream 3");
  EXPECT_EQ(default_stream(Device("sim:1")).str(), "sim:1/default stream");
  EXPECT_EQ(Stream().str(), "cpu/stream");
  std::ostringstream out;
  out << c;
  EXPECT_EQ(out.str(), "sim:1/stream 3");
}

TEST_F(StreamTest, DefaultAndCurrentStreams) {
  const Device dev("sim:1");
  const Stream def = default_stream(dev);
  EXPECT_TRUE(def.is_default());
  EXPECT_EQ(def.device(), dev);
  EXPECT_EQ(current_stream(dev), def);
  // An index-less device means the current device of its type.
  EXPECT_EQ(default_stream(Device("sim")).device(), current_device(DeviceType::Sim));

  const Stream pool = get_stream_from_pool(dev);
  set_current_stream(pool);
  EXPECT_EQ(current_stream(dev), pool);
  EXPECT_EQ(current_stream(Device("sim:0")), default_stream(Device("sim:0")));  // per device
  set_current_stream(def);
  EXPECT_EQ(current_stream(dev), def);
}

TEST_F(StreamTest, PoolIsRoundRobinOverNonDefaultStreams) {
  const Device dev("sim:0");
  std::unordered_set<StreamId> ids;
  const Stream first = get_stream_from_pool(dev);
  ids.insert(first.id());
  for (int i = 1; i < kStreamPoolSize; ++i) ids.insert(get_stream_from_pool(dev).id());
  EXPECT_EQ(ids.size(), static_cast<size_t>(kStreamPoolSize));
  EXPECT_EQ(ids.count(kDefaultStreamId), 0u);
  EXPECT_EQ(get_stream_from_pool(dev), first);  // wrapped around
}

TEST_F(StreamTest, CurrentStreamIsPerThread) {
  const Device dev("sim:0");
  const Stream mine = get_stream_from_pool(dev);
  set_current_stream(mine);
  Stream seen_by_other;
  std::thread other([&] { seen_by_other = current_stream(dev); });
  other.join();
  EXPECT_EQ(seen_by_other, default_stream(dev));
  EXPECT_EQ(current_stream(dev), mine);
  set_current_stream(default_stream(dev));
}

class StreamCountTest : public SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.devices = 4;
    return c;
  }
};

TEST_F(StreamCountTest, StreamsInUseCountsCreatedStreams) {
  // No other test touches sim:3, and backend streams live as long as the process: this test sees
  // an untouched device on its first run and every stream created on a --gtest_repeat run.
  const Device dev("sim:3");
  const int before = streams_in_use(dev);
  if (before == 0) {
    const Stream pool = get_stream_from_pool(dev);
    EXPECT_EQ(streams_in_use(dev), 0) << "handing out a Stream value creates nothing";
    default_stream(dev).synchronize();
    EXPECT_EQ(streams_in_use(dev), 1);
    default_stream(dev).query();
    EXPECT_EQ(streams_in_use(dev), 1) << "the default stream is created once";
    pool.synchronize();
    EXPECT_EQ(streams_in_use(dev), 2);
    Stream(dev, pool.id()).query();
    EXPECT_EQ(streams_in_use(dev), 2) << "the same pool stream again";
  } else {
    EXPECT_EQ(before, 1 + kStreamPoolSize) << "an earlier run created every stream of " << dev;
  }
  for (StreamId id = 0; id <= kStreamPoolSize; ++id) Stream(dev, id).synchronize();
  EXPECT_EQ(streams_in_use(dev), 1 + kStreamPoolSize);
  EXPECT_EQ(streams_in_use(Device("cpu")), 0);
}

TEST_F(StreamTest, CpuStreamIsAPlaceholder) {
  const Stream cpu = current_stream(Device("cpu"));
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_EQ(cpu, Stream());
  EXPECT_EQ(get_stream_from_pool(Device("cpu")), cpu);
  EXPECT_TRUE(cpu.query());
  cpu.synchronize();
  EXPECT_EQ(cpu.raw(), nullptr);
  int ran = 0;
  enqueue_host_function(cpu, [&] { ++ran; });
  EXPECT_EQ(ran, 1);       // synchronously
  StreamGuard guard(cpu);  // no-op
  Event e;
  e.record(cpu);
  EXPECT_TRUE(e.query());
  e.block(cpu);
  e.synchronize();
}

TEST_F(StreamTest, DeviceIndexOutOfRangeNamesIndexAndCount) {
  const std::string message = error_of<DeviceError>([] { default_stream(Device("sim:5")); });
  EXPECT_NE(message.find("sim:5"), std::string::npos) << message;
  EXPECT_NE(message.find("below 2"), std::string::npos) << message;
  EXPECT_NE(message.find("there are 2 sim devices"), std::string::npos) << message;
  EXPECT_NE(message.find("got 5"), std::string::npos) << message;
  EXPECT_THROW(Stream(Device("sim:2"), 0), DeviceError);
  EXPECT_THROW(set_device(Device("sim:9")), DeviceError);
  EXPECT_THROW(DeviceGuard(Device("sim:3")), DeviceError);
}

TEST_F(StreamTest, StreamIdOutOfRange) {
  const std::string message =
      // Ids above the pool name registered streams (priority, external); other tests of this
      // process may have registered a few, but not a million.
      error_of<DeviceError>([] { Stream(Device("sim:0"), kStreamPoolSize + (1 << 20)); });
  EXPECT_NE(message.find("stream id between 0 and"), std::string::npos) << message;
  EXPECT_THROW(Stream(Device("sim:0"), -1), DeviceError);
  EXPECT_THROW(Stream(Device("cpu"), 1), DeviceError);
}

TEST_F(StreamTest, WaitStreamEveryCombination) {
  const Device d0("sim:0");
  const Device d1("sim:1");
  const Stream a = get_stream_from_pool(d0);
  const Stream b = get_stream_from_pool(d1);
  const Stream cpu;
  std::atomic<bool> done{false};
  // device <- device (across devices): b waits for a's slow host function, the host does not.
  enqueue_host_function(a, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    done = true;
  });
  wait_stream(b, a);
  bool seen_on_b = false;
  enqueue_host_function(b, [&] { seen_on_b = done.load(); });
  b.synchronize();
  EXPECT_TRUE(seen_on_b);

  // cpu <- device: the host synchronizes the device stream.
  done = false;
  enqueue_host_function(a, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done = true;
  });
  wait_stream(cpu, a);
  EXPECT_TRUE(done.load());

  // anything <- cpu, and a stream waiting for itself: nothing to do.
  wait_stream(a, cpu);
  wait_stream(cpu, cpu);
  wait_stream(a, a);
  a.wait_stream(b);
  a.synchronize();
}

TEST_F(StreamTest, DeviceGuardRestoresIncludingOnException) {
  set_device(Device("sim:0"));
  {
    DeviceGuard guard(Device("sim:1"));
    EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:1"));
    EXPECT_EQ(guard.original_device(), Device("sim:0"));
    guard.set_device(Device("sim:0"));
    EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
    guard.set_device(Device("sim:1"));
  }
  EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
  EXPECT_THROW(
      {
        DeviceGuard guard(Device("sim:1"));
        throw std::runtime_error("unwind");
      },
      std::runtime_error);
  EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
  DeviceGuard cpu_guard(Device("cpu"));  // no-op
  EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
}

TEST_F(StreamTest, OptionalDeviceGuard) {
  set_device(Device("sim:0"));
  {
    OptionalDeviceGuard guard;
    EXPECT_FALSE(guard.original_device().has_value());
    guard.set_device(Device("sim:1"));
    EXPECT_EQ(guard.original_device(), Device("sim:0"));
    EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:1"));
    guard.reset();
    EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
    guard.set_device(Device("sim:1"));
  }
  EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
  { OptionalDeviceGuard none(std::nullopt); }
  EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
}

TEST_F(StreamTest, StreamGuardSetsDeviceAndStreamAndRestoresBoth) {
  set_device(Device("sim:0"));
  const Stream s1 = get_stream_from_pool(Device("sim:1"));
  const Stream s0 = get_stream_from_pool(Device("sim:0"));
  {
    StreamGuard guard(s1);
    EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:1"));
    EXPECT_EQ(current_stream(Device("sim:1")), s1);
    EXPECT_EQ(current_stream(Device("sim")), s1);
    guard.reset_stream(s0);  // another device: sim:1's stream is restored first
    EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
    EXPECT_EQ(current_stream(Device("sim:0")), s0);
    EXPECT_EQ(current_stream(Device("sim:1")), default_stream(Device("sim:1")));
  }
  EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
  EXPECT_EQ(current_stream(Device("sim:0")), default_stream(Device("sim:0")));
  EXPECT_THROW(
      {
        StreamGuard guard(s1);
        throw std::runtime_error("unwind");
      },
      std::runtime_error);
  EXPECT_EQ(current_device(DeviceType::Sim), Device("sim:0"));
  EXPECT_EQ(current_stream(Device("sim:1")), default_stream(Device("sim:1")));
}

TEST_F(StreamTest, HostFunctionErrorIsReportedBySynchronize) {
  const Stream s = get_stream_from_pool(Device("sim:0"));
  enqueue_host_function(s, [] { throw std::runtime_error("boom"); });
  std::string message = error_of<DeviceError>([&] { s.synchronize(); });
  EXPECT_NE(message.find("sim:0: stream_synchronize: stream "), std::string::npos) << message;
  EXPECT_NE(message.find("a host function raised: boom"), std::string::npos) << message;
  s.synchronize();  // reported once

  enqueue_host_function(s, [] { throw std::runtime_error("bang"); });
  message = error_of<DeviceError>([&] { device_synchronize(Device("sim:0")); });
  EXPECT_NE(message.find("sim:0: device_synchronize: stream "), std::string::npos) << message;
  EXPECT_NE(message.find("bang"), std::string::npos) << message;
  s.synchronize();
}

}  // namespace
}  // namespace ferry::testing
