// Copy, Wait and fork/join. Values and gradients across sim devices and between the CPU and a
// sim device (with chaos), labels passing through without gradient, the record_stream safety of
// Copy (the source freed and its block reused at once by another allocation while the copy is
// still queued; the output freed while a consumer is still queued: each case fails if the
// matching record_stream call in Copy is removed), and the order fork/join impose on backward,
// checked on the recorded order of backward calls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/autograd/engine.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/pipeline/copy.h"
#include "ferry/pipeline/dependency.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::pipeline {
namespace {

const Device kSim0("sim:0");
const Device kSim1("sim:1");

class PipelineCopy : public ferry::testing::SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.chaos_seed = ferry::testing::test_seed();
    c.chaos_max_delay = std::chrono::microseconds(300);
    return c;
  }
};

TEST_F(PipelineCopy, CopiesValuesAndGradientsAcrossSimDevices) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Generator gen(ferry::testing::test_seed());
  const Tensor host = randn({64, 8}, kFloat32, &gen);
  Tensor x = host.to(kSim0).detach().requires_grad_(true);
  const Stream prev = new_stream(kSim0), next = new_stream(kSim1);
  const Tensor doubled = x * 2;
  wait_stream(prev, current_stream(kSim0));  // the copy reads `doubled` after it is computed
  variable_list out = Copy::apply(prev, next, variable_list{doubled});
  out = Wait::apply(next, current_stream(kSim1), out);
  ASSERT_EQ(out[0].device(), kSim1);
  EXPECT_EQ(out[0].grad_fn()->name(), "ferry::pipeline::WaitBackward");
  EXPECT_ALL_CLOSE(out[0], host * 2);
  (out[0] * out[0]).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), kSim0);
  EXPECT_ALL_CLOSE(x.grad(), host * 8, 1e-6, 1e-6);
}

TEST_F(PipelineCopy, CopiesBetweenTheCpuStreamAndASimDeviceAndPassesLabelsThrough) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  Generator gen(ferry::testing::test_seed());
  const Tensor host = randn({16, 4}, kFloat32, &gen);
  const Tensor labels = arange(16, kInt64);
  Tensor x = host.detach().requires_grad_(true);
  const Stream next = new_stream(kSim0);
  variable_list out = Copy::apply(cpu_stream(), next, variable_list{x, labels});
  out = Wait::apply(next, current_stream(kSim0), out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].device(), kSim0);
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_ALL_CLOSE(out[1], labels);
  (out[0] * out[1].to(kFloat32).unsqueeze(1)).sum().backward();
  EXPECT_EQ(x.grad().device(), Device("cpu"));
  EXPECT_ALL_CLOSE(x.grad(), labels.to(kFloat32).unsqueeze(1).expand({16, 4}));
  // And back: sim to the CPU stream.
  variable_list back = Copy::apply(next, cpu_stream(), variable_list{out[0].detach()});
  EXPECT_ALL_CLOSE(back[0], host);
}

// The source of a Copy is freed right after Copy returns and its block is handed at once to a
// new allocation on the source's own stream, which overwrites it, while the copy itself still
// waits behind a gate on prev_stream. Copy's record_stream(x, prev_stream) is what keeps the
// allocator from reusing the block before the copy has read it.
TEST_F(PipelineCopy, SourceFreedAndReusedRightAfterCopyIsStillCopiedRight) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  constexpr int64_t kN = 40000;  // 160000 bytes: a size no other tensor here has
  memory::empty_cache(kSim0);
  const Stream prev = new_stream(kSim0), next = new_stream(kSim1);
  Tensor x = full({kN}, 3.0, TensorOptions(kFloat32).device(kSim0));
  const void* source_block = x.data_ptr();
  wait_stream(prev, current_stream(kSim0));  // the copy reads x after its fill
  ferry::testing::Gate gate(std::chrono::seconds(10));
  enqueue_host_function(prev, gate.blocker());
  variable_list out = Copy::apply(prev, next, variable_list{x});
  x = Tensor();  // freed on the host side
  const Tensor overwrite = full({kN}, -1.0, TensorOptions(kFloat32).device(kSim0));
  EXPECT_NE(overwrite.data_ptr(), source_block)
      << "the allocator handed out the source's block while the copy from it was queued";
  gate.open();
  out = Wait::apply(next, current_stream(kSim1), out);
  EXPECT_ALL_CLOSE(out[0], full({kN}, 3.0));
  EXPECT_FALSE(gate.timed_out());
}

