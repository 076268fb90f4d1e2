// Small tensors landing in place (nn::batched_move, Module::to): many small pageable host tensors
// land in one device block, each destination a storage of its own aliasing its 256-byte aligned
// range. Values (random, seeded), independence (in-place writes, version counters, set_data),
// the block living until its last tensor dies (and then freed, in the memory stats), grads,
// record_stream on a landed tensor, and a non-blocking move under chaos.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ferry/device/guard.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/nn/transfer.h"
#include "tests/memory/memory_fixture.h"
#include "tests/nn/module_test_modules.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

class ModuleLandingTest : public MemoryTest {};

// `n` small random tensors of random shapes (float32, some int64), then a few large ones, a
// non-contiguous one and a pinned one (which do not land).
std::vector<Tensor> sources(int n, Generator& gen, std::mt19937_64& rng) {
  std::vector<Tensor> out;
  for (int i = 0; i < n; ++i) {
    const int64_t rows = static_cast<int64_t>(rng() % 9) + 1;
    const int64_t cols = static_cast<int64_t>(rng() % 300) + 1;
    out.push_back(i % 10 == 3 ? randint(-1000, 1000, {rows, cols}, {}, &gen)
                              : randn({rows, cols}, {}, &gen));
  }
  for (int i = 0; i < 3; ++i) out.push_back(randn({700, 400 + i}, {}, &gen));  // > 1 MiB
  out.push_back(randn({30, 20}, {}, &gen).t());                                // non-contiguous
  out.push_back(randn({64}, {}, &gen).pin_memory());                           // pinned
  return out;
}

std::vector<nn::MovePair> moves_to(const std::vector<Tensor>& srcs, Device device) {
  std::vector<nn::MovePair> moves;
  for (const Tensor& s : srcs) moves.push_back({s, TensorOptions(s.dtype()).device(device), {}});
  return moves;
}

TEST_F(ModuleLandingTest, SmallTensorsLandInOneBlockWithTheirValues) {
  SCOPED_TRACE(seed_trace());
  Generator gen(test_seed());
  std::mt19937_64 rng = test_rng();
  const std::vector<Tensor> srcs = sources(300, gen, rng);
  std::vector<nn::MovePair> moves = moves_to(srcs, kSim0);
  const int64_t before = memory::stats(kSim0).allocation.current;
  const nn::TransferReport r = nn::batched_move(moves, /*non_blocking=*/false);
  EXPECT_EQ(r.landed_tensors, 300);
  EXPECT_EQ(r.landed_blocks, 1);
  EXPECT_EQ(r.batched_copies, 1) << "one batched copy reads every plain pageable source";
  EXPECT_EQ(r.batched_ranges, 300 + 3) << "the small ones and the three large contiguous ones";
  EXPECT_EQ(r.landing_copies, 0) << "nothing to convert, so nothing staged";
  EXPECT_EQ(r.synchronizations, 1);
  EXPECT_EQ(memory::stats(kSim0).allocation.current - before, 1 + 3 + 1 + 1)
      << "one block for the 300 small ones; the large, non-contiguous and pinned ones alone";
  for (size_t i = 0; i < moves.size(); ++i) {
    const Tensor& d = moves[i].dst;
    ASSERT_TRUE(d.defined()) << i;
    EXPECT_EQ(d.device(), kSim0);
    EXPECT_EQ(d.dtype(), srcs[i].dtype());
    EXPECT_EQ(d.sizes().vec(), srcs[i].sizes().vec());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d.data_ptr()) % memory::kDeviceAlignment, 0u) << i;
    EXPECT_ALL_CLOSE(d.cpu(), srcs[i], 0, 0) << i;
  }
  // Each landed tensor has a storage of its own, over the same allocation.
  const Tensor& a = moves[0].dst;
  const Tensor& b = moves[1].dst;
  EXPECT_FALSE(a.storage().is_alias_of(b.storage()));
  EXPECT_EQ(a.storage().nbytes(), a.nbytes());
  EXPECT_EQ(memory::storage_memory_resource(a.storage()),
            memory::storage_memory_resource(b.storage()));
  EXPECT_NE(memory::storage_memory_resource(a.storage()), nullptr);
  EXPECT_EQ(memory::storage_allocation_stream(a.storage()), current_stream(kSim0));
}

