// FERRY_SIM_CHAOS proves its worth: a producer/consumer pair of streams that omits the required
// wait reads stale bytes at least once, and the same code with the wait never does.
#include <gtest/gtest.h>

#include <chrono>

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
  bool round(const Stream& producer, const Stream& consumer, unsigned char value, bool wait) {
    Backend& b = sim_backend();
    b.memset(0, x_.get(), 0, x_.size());
    b.memset_async(0, x_.get(), value, x_.size(), producer.raw());
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

}  // namespace
}  // namespace ferry::testing
