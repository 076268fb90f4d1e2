// Stream semantics of device copies: the cross-device event handshake (under chaos, a
// destination stream that reads right after the copy sees the copied bytes, and a write queued
// there before the copy is not overwritten after it), same-device copies between different
// current streams without host synchronization, non-blocking device-to-host copies completed by
// a stream synchronize, blocking copies returning with the stream done, and pinned host blocks
// kept from reuse while a copy still reads them.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "ferry/memory/pinned_allocator.h"
#include "ferry/ops/device_copy.h"
#include "tests/support/random.h"
#include "tests/xdev/xdev_util.h"

namespace ferry::testing {
namespace {

using std::chrono::milliseconds;

std::vector<float> values_of(const Tensor& t) {
  const Tensor host = t.is_cpu() ? t.contiguous() : t.cpu().contiguous();
  const float* p = host.data_ptr<float>();
  return std::vector<float>(p, p + host.numel());
}

bool all_equal(const Tensor& host, float value) {
  for (float v : values_of(host)) {
    if (v != value) return false;
  }
  return true;
}

class ChaosCopyTest : public XdevTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.chaos_seed = test_seed();
    c.chaos_max_delay = std::chrono::microseconds(500);
    return c;
  }
};

// src on sim:0 written on sim:0's current stream, dst on sim:1 written on sim:1's current
// stream, then dst.copy_(src) and a read queued on sim:1's current stream right away.
void handshake_rounds(bool peer, bool converting) {
  if (!peer) {
    sim::SimConfig c = sim::config();
    c.peer_mode = sim::SimConfig::PeerMode::kNone;
    sim::configure(c);
  }
  const Stream a = get_stream_from_pool(kSim0);
  const Stream b = get_stream_from_pool(kSim1);
  set_current_stream(a);
  set_current_stream(b);
  const int64_t n = 96;
  Tensor src = empty({n, n}, TensorOptions(converting ? kFloat64 : kFloat32).device(kSim0));
  Tensor dst = empty({n, n}, TensorOptions(kFloat32).device(kSim1));
  Tensor out = empty({n, n}, TensorOptions(kFloat32).pinned_memory(true));
  const DeviceCopyPlan plan = plan_device_copy(dst, converting ? src.t() : src, false);
  EXPECT_EQ(plan.path, converting ? (peer ? DeviceCopyPath::kPeerKernel : DeviceCopyPath::kStaged)
                                  : DeviceCopyPath::kMemcpy);
  for (int round = 1; round <= 20; ++round) {
    src.fill_(round);   // on a
    dst.fill_(-round);  // on b: must land before the copy
    dst.copy_(converting ? src.t() : src);
    out.copy_(dst, /*non_blocking=*/true);  // on b, right after
    b.synchronize();                        // only the destination's stream
    ASSERT_TRUE(all_equal(out, static_cast<float>(round))) << "round " << round;
  }
  a.synchronize();
}

TEST_F(ChaosCopyTest, HandshakeOrdersAPeerMemcpy) {
  SCOPED_TRACE(seed_trace());
  handshake_rounds(true, false);
}
TEST_F(ChaosCopyTest, HandshakeOrdersAStagedMemcpy) {
  SCOPED_TRACE(seed_trace());
  handshake_rounds(false, false);
}
TEST_F(ChaosCopyTest, HandshakeOrdersAPeerKernel) {
  SCOPED_TRACE(seed_trace());
  handshake_rounds(true, true);
}
TEST_F(ChaosCopyTest, HandshakeOrdersAStagedConversion) {
  SCOPED_TRACE(seed_trace());
  handshake_rounds(false, true);
}