// Small sources converted on the way (float64 to float32) are converted
// into pinned staging and cross with one batched copy into the same block as the plain ones.
TEST_F(ModuleLandingTest, ConvertedSmallTensorsLandThroughStaging) {
  SCOPED_TRACE(seed_trace());
  Generator gen(test_seed());
  std::mt19937_64 rng = test_rng();
  std::vector<Tensor> srcs = sources(40, gen, rng);
  srcs.resize(40);  // the small ones only
  std::vector<nn::MovePair> moves;
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (i % 3 == 0 && srcs[i].is_floating_point()) {
      srcs[i] = srcs[i].to(kDouble);
      moves.push_back({srcs[i], TensorOptions(kFloat).device(kSim0), {}});
    } else {
      moves.push_back({srcs[i], TensorOptions(srcs[i].dtype()).device(kSim0), {}});
    }
  }
  const nn::TransferReport r = nn::batched_move(moves, /*non_blocking=*/false);
  EXPECT_EQ(r.landed_tensors, 40);
  EXPECT_EQ(r.landed_blocks, 1);
  EXPECT_EQ(r.landing_copies, 1) << "the converted ones cross in one batched copy from staging";
  EXPECT_GT(r.staged_tensors, 0);
  EXPECT_EQ(r.batched_ranges + r.staged_tensors, 40);
  for (size_t i = 0; i < moves.size(); ++i) {
    const Tensor& d = moves[i].dst;
    EXPECT_EQ(d.dtype(), moves[i].options.dtype()) << i;
    EXPECT_ALL_CLOSE(d.cpu(), srcs[i].to(d.dtype()), 0, 0) << i;
  }
}

TEST_F(ModuleLandingTest, LandedTensorsAreIndependentAndKeepTheBlockAlive) {
  SCOPED_TRACE(seed_trace());
  Generator gen(test_seed());
  std::mt19937_64 rng = test_rng();
  std::vector<Tensor> srcs;
  for (int i = 0; i < 64; ++i)
    srcs.push_back(randn({static_cast<int64_t>(rng() % 500) + 1}, {}, &gen));
  const int64_t before = memory::stats(kSim0).allocated_bytes.current;
  std::vector<Tensor> landed;
  {
    std::vector<nn::MovePair> moves = moves_to(srcs, kSim0);
    EXPECT_EQ(nn::batched_move(moves, false).landed_tensors, 64);
    for (const nn::MovePair& m : moves) landed.push_back(m.dst);
  }
  EXPECT_GT(memory::stats(kSim0).allocated_bytes.current, before);
  std::vector<uint32_t> versions;
  for (const Tensor& t : landed) versions.push_back(t._version());
  landed[5].fill_(42.0f);
  landed[6].add_(1.0f);
  for (size_t i = 0; i < landed.size(); ++i) {
    if (i == 5) {
      EXPECT_ALL_CLOSE(landed[i].cpu(), full(srcs[i].sizes(), 42.0f), 0, 0);
    } else if (i == 6) {
      EXPECT_ALL_CLOSE(landed[i].cpu(), srcs[i] + 1.0f, 0, 0);
    } else {
      EXPECT_ALL_CLOSE(landed[i].cpu(), srcs[i], 0, 0) << i;
    }
    EXPECT_EQ(landed[i]._version(), versions[i] + (i == 5 || i == 6 ? 1u : 0u)) << i;
  }
  // set_data on one replaces its data only.
  Tensor replaced = landed[7];
  replaced.set_data(zeros(srcs[7].sizes(), TensorOptions().device(kSim0)));
  EXPECT_ALL_CLOSE(landed[8].cpu(), srcs[8], 0, 0);
  // Freeing all but one keeps the block alive and valid, even with the caches churned.
  const Tensor last = landed[40];
  landed.clear();
  replaced = Tensor();
  for (int i = 0; i < 8; ++i) (void)full({4096}, -1.0f, TensorOptions().device(kSim0));
  memory::empty_cache(kSim0);
  EXPECT_ALL_CLOSE(last.cpu(), srcs[40], 0, 0);
  EXPECT_GT(memory::stats(kSim0).allocated_bytes.current, before);
}

