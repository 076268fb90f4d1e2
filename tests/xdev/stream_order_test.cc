// Stream semantics of device copies: the cross-device event handshake (under chaos, a
// destination stream that reads right after the copy sees the copied bytes, and a write queued
// there before the copy is not overwritten after it), same-device copies between different
// current streams without host synchronization, non-blocking device-to-host copies completed by
// a stream synchronize, blocking copies returning with the stream done, and pinned host blocks
// kept from reuse while a copy still reads them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
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
  dst.zero_();
  device_synchronize(kSim0);
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
      // The copies are queued behind the gate on the consumer: with the producer and the
      // default stream done, dst still holds the previous round's values.
      producer.synchronize();
      default_stream(kSim0).synchronize();
      for (double v : peek_storage<double>(dst)) {
        ASSERT_EQ(v, round - 1) << "round " << round << ": the copy ran off the current stream";
      }
    }
    producer.wait_stream(consumer);
    set_current_stream(producer);
    out.copy_(dst, true);
    producer.synchronize();
    ASSERT_TRUE(all_equal(out, static_cast<float>(round))) << "round " << round;
  }
}

// The cross-device handshake, step by step, for a peer memcpy and a peer kernel. The copy runs
// on the source device's current stream, which must first wait for an event recorded on the
// destination's current stream: with only the destination stream held by a gate, nothing of the
// copy may run. Once the gate opens, the destination stream must in turn wait for the copy,
// which the sim's peer latency makes last 100 ms. Neither wait blocks the host.
class HandshakeTest : public XdevTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.latency[static_cast<size_t>(sim::Link::Peer)] = milliseconds(100);
    return c;
  }
};

TEST_F(HandshakeTest, TheSourceStreamWaitsForTheDestinationStreamAndThenBlocksIt) {
  for (bool kernel : {false, true}) {
    SCOPED_TRACE(kernel ? "peer kernel" : "peer memcpy");
    const Tensor src = full({256}, 3.0f, TensorOptions().device(kSim0));
    Tensor dst = zeros({256}, TensorOptions(kFloat64).device(kSim1));
    const Tensor from = kernel ? src : src.to(kFloat64);
    device_synchronize(kSim0);
    device_synchronize(kSim1);
    ASSERT_EQ(plan_device_copy(dst, from, false).path,
              kernel ? DeviceCopyPath::kPeerKernel : DeviceCopyPath::kMemcpy);
    const Stream s0 = current_stream(kSim0);
    const Stream s1 = current_stream(kSim1);
    std::atomic<bool> marker_ran{false};
    std::chrono::steady_clock::time_point marker_time;
    std::chrono::steady_clock::time_point released;
    {
      Gate gate(s1);
      const auto start = std::chrono::steady_clock::now();
      dst.copy_(from);  // blocking or not, a device-to-device copy only queues
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
          << "copy_ waited on the host";
      // The source stream is held by the destination's gate: it stays busy, and dst untouched.
      const auto until = std::chrono::steady_clock::now() + milliseconds(20);
      while (std::chrono::steady_clock::now() < until) {
        ASSERT_FALSE(s0.query()) << "the source stream did not wait for the destination stream";
        std::this_thread::sleep_for(milliseconds(1));
      }
      for (double v : peek_storage<double>(dst)) {
        ASSERT_EQ(v, 0.0) << "the copy ran before the destination stream reached it";
      }
      // Queued on the destination stream after the copy: must run after the copy is done.
      enqueue_host_function(s1, [&marker_ran, &marker_time] {
        marker_time = std::chrono::steady_clock::now();
        marker_ran = true;
      });
      released = std::chrono::steady_clock::now();
    }
    s1.synchronize();
    ASSERT_TRUE(marker_ran.load());
    if (!kernel) {
      EXPECT_GE(marker_time - released, milliseconds(100))
          << "the destination stream did not wait for the copy";
    }
    EXPECT_TRUE(s0.query()) << "the destination stream finished before the source stream";
    for (double v : peek_storage<double>(dst)) ASSERT_EQ(v, 3.0);
  }
}

