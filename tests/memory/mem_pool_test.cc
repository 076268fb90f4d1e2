// MemPool and UseMemPool: the guard routes the calling thread's new device tensors on its device
// to the pool (nested guards: the innermost wins; other threads and devices are unaffected), a
// tensor returns to its pool whenever and wherever it is freed, and a fixed range taken from an
// upstream resource lives as long as its tensors and then gives its range back.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "ferry/device/guard.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/fixed_range_resource.h"
#include "ferry/memory/mem_pool.h"
#include "tests/memory/memory_fixture.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using memory::FixedRangeResource;
using memory::MemPool;
using memory::UseMemPool;

bool inside_range(const Tensor& t, const FixedRangeResource& r) {
  const auto* p = static_cast<const char*>(t.data_ptr());
  const auto* b = static_cast<const char*>(r.base());
  return p >= b && p < b + r.size();
}

// Two fixed ranges over the caching allocator on sim:0 (upstream form), and one on sim:1.
class MemPoolTest : public MemoryTest {
 protected:
  std::shared_ptr<FixedRangeResource> range(const std::string& name, Device device = kSim0) {
    return std::make_shared<FixedRangeResource>(memory::caching_allocator(), 4 * kMiB,
                                                default_stream(device), name);
  }
};

TEST_F(MemPoolTest, GuardsNestAndTheInnermostWins) {
  auto outer_range = range("outer");
  auto inner_range = range("inner");
  const MemPool outer(outer_range);
  const MemPool inner(inner_range);
  {
    UseMemPool use_outer(outer);
    EXPECT_TRUE(inside_range(device_bytes(1024), *outer_range));
    {
      UseMemPool use_inner(inner);
      EXPECT_TRUE(inside_range(device_bytes(1024), *inner_range));
      EXPECT_EQ(memory::get_memory_resource(kSim0), inner_range.get());
      {
        UseMemPool again(outer);  // re-entering an outer pool is fine
        EXPECT_TRUE(inside_range(device_bytes(1024), *outer_range));
      }
      EXPECT_TRUE(inside_range(device_bytes(1024), *inner_range));
    }
    EXPECT_TRUE(inside_range(device_bytes(1024), *outer_range));
    EXPECT_EQ(memory::get_memory_resource(kSim0), outer_range.get());
  }
  const Tensor plain = device_bytes(1024);
  EXPECT_FALSE(inside_range(plain, *outer_range) || inside_range(plain, *inner_range));
  EXPECT_EQ(memory::get_memory_resource(kSim0), memory::caching_allocator());
  EXPECT_EQ(memory::active_mem_pool_resource(kSim0), nullptr);
}

TEST_F(MemPoolTest, AGuardServesOneDeviceOnly) {
  auto on0 = range("on sim:0");
  auto on1 = range("on sim:1", kSim1);
  UseMemPool use0{MemPool(on0)};
  EXPECT_FALSE(inside_range(device_bytes(1024, kSim1), *on0));
  {
    UseMemPool use1{MemPool(on1)};
    EXPECT_TRUE(inside_range(device_bytes(1024, kSim1), *on1));
    EXPECT_TRUE(inside_range(device_bytes(1024), *on0)) << "sim:1's guard leaves sim:0 alone";
  }
  {
    // A pool over a resource with no device of its own serves the device it is entered for.
    const MemPool any(memory::caching_allocator());
    EXPECT_THROW({ UseMemPool use(any); }, DeviceError) << "no device to use it for";
    DeviceGuard device(kSim1);
    UseMemPool use(any, Device(DeviceType::Sim));  // the current sim device
    EXPECT_EQ(use.device(), kSim1);
    EXPECT_TRUE(inside_range(device_bytes(1024), *on0)) << "the guard is for sim:1";
  }
}

TEST_F(MemPoolTest, OtherThreadsAreUnaffected) {
  auto pooled = range("pooled");
  UseMemPool use{MemPool(pooled)};
  EXPECT_TRUE(inside_range(device_bytes(1024), *pooled));
  std::thread other([&] {
    EXPECT_EQ(memory::active_mem_pool_resource(kSim0), nullptr);
    for (int i = 0; i < kStreamPoolSize; ++i) {
      StreamGuard guard(get_stream_from_pool(kSim0));
      EXPECT_FALSE(inside_range(device_bytes(1024), *pooled));
    }
  });
  other.join();
  EXPECT_EQ(pooled->stats().allocation.allocated, 1);
}

TEST_F(MemPoolTest, TensorsFreedOnAnotherThreadAfterTheGuardReturnToThePool) {
  auto pooled = range("pooled");
  std::optional<Tensor> t;
  {
    UseMemPool use{MemPool(pooled)};
    t = device_bytes(kMiB);
  }
  ASSERT_TRUE(inside_range(*t, *pooled));
  EXPECT_EQ(memory::storage_memory_resource(t->storage()), pooled.get());
  const int64_t cached_before = memory::stats(kSim0).allocation.current;
  std::thread other([&] { t.reset(); });
  other.join();
  EXPECT_EQ(pooled->stats().allocation.current, 0);
  EXPECT_EQ(pooled->stats().allocated_bytes.current, 0);
  EXPECT_EQ(memory::stats(kSim0).allocation.current, cached_before) << "not the caching allocator";
  pooled->check_invariants();
}