TEST_F(ModuleLandingTest, TheBlockIsFreedWhenItsLastTensorDies) {
  const int64_t before = memory::stats(kSim0).allocation.current;
  const int64_t bytes_before = memory::stats(kSim0).allocated_bytes.current;
  std::vector<Tensor> srcs;
  for (int i = 0; i < 20; ++i) srcs.push_back(randn({100 + i}));
  Tensor kept;
  {
    std::vector<nn::MovePair> moves = moves_to(srcs, kSim0);
    (void)nn::batched_move(moves, false);
    EXPECT_EQ(memory::stats(kSim0).allocation.current, before + 1);
    kept = moves[19].dst;
  }
  EXPECT_EQ(memory::stats(kSim0).allocation.current, before + 1) << "the last one holds it";
  kept = Tensor();
  EXPECT_EQ(memory::stats(kSim0).allocation.current, before);
  EXPECT_EQ(memory::stats(kSim0).allocated_bytes.current, bytes_before);
}

TEST_F(ModuleLandingTest, ModuleToLandsParametersBuffersAndGrads) {
  SCOPED_TRACE(seed_trace());
  Net net;
  net(randn({2, 4})).sum().backward();
  std::vector<Tensor> tensors = net->parameters();
  for (const Tensor& b : net->buffers()) tensors.push_back(b);
  tensors.push_back(net->fc1->weight.grad());
  std::vector<Tensor> values;
  for (const Tensor& t : tensors) values.push_back(t.clone());
  const Tensor w_value = net->fc1->weight.clone();
  const Tensor g_value = net->fc1->weight.grad().clone();
  const Tensor b_value = net->fc1->bias.clone();
  const int64_t before = memory::stats(kSim0).allocation.current;
  net->to(kSim0);
  EXPECT_EQ(memory::stats(kSim0).allocation.current, before + 1) << "all of Net lands in one block";
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].device(), kSim0) << i;
    EXPECT_ALL_CLOSE(tensors[i].cpu(), values[i], 0, 0) << i;
  }
  EXPECT_TRUE(net->fc1->weight.grad().is_same(tensors.back()));
  // A step on the device writes each parameter alone.
  const Tensor w = net->fc1->weight;
  w.detach().sub_(w.grad());
  EXPECT_ALL_CLOSE(w.cpu(), w_value - g_value, 1e-6, 1e-6);
  EXPECT_ALL_CLOSE(w.grad().cpu(), g_value, 0, 0);
  EXPECT_ALL_CLOSE(net->fc1->bias.cpu(), b_value, 0, 0);
  net->cpu();
  EXPECT_EQ(memory::stats(kSim0).allocation.current, before) << "moving back frees the block";
}

// A non-blocking move under chaos, used at once on the current stream and, after
// wait_stream + record_stream, on another stream that outlives the tensors.
TEST_F(ModuleLandingTest, NonBlockingLandingIsSafeOnTwoStreamsUnderChaos) {
  sim::SimConfig c = default_sim_config();
  c.chaos_seed = test_seed();
  c.chaos_max_delay = std::chrono::microseconds(300);
  sim::configure(c);
  SCOPED_TRACE(seed_trace());
  Generator gen(test_seed());
  std::vector<Tensor> srcs;
  for (int i = 0; i < 40; ++i) srcs.push_back(randn({i + 1, 33}, {}, &gen));
  const Stream stream = current_stream(kSim0);
  const Stream side = get_stream_from_pool(kSim0);
  std::vector<Tensor> sums, side_sums;
  {
    StreamGate gate(stream);
    std::vector<nn::MovePair> moves = moves_to(srcs, kSim0);
    EXPECT_EQ(nn::batched_move(moves, /*non_blocking=*/true).landed_tensors, 40);
    for (const nn::MovePair& m : moves) sums.push_back(m.dst.sum());
    EXPECT_FALSE(stream.query()) << "the copy ran before the gate opened";
    side.wait_stream(stream);
    {
      StreamGuard guard(side);
      for (const nn::MovePair& m : moves) {
        m.dst.record_stream(side);
        side_sums.push_back(m.dst.mul(2.0f).sum());
      }
    }
    // The tensors die here while both streams are shut; new allocations must not take the block.
    moves.clear();
    for (int i = 0; i < 4; ++i) (void)full({40 * 33}, -1.0f, TensorOptions().device(kSim0));
  }
  side.synchronize();
  for (size_t i = 0; i < srcs.size(); ++i) {
    const double expected = srcs[i].sum().item<double>();
    EXPECT_NEAR(sums[i].item<double>(), expected, 1e-3) << i;
    EXPECT_NEAR(side_sums[i].item<double>(), 2 * expected, 2e-3) << i;
  }
}

}  // namespace
}  // namespace ferry::testing
