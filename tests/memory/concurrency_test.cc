// Races between threads that the allocators must win: an allocation that misses the cache while
// another thread is returning segments to the backend (a false out-of-memory error if it does not
// wait), and recording a stream on a pinned block by address while other threads free, reuse
// and release pinned blocks (a use-after-free if the lookup and the record are not one step).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "ferry/device/guard.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/pinned_allocator.h"
#include "tests/memory/memory_fixture.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

// Polls `done` for up to ten seconds.
bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A 64 MiB device: two 40 MiB segments never fit at once.
class SmallDeviceConcurrencyTest : public MemoryTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c = default_sim_config();
    c.memory = 64 * kMiB;
    return c;
  }
};

TEST_F(SmallDeviceConcurrencyTest, AllocationWaitsForSegmentsAnotherThreadIsReleasing) {
  const Stream first(kSim0, 1), second(kSim0, 2), busy(kSim0, 3);
  {
    StreamGuard guard(first);
    device_bytes(40 * kMiB);  // cached on `first`
  }
  // The sim's free waits for every stream, so the release below stays in flight, its segment
  // off the allocator's books but not yet back in the backend, until the gate opens.
  StreamGate gate(busy);
  std::thread releaser([] { memory::empty_cache(kSim0); });
  ASSERT_TRUE(eventually([] { return memory::stats(kSim0).num_device_free == 1; }));

  auto allocation = std::async(std::launch::async, [&] {
    StreamGuard guard(second);
    return device_bytes(40 * kMiB);
  });
  // Open the gate only once the allocation either waits for the release or has given up: a
  // false out-of-memory error is then certain without the wait, never a matter of timing.
  const bool waited = eventually([&] {
    return memory::stats(kSim0).num_release_waits > 0 ||
           allocation.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
  gate.open();
  releaser.join();
  ASSERT_TRUE(waited) << "the allocation neither waited nor finished";
  Tensor t;
  try {
    t = allocation.get();
  } catch (const OutOfMemoryError& e) {
    FAIL() << "false out-of-memory error while a release was in flight: " << e.what();
  }
  const memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_GE(st.num_release_waits, 1);
  EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(40 * kMiB));
  EXPECT_EQ(st.allocated_bytes.current, static_cast<int64_t>(40 * kMiB));
}

TEST_F(SmallDeviceConcurrencyTest, ThreadsThatFitTogetherNeverSeeAnOutOfMemoryError) {
  // Three threads, each holding at most one 20 MiB block (a segment of its own) on its own
  // stream: 60 MiB fit in 64, so every request can be met and any OOM is a false one. The
  // empty_cache calls keep releasing other threads' cached segments while they allocate, and a
  // little queued work keeps each release in flight for a while (the sim's free waits for it).
  constexpr int kThreads = 3;
  constexpr int kRounds = 100;
  std::atomic<int> ooms{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const Stream mine(kSim0, 1 + i);
      StreamGuard guard(mine);
      for (int round = 0; round < kRounds; ++round) {
        try {
          Tensor t = device_bytes(20 * kMiB);
          enqueue_host_function(
              mine, [] { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
          if (round % 2 == 0) memory::empty_cache(kSim0);
        } catch (const OutOfMemoryError&) {
          ++ooms;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ooms.load(), 0);
  EXPECT_EQ(memory::stats(kSim0).num_ooms, 0);
}

// ---- pinned blocks: record by address against free, reuse and release -----------------------

using PinnedConcurrencyTest = MemoryTest;

TEST_F(PinnedConcurrencyTest, RecordByAddressRacesSafelyWithFreeReuseAndEmptyCache) {
  SCOPED_TRACE(seed_trace());
  const uint64_t seed = test_seed();
#ifdef FERRY_SANITIZER_BUILD
  constexpr int kSteps = 1500;
#else
  constexpr int kSteps = 6000;
#endif
  constexpr int kOwners = 2;
  constexpr int kRecorders = 2;
  constexpr int64_t kMinRecorded = 200;
  // Addresses of blocks that owners held at some point; recorders aim at them, live or not.
  std::array<std::atomic<void*>, 16> seen{};
  std::atomic<bool> go{false};
  std::atomic<int> owners_running{kOwners};
  std::atomic<int64_t> recorded{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::thread> threads;
  for (int o = 0; o < kOwners; ++o) {
    threads.emplace_back([&, o] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(o));
      std::array<Tensor, 4> held;  // each step frees one block and takes another
      while (!go.load()) std::this_thread::yield();
      // At least kSteps, and on until the recorders have hit live blocks often enough for the
      // race to have run (slow sanitizer builds need longer).
      for (int step = 0; step < kSteps || (recorded.load() < kMinRecorded &&
                                           std::chrono::steady_clock::now() < deadline);
           ++step) {
        const int64_t n = 64 << std::uniform_int_distribution<int>(0, 3)(rng);
        Tensor& slot = held[std::uniform_int_distribution<size_t>(0, held.size() - 1)(rng)];
        slot = empty({n}, TensorOptions(kFloat).pinned_memory(true));
        seen[std::uniform_int_distribution<size_t>(0, seen.size() - 1)(rng)] = slot.data_ptr();
        if (step % 64 == 0) memory::pinned_empty_cache();  // deletes cached blocks
      }
      --owners_running;
    });
  }
  for (int r = 0; r < kRecorders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(seed + 100 + static_cast<uint64_t>(r));
      const Stream stream(kSim0, 1 + r);
      while (!go.load()) std::this_thread::yield();
      while (owners_running.load() > 0) {
        void* p = seen[std::uniform_int_distribution<size_t>(0, seen.size() - 1)(rng)];
        if (p != nullptr && memory::pinned_record_event(p, stream)) ++recorded;
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_GE(recorded.load(), kMinRecorded) << "the recorders rarely hit a live block";
  device_synchronize(kSim0);
  memory::pinned_empty_cache();
  const memory::PinnedStats st = memory::pinned_stats();
  EXPECT_EQ(st.allocation.current, 0);
  EXPECT_EQ(st.pending_events, 0);
  EXPECT_EQ(st.segment.current, 0) << "every block should be back in the backend";
  EXPECT_EQ(st.reserved_bytes.current, 0);
}

}  // namespace
}  // namespace ferry::testing