// The output of a Copy is used on the stream that was current when Copy was called (here gated),
// then freed; a new allocation on next_stream (where the output was allocated) overwrites at
// once. Copy's record_stream(y, output_stream) is what keeps the block for the queued reader.
TEST_F(PipelineCopy, OutputFreedWhileItsReaderIsQueuedIsNotReusedUnderIt) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  constexpr int64_t kN = 40064;
  memory::empty_cache(kSim1);
  const Stream prev = new_stream(kSim0), next = new_stream(kSim1);
  const Stream output_stream = current_stream(kSim1);
  const Tensor x = full({kN}, 5.0, TensorOptions(kFloat32).device(kSim0));
  wait_stream(prev, current_stream(kSim0));
  Tensor y = Copy::apply(prev, next, variable_list{x})[0];
  const void* output_block = y.data_ptr();
  wait_stream(output_stream, next);
  ferry::testing::Gate gate(std::chrono::seconds(10));
  enqueue_host_function(output_stream, gate.blocker());
  const Tensor doubled = y * 2;  // queued on output_stream, behind the gate
  y = Tensor();
  Tensor overwrite;
  {
    use_stream on_next(next);
    overwrite = full({kN}, -7.0, TensorOptions(kFloat32).device(kSim1));
  }
  EXPECT_NE(overwrite.data_ptr(), output_block)
      << "the allocator handed out the output's block while a reader of it was queued";
  gate.open();
  EXPECT_ALL_CLOSE(doubled, full({kN}, 10.0));
  EXPECT_FALSE(gate.timed_out());
}

// Records the order in which backward reaches it. A probe given `wait_for` first waits (at most
// 500 ms) for that name to be recorded.
struct Probe : autograd::Function<Probe> {
  static std::mutex mutex;
  static std::condition_variable cv;
  static std::vector<std::string> order;
  static Tensor forward(autograd::AutogradContext* ctx, const std::string& name,
                        const std::string& wait_for, const Tensor& x) {
    ctx->saved_data["name"] = name;
    ctx->saved_data["wait_for"] = wait_for;
    return x.detach();
  }
  static variable_list backward(autograd::AutogradContext* ctx, variable_list grads) {
    const std::string wait_for = ctx->saved_data["wait_for"].to_string();
    std::unique_lock<std::mutex> lock(mutex);
    if (!wait_for.empty()) {
      cv.wait_for(lock, std::chrono::milliseconds(500),
                  [&] { return std::find(order.begin(), order.end(), wait_for) != order.end(); });
    }
    order.push_back(ctx->saved_data["name"].to_string());
    cv.notify_all();
    return {Tensor(), Tensor(), grads[0]};
  }
};
std::mutex Probe::mutex;
std::condition_variable Probe::cv;
std::vector<std::string> Probe::order;

// Branch a on sim:0, branch b on sim:1: their nodes run on different engine threads, and b's
// probe holds back until a's has run. Without the phony edge a's probe runs first; with
// fork(a) / join(b), a's history must wait until b's backward has come down to the join, so b's
// probe runs first (after its bounded wait).
TEST_F(PipelineCopy, ForkJoinHoldsTheForkedHistoryUntilTheJoinedBranchIsDone) {
  for (bool with_phony : {false, true}) {
    SCOPED_TRACE(with_phony ? "with the phony dependency" : "without it");
    {
      std::lock_guard<std::mutex> lock(Probe::mutex);
      Probe::order.clear();
    }
    Tensor a = ones({3}, TensorOptions().device(kSim0)).requires_grad_(true);
    Tensor b = ones({3}, TensorOptions().device(kSim1)).requires_grad_(true);
    Tensor xa = Probe::apply(std::string("a"), std::string(), a * 2);
    Tensor xb = b * 3;
    if (with_phony) {
      Tensor phony;
      std::tie(xa, phony) = fork(xa);
      EXPECT_EQ(phony.numel(), 0);
      xb = join(xb, phony);
    }
    xb = Probe::apply(std::string("b"), std::string("a"), xb);
    (xa.sum().cpu() + xb.sum().cpu()).backward();
    EXPECT_ALL_CLOSE(a.grad(), full({3}, 2.0));
    EXPECT_ALL_CLOSE(b.grad(), full({3}, 3.0));
    std::lock_guard<std::mutex> lock(Probe::mutex);
    EXPECT_EQ(Probe::order,
              (std::vector<std::string>{with_phony ? "b" : "a", with_phony ? "a" : "b"}));
  }
}

TEST(PipelineDependency, PassThroughWithoutGrad) {
  const Tensor x = ones({2});
  auto [y, phony] = fork(x);
  EXPECT_EQ(y.impl(), x.impl());
  EXPECT_FALSE(phony.requires_grad());
  EXPECT_EQ(join(x, phony).impl(), x.impl());
}

}  // namespace
}  // namespace ferry::pipeline