// The copy runs on the current stream, not the default one.
TEST_F(XdevTest, HostToDeviceRunsOnTheCurrentStream) {
  const Stream pool = get_stream_from_pool(kSim0);
  set_current_stream(pool);
  Tensor src = full({1000}, 7.0f, TensorOptions().pinned_memory(true));
  Tensor dst = zeros({1000}, TensorOptions().device(kSim0));
  device_synchronize(kSim0);
  {
    Gate gate(pool);
    dst.copy_(src, /*non_blocking=*/true);
    // Queued behind the gate: not on the default stream, which is done without it.
    default_stream(kSim0).synchronize();
    for (float v : peek_storage<float>(dst))
      ASSERT_EQ(v, 0.0f) << "the copy ran off the pool stream";
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

// The same through a staged copy: a non-dense pinned source (128 KiB) is compacted, on the
// stream, into a pinned temporary (64 KiB) that the memcpy then reads. Both are freed when copy_
// returns while the stream is still held by a gate, and new pinned blocks of both size classes
// are taken and kept: none may be either of them (the queued compaction would write into the
// temporary's new owner, or read the source's new owner's values).
TEST_F(LatencyTest, StagedCopiesKeepTheirPinnedTemporariesAlive) {
  const int64_t n = 128;
  const TensorOptions pinned = TensorOptions().pinned_memory(true);
  Tensor dst = empty({n, n}, TensorOptions(kFloat64).device(kSim0));
  const Stream stream = current_stream(kSim0);
  for (int round = 1; round <= 3; ++round) {
    std::vector<Tensor> taken;
    {
      Gate gate(stream);
      Tensor src = full({n, 2 * n}, static_cast<float>(round), pinned);
      Tensor view = src.slice(1, 0, 2 * n, 2);
      const DeviceCopyPlan plan = plan_device_copy(dst, view, true);
      EXPECT_EQ(plan.path, DeviceCopyPath::kStaged);
      EXPECT_TRUE(plan.src_temporary) << plan.describe();
      EXPECT_TRUE(plan.pinned_host_temporaries) << plan.describe();
      dst.copy_(view, /*non_blocking=*/true);
      view = Tensor();
      src = Tensor();  // freed while the copy is queued
      // The temporary holds the view's n x n floats; the source n x 2n.
      for (const int64_t cols : {n, 2 * n}) {
        for (int k = 0; k < 4; ++k) taken.push_back(full({n, cols}, -1.0f, pinned));
      }
      ASSERT_EQ(memory::pinned_size_class(taken.front().nbytes()),
                memory::pinned_size_class(static_cast<size_t>(n * n) * sizeof(float)));
    }
    stream.synchronize();
    EXPECT_TRUE(all_equal(dst.to(kFloat32), static_cast<float>(round))) << "round " << round;
    for (const Tensor& t : taken) {
      ASSERT_TRUE(all_equal(t, -1.0f))
          << "round " << round << ": a pinned block was handed out while the copy still used it";
    }
  }
}

// The other direction: a device-to-host copy into a non-dense pinned destination ends with a
// scatter, queued on the stream, from a pinned temporary into the destination. A destination
// freed as soon as copy_ returns must not be handed out again before that scatter has run.
TEST_F(LatencyTest, AFreedPinnedDestinationIsNotReusedBeforeTheQueuedScatter) {
  const int64_t n = 128;
  const TensorOptions pinned = TensorOptions().pinned_memory(true);
  const Tensor src = full({n, n}, 4.0f, TensorOptions().device(kSim0));
  const Stream stream = current_stream(kSim0);
  stream.synchronize();
  for (int round = 1; round <= 3; ++round) {
    std::vector<Tensor> taken;
    {
      Gate gate(stream);
      Tensor out = zeros({n, 2 * n}, pinned);
      Tensor view = out.slice(1, 0, 2 * n, 2);
      const DeviceCopyPlan plan = plan_device_copy(view, src, true);
      EXPECT_EQ(plan.path, DeviceCopyPath::kStaged);
      EXPECT_TRUE(plan.dst_temporary) << plan.describe();
      EXPECT_TRUE(plan.pinned_host_temporaries) << plan.describe();
      view.copy_(src, /*non_blocking=*/true);
      view = Tensor();
      out = Tensor();  // freed while the scatter into it is queued
      for (const int64_t cols : {n, 2 * n}) {
        for (int k = 0; k < 4; ++k) taken.push_back(full({n, cols}, -1.0f, pinned));
      }
    }
    stream.synchronize();
    for (const Tensor& t : taken) {
      ASSERT_TRUE(all_equal(t, -1.0f))
          << "round " << round << ": a pinned block was handed out while the copy still used it";
    }
  }
}

}  // namespace
}  // namespace ferry::testing