TEST_F(MemPoolTest, AnUpstreamRangeLivesAsLongAsItsTensorsThenGivesItsRangeBack) {
  const memory::Stats before = memory::stats(kSim0);
  std::optional<Tensor> t;
  void* range_base = nullptr;
  {
    auto pooled = range("pooled");
    range_base = pooled->base();
    const memory::Stats taken = memory::stats(kSim0);
    EXPECT_EQ(taken.allocation.current, before.allocation.current + 1) << "one allocation";
    EXPECT_EQ(taken.allocated_bytes.current,
              before.allocated_bytes.current + static_cast<int64_t>(4 * kMiB));
    UseMemPool use{MemPool(pooled)};
    t = device_bytes(3 * kMiB);
    EXPECT_EQ(t->data_ptr(), range_base);
    EXPECT_THROW(device_bytes(2 * kMiB), OutOfMemoryError) << "never falls back upstream";
    EXPECT_EQ(memory::stats(kSim0).allocation.current, taken.allocation.current);
  }
  // The pool and the guard are gone; the tensor keeps the range alive.
  EXPECT_EQ(memory::stats(kSim0).allocation.current, before.allocation.current + 1);
  get_backend(DeviceType::Sim).memset(0, t->data_ptr(), 1, 3 * kMiB);  // still valid memory
  t.reset();
  EXPECT_EQ(memory::stats(kSim0).allocation.current, before.allocation.current)
      << "the range went back to the caching allocator";
  EXPECT_EQ(memory::stats(kSim0).allocated_bytes.current, before.allocated_bytes.current);
  EXPECT_EQ(device_bytes(4 * kMiB).data_ptr(), range_base) << "and is reused from there";
}

TEST_F(MemPoolTest, AnUpstreamRangeWaitsForEveryStreamBeforeGoingBack) {
  // A range whose block was recorded on a gated stream goes back to the upstream only in stream
  // order: the upstream's next user on the range's stream queues behind the gated work.
  const Stream side(kSim0, 3);
  StreamGate gate(side);
  void* range_base = nullptr;
  {
    auto pooled = range("pooled");
    range_base = pooled->base();
    UseMemPool use{MemPool(pooled)};
    Tensor t = device_bytes(kMiB);
    t.record_stream(side);
  }
  const Stream range_stream = default_stream(kSim0);
  EXPECT_FALSE(range_stream.query()) << "the range's stream waits for the recorded stream";
  gate.open_and_wait();
  range_stream.synchronize();
  EXPECT_EQ(device_bytes(4 * kMiB).data_ptr(), range_base);
}

// Threads that share one pool, each on its own pool stream, allocate and free concurrently; some
// tensors are freed by another thread. The range stays consistent and ends empty.
TEST_F(MemPoolTest, ThreadsShareAPool) {
  SCOPED_TRACE(seed_trace());
  const uint64_t seed = test_seed();
  auto shared = range("shared");
  const MemPool pool(shared);
  constexpr int kThreads = 4;
  std::vector<std::vector<Tensor>> handed_over(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(i));
      StreamGuard stream(Stream(kSim0, static_cast<StreamId>(1 + i)));
      UseMemPool use(pool);
      std::vector<Tensor> live;
      for (int step = 0; step < 400; ++step) {
        if (live.size() < 8 && rng() % 2 == 0) {
          // A throw here would end the process from this thread: fail the test instead.
          try {
            live.push_back(device_bytes(1 + rng() % (64 * 1024)));
          } catch (const Error& e) {
            ADD_FAILURE() << "thread " << i << ", step " << step << ": " << e.what();
            break;
          }
          EXPECT_TRUE(inside_range(live.back(), *shared));
        } else if (!live.empty()) {
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(rng() % live.size()));
        }
      }
      handed_over[static_cast<size_t>(i)] = std::move(live);  // freed by the main thread
    });
  }
  for (std::thread& t : threads) t.join();
  handed_over.clear();
  EXPECT_EQ(shared->stats().allocation.current, 0);
  EXPECT_EQ(shared->stats().num_ooms, 0);
  shared->check_invariants();
}

TEST_F(MemPoolTest, RejectsBadPoolsAndRanges) {
  EXPECT_THROW(MemPool(static_cast<memory::MemoryResource*>(nullptr)), Error);
  EXPECT_THROW(MemPool(memory::caching_allocator(), Device("cpu")), DeviceError);
  EXPECT_THROW(FixedRangeResource(nullptr, kMiB, default_stream(kSim0), "r"), Error);
  EXPECT_THROW(FixedRangeResource(memory::caching_allocator(), 0, default_stream(kSim0), "r"),
               Error);
  EXPECT_THROW(FixedRangeResource(memory::caching_allocator(), kMiB, Stream(), "r"), DeviceError);
  auto on0 = range("on sim:0");
  EXPECT_THROW(on0->allocate(512, default_stream(kSim1)), DeviceError);
  EXPECT_THROW(on0->deallocate(on0->base(), 512, default_stream(kSim0)), Error) << "not handed out";
  void* p = on0->allocate(1000, default_stream(kSim0));
  EXPECT_THROW(on0->deallocate(p, 999, default_stream(kSim0)), Error) << "wrong size";
  on0->deallocate(p, 1000, default_stream(kSim0));
  on0->check_invariants();
}

}  // namespace
}  // namespace ferry::testing
