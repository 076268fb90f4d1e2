// FERRY_SIM_LATENCY and FERRY_SIM_BANDWIDTH per link, measured with timing events: each copy
// must cost what its own link says. Every case makes the link under test cheap and every other
// link very slow, so a copy priced on the wrong link fails the (loose) upper bound and a copy not
// priced at all fails the (reliable) lower bound. Settings go through SimConfig::from_env with a
// private map, never the process environment; SimTest restores the defaults afterwards.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ferry/device/event.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"

namespace ferry::testing {
namespace {

// A copy priced on a wrong (slow) link takes seconds; the right one well under this, even on a
// loaded machine.
constexpr float kUpperBoundMs = 2500.0F;

// The paths a copy can take, and what each should cost.
enum class Path { kHostToDevice, kDeviceToHost, kDeviceToDevice, kPeer, kPeerCopy, kStaged };

const char* path_name(Path path) {
  switch (path) {
    case Path::kHostToDevice:
      return "host-to-device (h2d)";
    case Path::kDeviceToHost:
      return "device-to-host (d2h)";
    case Path::kDeviceToDevice:
      return "device-to-device on one device (d2d)";
    case Path::kPeer:
      return "memcpy_async across devices with peer access (peer)";
    case Path::kPeerCopy:
      return "memcpy_peer_async with peer access (peer)";
    case Path::kStaged:
      return "memcpy_peer_async without peer access (d2h + h2d)";
  }
  return "?";
}

struct Case {
  Path path;
  const char* setting;  // every link slow, then the link(s) under test cheap
  float lower_ms;
};

class LinkCostTest : public SimTest {
 protected:
  static constexpr size_t kBytes = 100000;

  // Runs one copy along `path` on a sim:0 stream and returns its time in ms, from events
  // recorded right before and after it.
  float timed_copy(Path path, size_t nbytes = kBytes) {
    Backend& b = sim_backend();
    const Stream s = get_stream_from_pool(Device("sim:0"));
    if (path == Path::kPeer || path == Path::kPeerCopy) {
      EXPECT_TRUE(enable_peer_access(Device("sim:0"), Device("sim:1")));
    }
    Event start(true), end(true);
    start.record(s);
    switch (path) {
      case Path::kHostToDevice:
        b.memcpy_async(0, x0_.get(), host_.get(), nbytes, CopyKind::HostToDevice, s.raw());
        break;
      case Path::kDeviceToHost:
        b.memcpy_async(0, host_.get(), x0_.get(), nbytes, CopyKind::DeviceToHost, s.raw());
        break;
      case Path::kDeviceToDevice:
        b.memcpy_async(0, y0_.get(), x0_.get(), nbytes, CopyKind::DeviceToDevice, s.raw());
        break;
      case Path::kPeer:
        b.memcpy_async(0, x0_.get(), x1_.get(), nbytes, CopyKind::DeviceToDevice, s.raw());
        break;
      case Path::kPeerCopy:
      case Path::kStaged:
        b.memcpy_peer_async(x0_.get(), 0, x1_.get(), 1, nbytes, 0, s.raw());
        break;
    }
    end.record(s);
    return start.elapsed_time(end);
  }

  // For each case: sets `variable` to the case's setting alone, then times one copy along its
  // path against the case's lower bound and the common upper bound.
  void expect_charged(const char* variable, const std::vector<Case>& cases) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(path_name(c.path)) + ", " + variable + "=" + c.setting);
      set({{variable, c.setting}});
      const float ms = timed_copy(c.path);
      EXPECT_GE(ms, c.lower_ms - 0.5F);
      EXPECT_LT(ms, kUpperBoundMs);
    }
  }

  // Reconfigures the sim from FERRY_SIM_* values (peer access is disabled again).
  static void set(const std::map<std::string, std::string>& env) {
    sim::configure(config_from_env(env));
  }

  SimBuffer x0_{0, 2 * kBytes};
  SimBuffer y0_{0, 2 * kBytes};
  SimBuffer x1_{1, 2 * kBytes};
  PinnedBuffer host_{2 * kBytes};
};

TEST_F(LinkCostTest, LatencyIsChargedOnTheCopysOwnLink) {
  const std::vector<Case> cases = {
      {Path::kHostToDevice, "5s,h2d=60ms", 60},   {Path::kDeviceToHost, "5s,d2h=60ms", 60},
      {Path::kDeviceToDevice, "5s,d2d=60ms", 60}, {Path::kPeer, "5s,peer=60ms", 60},
      {Path::kPeerCopy, "5s,peer=60ms", 60},      {Path::kStaged, "5s,d2h=40ms,h2d=50ms", 90},
  };
  expect_charged("FERRY_SIM_LATENCY", cases);
}

TEST_F(LinkCostTest, BandwidthIsChargedOnTheCopysOwnLink) {
  // 100000 bytes at 1 MB/s take 100 ms; at 10 KB/s, 10 s.
  const std::vector<Case> cases = {
      {Path::kHostToDevice, "10K,h2d=1M", 100},   {Path::kDeviceToHost, "10K,d2h=1M", 100},
      {Path::kDeviceToDevice, "10K,d2d=1M", 100}, {Path::kPeer, "10K,peer=1M", 100},
      {Path::kPeerCopy, "10K,peer=1M", 100},      {Path::kStaged, "10K,d2h=1M,h2d=2M", 150},
  };
  expect_charged("FERRY_SIM_BANDWIDTH", cases);
}

TEST_F(LinkCostTest, CostIsLatencyPlusBytesOverBandwidth) {
  set({{"FERRY_SIM_LATENCY", "5s,h2d=30ms"}, {"FERRY_SIM_BANDWIDTH", "10K,h2d=1M"}});
  EXPECT_GE(timed_copy(Path::kHostToDevice, kBytes), 129.5F);  // 30 + 100
  const float twice = timed_copy(Path::kHostToDevice, 2 * kBytes);
  EXPECT_GE(twice, 229.5F);  // 30 + 200
  EXPECT_LT(twice, kUpperBoundMs);
  // Memsets are not priced.
  Backend& b = sim_backend();
  const Stream s = get_stream_from_pool(Device("sim:0"));
  Event start(true), end(true);
  start.record(s);
  b.memset_async(0, x0_.get(), 1, 2 * kBytes, s.raw());
  end.record(s);
  EXPECT_LT(start.elapsed_time(end), 1000.0F);
}

TEST_F(LinkCostTest, SynchronousAndPageableCopiesArePricedToo) {
  set({{"FERRY_SIM_LATENCY", "5s,h2d=60ms,d2h=70ms"}});
  Backend& b = sim_backend();
  std::vector<unsigned char> pageable(kBytes, 4);
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  b.memcpy(0, x0_.get(), pageable.data(), kBytes, CopyKind::HostToDevice);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_GE(ms, 59.5);
  EXPECT_LT(ms, kUpperBoundMs);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  start = Clock::now();
  b.memcpy_async(0, pageable.data(), x0_.get(), kBytes, CopyKind::DeviceToHost, s.raw());
  ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_GE(ms, 69.5) << "a pageable copy returns once it is done, its time spent";
  EXPECT_LT(ms, kUpperBoundMs);
  EXPECT_EQ(pageable, std::vector<unsigned char>(kBytes, 4));
}

}  // namespace
}  // namespace ferry::testing
