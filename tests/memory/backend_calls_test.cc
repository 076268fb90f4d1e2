// What the allocators ask of the backend, seen through a wrapping backend under the memory layer:
// the cached allocate/free path asks nothing, and a failed event_record at free leaves every
// recorded stream protected (the block waits for the stream itself), the invariants intact, and
// empty_cache and sub-region drops able to finish (or to fail) instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "ferry/device/guard.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/fixed_range_resource.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/memory/shared_region.h"
#include "tests/memory/memory_fixture.h"
#include "tests/memory/wrapping_backend.h"

namespace ferry::testing {
namespace {

using memory::MemoryResource;

using BackendCallsTest = MemoryTest;

TEST_F(BackendCallsTest, CachedAllocateAndFreeMakeNoBackendCall) {
  ScopedWrappedSim sim;
  MemoryResource* r = memory::caching_allocator();
  const Stream s = current_stream(kSim0);
  const size_t sizes[] = {512, 100000, kMiB, 3 * kMiB, 30 * kMiB};
  for (size_t n : sizes) r->deallocate(r->allocate(n, s), n, s);  // warm the segments
  const int64_t warm = sim->calls();
  const int64_t segments = memory::stats(kSim0).num_device_alloc;
  ASSERT_GT(warm, 0) << "the wrapper does not see the allocator's backend calls";

  for (int i = 0; i < 1000; ++i) {
    for (size_t n : sizes) {
      void* p = r->allocate(n, s);
      r->deallocate(p, n, s);
    }
  }
  EXPECT_EQ(sim->calls(), warm) << "the cached resource path called the backend";
  for (int i = 0; i < 1000; ++i) {
    Tensor t = device_bytes(100000);
  }
  EXPECT_EQ(sim->calls(), warm) << "the cached tensor path called the backend";
  EXPECT_EQ(memory::stats(kSim0).num_device_alloc, segments);

  device_bytes(64 * kMiB);  // a miss does reach the backend
  EXPECT_GT(sim->calls(), warm);
}

// ---- a failed event_record at free ------------------------------------------------------------

TEST_F(BackendCallsTest, AFailedEventRecordMakesTheBlockWaitForTheWholeStream) {
  ScopedWrappedSim sim;
  MemoryResource* r = memory::caching_allocator();
  const Stream mine = current_stream(kSim0);
  const Stream side(kSim0, 3);
  StreamGate gate(side);
  void* p = r->allocate(4096, mine);
  r->record_stream(p, mine, side);
  sim->fail_event_record_at(1);
  EXPECT_NO_THROW(r->deallocate(p, 4096, mine)) << "the free itself must complete";
  EXPECT_EQ(sim->failed_records(), 1);
  const memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.num_event_record_failures, 1);
  EXPECT_EQ(st.active.current, 1) << "the block still waits for " << side;
  EXPECT_NO_THROW(memory::check_invariants(kSim0));

  void* q = r->allocate(4096, mine);
  EXPECT_NE(q, p) << "reused while " << side << " may still use it";
  gate.open_and_wait();
  void* again = r->allocate(4096, mine);
  EXPECT_EQ(again, p) << "the block should come back once the stream is idle";
  r->deallocate(q, 4096, mine);
  r->deallocate(again, 4096, mine);
}

TEST_F(BackendCallsTest, AFailureAfterSomeEventsStillProtectsEveryStream) {
  MemoryResource* r = memory::caching_allocator();
  const Stream mine = current_stream(kSim0);
  // Recording `a` then `b`: fail the second record, then the first.
  for (int failing : {2, 1}) {
    SCOPED_TRACE(failing);
    ScopedWrappedSim sim;
    const Stream a(kSim0, 3), b(kSim0, 4);
    StreamGate gate_a(a), gate_b(b);
    void* p = r->allocate(4096, mine);
    r->record_stream(p, mine, a);
    r->record_stream(p, mine, b);
    sim->fail_event_record_at(failing);
    r->deallocate(p, 4096, mine);
    ASSERT_EQ(sim->failed_records(), 1);
    StreamGate& first = failing == 2 ? gate_a : gate_b;  // the stream whose event was recorded
    StreamGate& second = failing == 2 ? gate_b : gate_a;
    first.open_and_wait();
    void* q = r->allocate(4096, mine);
    EXPECT_NE(q, p) << "reused while the stream whose event failed is still busy";
    second.open_and_wait();
    void* again = r->allocate(4096, mine);
    EXPECT_EQ(again, p);
    r->deallocate(q, 4096, mine);
    r->deallocate(again, 4096, mine);
    memory::check_invariants(kSim0);
  }
}

TEST_F(BackendCallsTest, EmptyCacheWaitsForAStreamWhoseEventFailed) {
  ScopedWrappedSim sim;
  const Stream side(kSim0, 3);
  StreamGate gate(side);
  {
    Tensor t = device_bytes(kMiB);
    t.record_stream(side);
    sim->fail_event_record_at(1);
  }
  ASSERT_EQ(memory::stats(kSim0).num_event_record_failures, 1);
  {
    DelayedOpener opener(gate);
    memory::empty_cache(kSim0);
    EXPECT_TRUE(side.query()) << "empty_cache returned before the stream was done";
  }
  const memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.active.current, 0);
  EXPECT_EQ(st.reserved_bytes.current, 0);
}