// One device, the producer on one stream and the copy on another that waits for it: ordered
// by the streams alone, and copy_ never waits on the host (even when blocking).
TEST_F(ChaosCopyTest, SameDeviceDifferentCurrentStreams) {
  SCOPED_TRACE(seed_trace());
  const Stream producer = get_stream_from_pool(kSim0);
  const Stream consumer = get_stream_from_pool(kSim0);
  ASSERT_NE(producer, consumer);
  Tensor src = empty({64, 48}, TensorOptions(kFloat32).device(kSim0));
  Tensor dst = empty({48, 64}, TensorOptions(kFloat64).device(kSim0));
  Tensor out = empty({48, 64}, TensorOptions(kFloat32).pinned_memory(true));
  for (int round = 1; round <= 10; ++round) {
    set_current_stream(producer);
    src.fill_(round);
    consumer.wait_stream(producer);
    set_current_stream(consumer);
    {
      Gate gate(consumer);
      for (bool non_blocking : {false, true}) {
        const auto start = std::chrono::steady_clock::now();
        dst.copy_(src.t(), non_blocking);  // a converting transpose: the device kernel
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
            << "copy_ waited for the stream on the host";
      }
      EXPECT_FALSE(consumer.query());
    }
    producer.wait_stream(consumer);
    set_current_stream(producer);
    out.copy_(dst, true);
    producer.synchronize();
    ASSERT_TRUE(all_equal(out, static_cast<float>(round))) << "round " << round;
  }
}

// A device-to-device copy across devices never blocks the host, blocking or not: it runs on the
// source device's current stream.
TEST_F(XdevTest, DeviceToDeviceCopiesDoNotBlockTheHost) {
  Tensor src = full({256}, 3.0f, TensorOptions().device(kSim0));
  Tensor dst = empty({128, 2}, TensorOptions(kFloat64).device(kSim1));
  const Stream s0 = current_stream(kSim0);
  {
    Gate gate(s0);
    dst.copy_(src.view({128, 2}));            // converting: a peer kernel
    dst.t().copy_(src.view({2, 128}), true);  // converting and transposing: a peer kernel
    EXPECT_FALSE(s0.query());
    EXPECT_FALSE(current_stream(kSim1).query()) << "sim:1 must wait for the copy";
  }
  EXPECT_TRUE(all_equal(dst.to(kFloat32), 3.0f));
}

// The copy runs on the current stream, not the default one.
TEST_F(XdevTest, HostToDeviceRunsOnTheCurrentStream) {
  const Stream pool = get_stream_from_pool(kSim0);
  set_current_stream(pool);
  Tensor src = full({1000}, 7.0f, TensorOptions().pinned_memory(true));
  Tensor dst = empty({1000}, TensorOptions().device(kSim0));
  {
    Gate gate(pool);
    dst.copy_(src, /*non_blocking=*/true);
    EXPECT_FALSE(pool.query());
    EXPECT_TRUE(default_stream(kSim0).query());
  }
  pool.synchronize();
  EXPECT_TRUE(all_equal(dst, 7.0f));
}

class LatencyTest : public XdevTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    for (auto& l : c.latency) l = milliseconds(30);
    c.chaos_seed = test_seed();
    c.chaos_max_delay = milliseconds(1);
    return c;
  }
};

TEST_F(LatencyTest, NonBlockingDeviceToHostThenSynchronize) {
  SCOPED_TRACE(seed_trace());
  const Tensor dev = arange(0, 4096, 1, TensorOptions(kFloat32).device(kSim1)).view({64, 64});
  device_synchronize(kSim1);
  const Stream stream = current_stream(kSim1);
  // Dense pinned: one queued memcpy. Non-dense pinned: a queued scatter after it. A conversion
  // runs on the device first.
  Tensor dense = empty({64, 64}, TensorOptions(kFloat32).pinned_memory(true));
  Tensor strided =
      empty({64, 128}, TensorOptions(kFloat32).pinned_memory(true)).slice(1, 0, 128, 2);
  Tensor converted = empty({64, 64}, TensorOptions(kFloat64).pinned_memory(true));
  for (Tensor* out : {&dense, &strided, &converted}) {
    out->copy_(dev.t(), /*non_blocking=*/true);
    EXPECT_FALSE(stream.query()) << "a non-blocking copy to pinned memory only enqueues";
  }
  stream.synchronize();
  const std::vector<float> want = values_of(dev.t());
  EXPECT_EQ(values_of(dense), want);
  EXPECT_EQ(values_of(strided), want);
  EXPECT_EQ(values_of(converted.to(kFloat32)), want);
}

