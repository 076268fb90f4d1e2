// Backend::memcpy_batch_async on the sim: every range lands (random bytes, seeded), in each
// direction; a batch of pinned ranges only enqueues while a pageable one returns once done; the
// link charges its per-copy cost once per batch and each range's bytes; a bad range is an error
// that names the call and queues nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "ferry/device/event.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using BatchCopyTest = SimTest;

// Random range sizes that tile `total` bytes from offset 0, with gaps of 0-63 bytes between.
std::vector<std::pair<size_t, size_t>> random_ranges(size_t total, std::mt19937_64& rng) {
  std::vector<std::pair<size_t, size_t>> out;  // (offset, bytes)
  size_t at = 0;
  while (at < total) {
    const size_t n = std::min<size_t>(total - at, 1 + rng() % 5000);
    out.emplace_back(at, n);
    at += n + rng() % 64;
  }
  return out;
}

TEST_F(BatchCopyTest, EveryRangeLandsInEachDirection) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  constexpr size_t kBytes = 200000;
  std::vector<unsigned char> pageable(kBytes), back(kBytes, 0), pinned_back_expected(kBytes, 0);
  for (unsigned char& c : pageable) c = static_cast<unsigned char>(rng());
  PinnedBuffer pinned(kBytes);
  std::memcpy(pinned.get(), pageable.data(), kBytes);
  SimBuffer a(0, kBytes), b(0, kBytes);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  const auto ranges = random_ranges(kBytes, rng);
  ASSERT_GT(ranges.size(), 10u);
  const auto make = [&](void* dst, const void* src) {
    std::vector<CopyRange> out;
    for (const auto& [offset, n] : ranges) {
      out.push_back({static_cast<char*>(dst) + offset, static_cast<const char*>(src) + offset, n});
    }
    return out;
  };
  Backend& backend = sim_backend();
  backend.memset_async(0, a.get(), 0, kBytes, s.raw());
  backend.memset_async(0, b.get(), 0, kBytes, s.raw());
  // Host (pageable) to device, device to device, device to host (pageable).
  backend.memcpy_batch_async(0, make(a.get(), pageable.data()), CopyKind::HostToDevice, s.raw());
  backend.memcpy_batch_async(0, make(b.get(), a.get()), CopyKind::DeviceToDevice, s.raw());
  backend.memcpy_batch_async(0, make(back.data(), b.get()), CopyKind::DeviceToHost, s.raw());
  std::vector<unsigned char> expected(kBytes, 0);
  for (const auto& [offset, n] : ranges) {
    std::memcpy(expected.data() + offset, pageable.data() + offset, n);
  }
  EXPECT_EQ(back, expected) << "the gaps between ranges stay as they were";
  // From pinned memory, whole buffer in one range among empty ones (which are skipped).
  std::vector<CopyRange> whole = {{a.get(), pinned.get(), 0}, {a.get(), pinned.get(), kBytes}};
  backend.memcpy_batch_async(0, whole, CopyKind::HostToDevice, s.raw());
  backend.memcpy_batch_async(0, {}, CopyKind::HostToDevice, s.raw());
  backend.memcpy_async(0, back.data(), a.get(), kBytes, CopyKind::DeviceToHost, s.raw());
  EXPECT_EQ(back, pageable);
}

TEST_F(BatchCopyTest, PinnedBatchesEnqueueAndPageableOnesWait) {
  constexpr size_t kBytes = 1 << 16;
  PinnedBuffer pinned(kBytes);
  std::memset(pinned.get(), 7, kBytes);
  std::vector<unsigned char> pageable(kBytes, 9);
  SimBuffer x(0, 2 * kBytes);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  Gate gate(5s);
  enqueue_host_function(s, gate.blocker());
  auto* base = static_cast<char*>(x.get());
  const std::vector<CopyRange> from_pinned = {{base, pinned.get(), kBytes / 2},
                                              {base + kBytes / 2, pinned.get(), kBytes / 2}};
  sim_backend().memcpy_batch_async(0, from_pinned, CopyKind::HostToDevice, s.raw());
  EXPECT_EQ(sim::pending_operations(0, s.raw()), 2u) << "one operation for the whole batch";
  gate.open();
  // A batch with one pageable range waits for itself (and so for the queue before it).
  const std::vector<CopyRange> mixed = {{base + kBytes, pageable.data(), kBytes / 2},
                                        {base + 3 * kBytes / 2, pinned.get(), kBytes / 2}};
  sim_backend().memcpy_batch_async(0, mixed, CopyKind::HostToDevice, s.raw());
  EXPECT_EQ(sim::pending_operations(0, s.raw()), 0u);
  EXPECT_FALSE(gate.timed_out());
  std::vector<unsigned char> back(2 * kBytes);
  sim_backend().memcpy_async(0, back.data(), x.get(), 2 * kBytes, CopyKind::DeviceToHost, s.raw());
  for (size_t i = 0; i < 2 * kBytes; ++i) {
    const unsigned char want = i >= kBytes && i < 3 * kBytes / 2 ? 9 : 7;
    ASSERT_EQ(back[i], want) << i;
  }
}

TEST_F(BatchCopyTest, TheLinkChargesOneCopyCostPerBatch) {
  // 8 ranges at 40 ms per copy: 40 ms as one batch, 320 ms as single copies.
  sim::configure(config_from_env({{"FERRY_SIM_LATENCY", "40ms"}}));
  constexpr size_t kBytes = 4096;
  PinnedBuffer host(8 * kBytes);
  SimBuffer x(0, 8 * kBytes);
  std::vector<CopyRange> ranges;
  for (size_t i = 0; i < 8; ++i) {
    ranges.push_back({static_cast<char*>(x.get()) + i * kBytes, host.get() + i * kBytes, kBytes});
  }
  const Stream s = get_stream_from_pool(Device("sim:0"));
  Event start(true), end(true);
  start.record(s);
  sim_backend().memcpy_batch_async(0, ranges, CopyKind::HostToDevice, s.raw());
  end.record(s);
  const float ms = start.elapsed_time(end);
  EXPECT_GE(ms, 39.5F) << "the batch is priced";
  EXPECT_LT(ms, 300.0F) << "the per-copy cost was charged per range, not once";
}

TEST_F(BatchCopyTest, ABadRangeIsAnErrorAndQueuesNothing) {
  constexpr size_t kBytes = 4096;
  PinnedBuffer host(kBytes);
  SimBuffer x(0, kBytes);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  Gate gate(5s);
  enqueue_host_function(s, gate.blocker());
  const std::vector<CopyRange> past_the_end = {{x.get(), host.get(), kBytes / 2},
                                               {x.get(), host.get(), kBytes + 1}};
  EXPECT_THAT(error_of<DeviceError>([&] {
                sim_backend().memcpy_batch_async(0, past_the_end, CopyKind::HostToDevice, s.raw());
              }),
              HasSubstr("memcpy_batch_async"));
  const std::vector<CopyRange> wrong_kind = {{host.get(), x.get(), kBytes}};
  EXPECT_THAT(error_of<DeviceError>([&] {
                sim_backend().memcpy_batch_async(0, wrong_kind, CopyKind::HostToDevice, s.raw());
              }),
              HasSubstr("memcpy_batch_async(host-to-device)"));
  EXPECT_EQ(sim::pending_operations(0, s.raw()), 1u) << "only the gate";
  gate.open();
  s.synchronize();
}

}  // namespace
}  // namespace ferry::testing