// A sub-region over memory taken straight from the sim (the allocator does not own it).
class FailingSubRegionTest : public MemoryTest {
 protected:
  void SetUp() override {
    MemoryTest::SetUp();
    region_ = get_backend(DeviceType::Sim).malloc(0, 16 * kMiB);
    memory::adopt_shared_region(kSim0, "r", region_, 16 * kMiB);
    pool_.emplace(memory::add_sub_region(kSim0, "r", "params", 0, 16 * kMiB));
  }
  void TearDown() override {
    try {
      memory::drop_shared_region(kSim0, "r");
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
    get_backend(DeviceType::Sim).free(0, region_);
    MemoryTest::TearDown();
  }

  // Frees a block of the sub-region recorded on `side` while its event_record fails.
  void free_with_failed_record(WrappingBackend* sim, const Stream& side) {
    StreamGuard guard(params_);
    memory::UseMemPool use(*pool_);
    Tensor t = device_bytes(kMiB);
    t.record_stream(side);
    sim->fail_event_record_at(1);
  }

  const Stream params_{kSim0, 5};
  void* region_ = nullptr;
  std::optional<memory::MemPool> pool_;
};

TEST_F(FailingSubRegionTest, DropFinishesOnceTheStreamIsDone) {
  ScopedWrappedSim sim;
  const Stream side(kSim0, 3);
  StreamGate gate(side);
  free_with_failed_record(sim.get(), side);
  ASSERT_EQ(sim->failed_records(), 1);
  EXPECT_EQ(dynamic_cast<memory::FixedRangeResource&>(*pool_->resource())
                .stats()
                .num_event_record_failures,
            1);
  {
    DelayedOpener opener(gate);
    memory::drop_sub_region(kSim0, "r", "params");
    EXPECT_TRUE(side.query()) << "dropped before the recorded stream finished";
  }
  EXPECT_EQ(memory::stats(kSim0).active.current, 0);
  EXPECT_EQ(memory::stats(kSim0).shared_bytes.current, 0);
}

TEST_F(FailingSubRegionTest, DropRaisesWhenTheStreamCannotBeWaitedFor) {
  ScopedWrappedSim sim;
  const Stream side(kSim0, 3);
  StreamGate gate(side);
  free_with_failed_record(sim.get(), side);
  sim->fail_stream_synchronize(true);
  EXPECT_THROW(memory::drop_sub_region(kSim0, "r", "params"), DeviceError)
      << "neither a hang nor a drop while the stream may still use the block";
  EXPECT_EQ(memory::shared_regions(kSim0).at(0).sub_regions.size(), 1u) << "nothing dropped";
  EXPECT_NO_THROW(memory::check_invariants(kSim0));
  sim->fail_stream_synchronize(false);
  gate.open();
  memory::drop_sub_region(kSim0, "r", "params");
  EXPECT_EQ(memory::stats(kSim0).active.current, 0);
}

TEST_F(BackendCallsTest, PinnedBlockStaysProtectedWhenALaterRecordFails) {
  if (device_count(DeviceType::CUDA) > 0) {
    GTEST_SKIP() << "pinned memory comes from CUDA here, not from the wrapped sim";
  }
  ScopedWrappedSim sim;
  const Stream a(kSim0, 3), b(kSim0, 4);
  StreamGate gate_a(a), gate_b(b);
  const int64_t failures_before = memory::pinned_stats().num_event_record_failures;
  void* first = nullptr;
  {
    Tensor h = empty({256}, TensorOptions(kFloat).pinned_memory(true));
    first = h.data_ptr();
    ASSERT_TRUE(memory::pinned_record_event(h.storage(), a));
    ASSERT_TRUE(memory::pinned_record_event(h.storage(), b));
    sim->fail_event_record_at(2);  // a's event is recorded, b's is not
  }
  ASSERT_EQ(sim->failed_records(), 1);
  const memory::PinnedStats st = memory::pinned_stats();
  EXPECT_EQ(st.num_event_record_failures, failures_before + 1);
  EXPECT_EQ(st.pending_events, 2);
  gate_a.open_and_wait();
  EXPECT_NE(empty({256}, TensorOptions(kFloat).pinned_memory(true)).data_ptr(), first)
      << "reused while " << b << " may still copy from it";
  gate_b.open_and_wait();
  EXPECT_EQ(empty({256}, TensorOptions(kFloat).pinned_memory(true)).data_ptr(), first);
  EXPECT_EQ(memory::pinned_stats().pending_events, 0);
}

}  // namespace
}  // namespace ferry::testing