TEST_F(LatencyTest, BlockingCopiesReturnWithTheStreamDone) {
  Tensor host = full({512}, 2.0f);
  Tensor dev = empty({512}, TensorOptions().device(kSim0));
  dev.copy_(host);
  EXPECT_TRUE(current_stream(kSim0).query());
  Tensor again = empty({2, 256}, kFloat64);
  again.copy_(dev.view({2, 256}));
  EXPECT_TRUE(current_stream(kSim0).query());
  EXPECT_TRUE(all_equal(again.to(kFloat32), 2.0f));
}

// Pageable memory: the copy is complete with respect to the host when copy_ returns, even when
// non-blocking (the price: the call waits for the stream).
TEST_F(LatencyTest, NonBlockingWithPageableMemoryIsStillRight) {
  Tensor host = full({4096}, 5.0f);
  Tensor dev = empty({4096}, TensorOptions().device(kSim0));
  dev.copy_(host, /*non_blocking=*/true);
  host.fill_(-1.0f);  // allowed at once: the source has been read
  Tensor back = empty({4096});
  back.copy_(dev, /*non_blocking=*/true);
  EXPECT_TRUE(all_equal(back, 5.0f)) << "the destination is written when copy_ returns";
}

TEST_F(LatencyTest, PinnedBlocksAreNotReusedWhileACopyReadsThem) {
  const int64_t n = 1 << 14;
  Tensor dst = empty({n}, TensorOptions().device(kSim0));
  Tensor src = full({n}, 9.0f, TensorOptions().pinned_memory(true));
  const void* block = src.data_ptr();
  dst.copy_(src, /*non_blocking=*/true);
  const Stream stream = current_stream(kSim0);
  src = Tensor();  // freed while the copy is in flight
  ASSERT_FALSE(stream.query());
  Tensor next = empty({n}, TensorOptions().pinned_memory(true));
  EXPECT_NE(next.data_ptr(), block) << "a pinned block was reused while a copy still reads it";
  next.fill_(-1.0f);
  stream.synchronize();
  EXPECT_TRUE(all_equal(dst, 9.0f));
  Tensor later = empty({n}, TensorOptions().pinned_memory(true));
  EXPECT_EQ(later.data_ptr(), block) << "the block is free again once the copy is done";
}

// The same through a staged copy: a non-dense pinned source is compacted into a pinned
// temporary on the stream; freeing both right away must not let either be reused early.
TEST_F(LatencyTest, StagedCopiesKeepTheirPinnedTemporariesAlive) {
  const int64_t n = 128;
  Tensor dst = empty({n, n}, TensorOptions(kFloat64).device(kSim0));
  for (int round = 1; round <= 3; ++round) {
    Tensor src = full({n, 2 * n}, static_cast<float>(round), TensorOptions().pinned_memory(true));
    const DeviceCopyPlan plan = plan_device_copy(dst, src.slice(1, 0, 2 * n, 2), true);
    EXPECT_EQ(plan.path, DeviceCopyPath::kStaged);
    EXPECT_TRUE(plan.src_temporary);
    dst.copy_(src.slice(1, 0, 2 * n, 2), /*non_blocking=*/true);
    src = Tensor();
    for (int k = 0; k < 4; ++k) {
      full({n, 2 * n}, -1.0f, TensorOptions().pinned_memory(true));  // would clobber a reused block
    }
    current_stream(kSim0).synchronize();
    EXPECT_TRUE(all_equal(dst.to(kFloat32), static_cast<float>(round))) << "round " << round;
  }
}

}  // namespace
}  // namespace ferry::testing
