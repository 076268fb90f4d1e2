// FERRY_SIM_CHAOS proves its worth: a producer/consumer pair of streams that omits the required
// wait reads stale bytes at least once, and the same code with the wait never does. A control
// isolates chaos as the cause: a program that is ordered in practice without chaos (the host
// pauses before queuing the read) is always right with chaos off and goes wrong with it on.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

class ChaosTest : public SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.chaos_seed = test_seed();
    c.chaos_max_delay = std::chrono::milliseconds(2);
    // The variant without the wait races on device memory on purpose; keep ThreadSanitizer
    // watching host memory only. The variant with the wait keeps full checking.
    c.tsan_sees_device_memory = !racy();
    return c;
  }
  virtual bool racy() const { return false; }

  // Writes `value` on one stream and reads it back on another; returns whether the read saw it.
  // `pause`: how long the host sleeps between queuing the write and queuing the read.
  bool round(const Stream& producer, const Stream& consumer, unsigned char value, bool wait,
             std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
    Backend& b = sim_backend();
    b.memset(0, x_.get(), 0, x_.size());
    b.memset_async(0, x_.get(), value, x_.size(), producer.raw());
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    if (wait) wait_stream(consumer, producer);
    b.memcpy_async(0, out_.get(), x_.get(), x_.size(), CopyKind::DeviceToHost, consumer.raw());
    consumer.synchronize();
    producer.synchronize();
    return out_.all_equal(value);
  }

  SimBuffer x_{0, 1 << 16};
  PinnedBuffer out_{1 << 16};
};

class ChaosRacyTest : public ChaosTest {
 protected:
  bool racy() const override { return true; }
};

TEST_F(ChaosRacyTest, MissingWaitProducesAWrongResult) {
  SCOPED_TRACE(seed_trace());
  const Stream producer = get_stream_from_pool(Device("sim:0"));
  const Stream consumer = get_stream_from_pool(Device("sim:0"));
  ASSERT_NE(producer, consumer);
  // Each round is wrong with probability about 1/3 under chaos; 300 rounds all right would
  // happen with probability below 1e-50.
  int wrong = 0;
  int rounds = 0;
  while (rounds < 300 && wrong == 0) {
    wrong += round(producer, consumer, static_cast<unsigned char>(1 + rounds % 250), false) ? 0 : 1;
    ++rounds;
  }
  EXPECT_GE(wrong, 1) << "no round out of " << rounds << " saw the missing wait";
}

TEST_F(ChaosTest, WithTheWaitEveryResultIsRight) {
  SCOPED_TRACE(seed_trace());
  const Stream producer = get_stream_from_pool(Device("sim:0"));
  const Stream consumer = get_stream_from_pool(Device("sim:0"));
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(round(producer, consumer, static_cast<unsigned char>(1 + i), true))
        << "round " << i;
  }
}

// The control program: no wait, but the host pauses long enough that without chaos the write is
// done before the read is queued.
constexpr std::chrono::milliseconds kPause(50);

class ChaosControlTest : public ChaosTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.tsan_sees_device_memory = false;  // the program races on device memory by design
    return c;
  }
  // Turns chaos on with `seed`, delays long enough to overtake the pause. `racy`: the program
  // omits the wait, so ThreadSanitizer must not watch device memory.
  static void chaos_on(uint64_t seed, bool racy) {
    sim::SimConfig c;
    c.tsan_sees_device_memory = !racy;
    c.chaos_seed = seed;
    c.chaos_max_delay = std::chrono::milliseconds(300);
    sim::configure(c);
  }
};

TEST_F(ChaosControlTest, PausedProgramWithoutTheWaitIsRightWithoutChaos) {
  ASSERT_FALSE(sim::config().chaos_seed.has_value());
  const Stream producer = get_stream_from_pool(Device("sim:0"));
  const Stream consumer = get_stream_from_pool(Device("sim:0"));
  ASSERT_NE(producer, consumer);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(round(producer, consumer, static_cast<unsigned char>(1 + i), false, kPause))
        << "round " << i << ": without chaos the pause alone should order the read";
  }
}

TEST_F(ChaosControlTest, SamePausedProgramGoesWrongWithChaosForEverySeed) {
  SCOPED_TRACE(seed_trace());
  const Stream producer = get_stream_from_pool(Device("sim:0"));
  const Stream consumer = get_stream_from_pool(Device("sim:0"));
  // A round is wrong when chaos delays the write past the pause and the read less: about one
  // round in three. 40 rounds of one seed all right would happen with probability below 1e-6.
  for (uint64_t k = 0; k < 3; ++k) {
    const uint64_t seed = test_seed() + k;
    chaos_on(seed, /*racy=*/true);
    int rounds = 0;
    bool wrong = false;
    while (rounds < 40 && !wrong) {
      wrong = !round(producer, consumer, static_cast<unsigned char>(1 + rounds), false, kPause);
      ++rounds;
    }
    EXPECT_TRUE(wrong) << "chaos seed " << seed << ": no round out of " << rounds
                       << " went wrong without the wait";
  }
}

TEST_F(ChaosControlTest, SamePausedProgramWithTheWaitIsRightWithChaos) {
  SCOPED_TRACE(seed_trace());
  const Stream producer = get_stream_from_pool(Device("sim:0"));
  const Stream consumer = get_stream_from_pool(Device("sim:0"));
  for (uint64_t k = 0; k < 2; ++k) {
    chaos_on(test_seed() + k, /*racy=*/false);
    for (int i = 0; i < 8; ++i) {
      EXPECT_TRUE(round(producer, consumer, static_cast<unsigned char>(1 + i), true, kPause))
          << "chaos seed " << test_seed() + k << ", round " << i;
    }
  }
}

}  // namespace
}  // namespace ferry::testing
