// The CUDA compute kernels as a whole. Without a GPU: every compute stub has a CUDA kernel when
// the backend is built (the cuDNN-backed ones when cuDNN was found), cuBLAS is not loaded until a
// GEMM runs, and a kernel handed host tensors raises DeviceError before touching the CUDA runtime.
// With a GPU (skipped otherwise, with "no CUDA device"): each kernel against the CPU's on random
// inputs in several dtypes and layouts (the nn kernels against the CPU kernels when those are
// registered).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/compute_kernels.h"
#include "ferry/device/runtime.h"
#include "ferry/iter/elementwise_stub.h"
#include "ferry/iter/tensor_iterator.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

#ifndef FERRY_WITH_CUDA
#error "tests/CMakeLists.txt defines FERRY_WITH_CUDA (0 or 1) for every test executable"
#endif
#ifndef FERRY_WITH_CUDNN
#error "tests/CMakeLists.txt defines FERRY_WITH_CUDNN (0 or 1) for every test executable"
#endif

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

struct StubInfo {
  const char* name;
  bool has_cuda;
  bool needs_cudnn;
};

template <typename Stub>
StubInfo info(const Stub& stub, bool needs_cudnn = false) {
  return {stub.name(), stub.has_kernel(DeviceType::CUDA), needs_cudnn};
}

std::vector<StubInfo> all_stubs() {
  return {info(elementwise_stub),
          info(reduce_stub),
          info(index_select_stub),
          info(index_add_stub),
          info(nll_loss_forward_stub),
          info(nll_loss_backward_stub),
          info(gemm_stub),
          info(conv2d_forward_stub, true),
          info(conv2d_backward_input_stub, true),
          info(conv2d_backward_weight_stub, true),
          info(max_pool2d_forward_stub),
          info(max_pool2d_backward_stub),
          info(avg_pool2d_forward_stub),
          info(avg_pool2d_backward_stub),
          info(adaptive_avg_pool2d_forward_stub),
          info(adaptive_avg_pool2d_backward_stub),
          info(batch_norm_forward_training_stub),
          info(batch_norm_forward_inference_stub),
          info(batch_norm_backward_stub),
          info(layer_norm_forward_stub),
          info(layer_norm_backward_stub),
          info(softmax_forward_stub, true),
          info(softmax_backward_stub, true)};
}

TEST(CudaKernels, EveryComputeStubHasACudaKernelWhenBuilt) {
  for (const StubInfo& s : all_stubs()) {
    const bool expected = FERRY_WITH_CUDA != 0 && (!s.needs_cudnn || FERRY_WITH_CUDNN != 0);
    EXPECT_EQ(s.has_cuda, expected) << s.name;
  }
}

// cuBLAS is loaded by the first CUDA GEMM, not at start: loading libcublasLt costs every process
// about half a second and 200 MB (ferry/backends/cuda/cublas_loader.h).
TEST(CudaKernels, CublasIsNotLoadedAtStart) {
  if (device_count(DeviceType::CUDA) > 0) GTEST_SKIP() << "a GPU test may have run a GEMM";
  std::ifstream maps("/proc/self/maps");
  ASSERT_TRUE(maps.good());
  std::string line;
  while (std::getline(maps, line)) {
    EXPECT_EQ(line.find("libcublas"), std::string::npos) << line;
  }
}

// ---- argument checks, without a GPU -----------------------------------------------------------

class CudaKernelChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FERRY_WITH_CUDA == 0) GTEST_SKIP() << "built without the CUDA backend";
  }
  // The DeviceError a CUDA kernel raises for host operands.
  static void expect_host_refused(const std::function<void()>& fn, const std::string& op) {
    const std::string message = error_of<DeviceError>(fn);
    EXPECT_THAT(message, HasSubstr(op)) << message;
    EXPECT_THAT(message, HasSubstr("on a CUDA device")) << message;
  }
};

TEST_F(CudaKernelChecks, HostOperandsAreRefusedBeforeAnyLaunch) {
  const Tensor m = zeros({2, 3, 3}), v = zeros({3}), idx = zeros({2}, TensorOptions(kInt64));
  const Tensor img = zeros({2, 3, 4, 4}), w = zeros({3, 3, 1, 1});
  const DeviceType cuda = DeviceType::CUDA;
  expect_host_refused(
      [&] {
        reduce_stub(cuda, zeros({1, 3, 3}), m, std::vector<int64_t>{0}, ReduceKind::Sum);
      },
      "sum");
  expect_host_refused(
      [&] {
        index_select_stub(cuda, zeros({2, 3}), zeros({4, 3}), idx);
      },
      "index_select");
  expect_host_refused(
      [&] {
        index_add_stub(cuda, zeros({4, 3}), idx, zeros({2, 3}), std::nullopt);
      },
      "index_add");
  expect_host_refused(
      [&] {
        nll_loss_forward_stub(cuda, zeros({}), zeros({}), zeros({2, 3}), idx, Tensor(), false,
                              -100);
      },
      "nll_loss");
  expect_host_refused(
      [&] {
        nll_loss_backward_stub(cuda, zeros({2, 3}), zeros({}), idx, Tensor(), false, -100, 1.0);
      },
      "nll_loss_backward");
  expect_host_refused([&] { gemm_stub(cuda, zeros({2, 3, 3}), m, m, 1.0, 0.0, Tensor()); }, "gemm");
  const Pool2dParams pool{{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, std::nullopt};
  expect_host_refused(
      [&] {
        max_pool2d_forward_stub(cuda, zeros({2, 3, 2, 2}), Tensor(), img, pool);
      },
      "max_pool2d_forward");
  expect_host_refused(
      [&] {
        avg_pool2d_forward_stub(cuda, zeros({2, 3, 2, 2}), img, pool);
      },
      "avg_pool2d_forward");
  expect_host_refused(
      [&] {
        adaptive_avg_pool2d_forward_stub(cuda, zeros({2, 3, 1, 1}), img);
      },
      "adaptive_avg_pool2d_forward");
  expect_host_refused(
      [&] {
        batch_norm_forward_inference_stub(cuda, zeros({2, 3, 4, 4}), img, Tensor(), Tensor(), v, v,
                                          1e-5);
      },
      "batch_norm_forward_inference");
  expect_host_refused(
      [&] {
        layer_norm_forward_stub(cuda, zeros({2, 3, 3}), zeros({2}), zeros({2}), m, Tensor(),
                                Tensor(), 2, 1e-5);
      },
      "layer_norm_forward");
  if (FERRY_WITH_CUDNN != 0) {
    expect_host_refused(
        [&] {
          conv2d_forward_stub(cuda, zeros({2, 3, 4, 4}), img, w, Tensor(), Conv2dParams{});
        },
        "conv2d_forward");
    expect_host_refused(
        [&] {
          softmax_forward_stub(cuda, zeros({2, 3, 3}), m, 1, false);
        },
        "softmax");
  }
  // The elementwise kernel names the operand.
  const Tensor a = zeros({4}), b = zeros({4});
  TensorIteratorConfig config;
  config.add_output(Tensor()).add_input(a).add_input(b);
  const TensorIterator iter = config.build();
  const std::string message = error_of<DeviceError>([&] {
    elementwise_stub(cuda, iter, ElementwiseOp{ElementwiseKind::Add, 1, 0, false, false});
  });
  EXPECT_THAT(message, HasSubstr("on a CUDA device")) << message;
}

// ---- CUDA against the CPU, on a GPU ---------------------------------------------------------

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count(DeviceType::CUDA) == 0) GTEST_SKIP() << "no CUDA device";
  }
  static Tensor gpu(const Tensor& t) { return t.defined() ? t.to(Device("cuda:0")) : t; }
  static double rtol(ScalarType t) {
    return t == kFloat64 ? 1e-12 : t == kFloat32 ? 1e-5 : t == kFloat16 ? 2e-3 : 1.6e-2;
  }
};

TEST_F(CudaVsCpu, Elementwise) {
  SCOPED_TRACE(seed_trace());
  for (ScalarType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor x = randn({33, 17}, TensorOptions(t));
    const Tensor y = randn({17}, TensorOptions(t));
    const Tensor xt = randn({17, 33}, TensorOptions(t)).t();  // strided
    const Tensor gx = gpu(x), gy = gpu(y), gxt = gpu(xt);
    const double r = rtol(t);
    EXPECT_ALL_CLOSE((gx + gy).cpu(), x + y, r, r);
    EXPECT_ALL_CLOSE(ferry::add(gx, gxt, 2).cpu(), ferry::add(x, xt, 2), r, r);
    EXPECT_ALL_CLOSE((gx * 3.0).cpu(), x * 3.0, r, r);
    EXPECT_ALL_CLOSE(ferry::rdiv(gx, 1.5).cpu(), ferry::rdiv(x, 1.5), r, r);
    EXPECT_ALL_CLOSE(gx.exp().cpu(), x.exp(), r, r);
    EXPECT_ALL_CLOSE(gxt.tanh().cpu(), xt.tanh(), r, r);
    EXPECT_ALL_CLOSE(gx.sigmoid().cpu(), x.sigmoid(), r, r);
    EXPECT_ALL_CLOSE(gx.gelu().cpu(), x.gelu(), r, r);
    EXPECT_ALL_CLOSE(gx.gelu("tanh").cpu(), x.gelu("tanh"), r, r);
    EXPECT_ALL_CLOSE(gx.abs().sqrt().cpu(), x.abs().sqrt(), r, r);
    EXPECT_ALL_CLOSE(gx.pow(3).cpu(), x.pow(3), r, r);
    EXPECT_ALL_CLOSE(gx.relu().cpu(), x.relu(), 0, 0);
    EXPECT_ALL_CLOSE(ferry::gelu_backward(gx, gxt).cpu(), ferry::gelu_backward(x, xt), r, r);
    EXPECT_ALL_CLOSE(ferry::threshold_backward(gx, gxt, 0).cpu(),
                     ferry::threshold_backward(x, xt, 0), 0, 0);
    EXPECT_ALL_CLOSE(gx.gt(gy).cpu(), x.gt(y), 0, 0);
    EXPECT_ALL_CLOSE(gx.le(0.5).cpu(), x.le(0.5), 0, 0);
  }
  const Tensor i = randint(-50, 50, {1000}), j = randint(-50, 50, {1000});
  EXPECT_ALL_CLOSE((gpu(i) * gpu(j) - gpu(i)).cpu(), i * j - i, 0, 0);
  EXPECT_ALL_CLOSE(gpu(i).abs().cpu(), i.abs(), 0, 0);
}

TEST_F(CudaVsCpu, Reductions) {
  SCOPED_TRACE(seed_trace());
  for (ScalarType t : {kFloat32, kFloat64, kFloat16}) {
    const Tensor x = randn({7, 130, 9}, TensorOptions(t));
    const Tensor xt = x.permute({2, 0, 1});
    const Tensor gx = gpu(x), gxt = gpu(xt);
    const double r = t == kFloat16 ? 1e-3 : 1e-6;
    EXPECT_ALL_CLOSE(gx.sum().cpu(), x.sum(), r, r);
    EXPECT_ALL_CLOSE(gx.sum({1}).cpu(), x.sum({1}), r, r);
    EXPECT_ALL_CLOSE(gxt.sum({0, 2}, true).cpu(), xt.sum({0, 2}, true), r, r);
    EXPECT_ALL_CLOSE(gx.mean({0}).cpu(), x.mean({0}), r, r);
    EXPECT_ALL_CLOSE(gx.amax({1, 2}).cpu(), x.amax({1, 2}), 0, 0);
    EXPECT_ALL_CLOSE(gxt.argmax(2).cpu(), xt.argmax(2), 0, 0);
    EXPECT_ALL_CLOSE(gx.argmax().cpu(), x.argmax(), 0, 0);
  }
  // Large enough to split one reduction over several blocks.
  const Tensor big = randn({1 << 22});
  EXPECT_ALL_CLOSE(gpu(big).sum().cpu(), big.sum(), 1e-6, 1e-3);
  const Tensor b = randint(0, 2, {1000}).to(kBool);
  EXPECT_ALL_CLOSE(gpu(b).sum().cpu(), b.sum(), 0, 0);
}

TEST_F(CudaVsCpu, IndexKernelsAndTheLoss) {
  SCOPED_TRACE(seed_trace());
  const Tensor table = randn({10, 6}), idx = randint(0, 10, {25});
  Tensor out = empty({25, 6}), gout = gpu(empty({25, 6}));
  index_select_stub(DeviceType::CPU, out, table, idx);
  index_select_stub(DeviceType::CUDA, gout, gpu(table), gpu(idx));
  EXPECT_ALL_CLOSE(gout.cpu(), out, 0, 0);
  Tensor acc = zeros({10, 6}), gacc = gpu(zeros({10, 6}));
  const Tensor src = randn({25, 6});
  index_add_stub(DeviceType::CPU, acc, idx, src, 3);
  index_add_stub(DeviceType::CUDA, gacc, gpu(idx), gpu(src), 3);
  EXPECT_ALL_CLOSE(gacc.cpu(), acc, 1e-5, 1e-5);
  const Tensor lp = randn({25, 10}).log_softmax(1), weight = rand({10});
  for (bool per_element : {false, true}) {
    Tensor loss = per_element ? empty({25}) : empty({}), total = empty({});
    Tensor gloss = gpu(loss.clone()), gtotal = gpu(total.clone());
    nll_loss_forward_stub(DeviceType::CPU, loss, total, lp, idx, weight, per_element, 3);
    nll_loss_forward_stub(DeviceType::CUDA, gloss, gtotal, gpu(lp), gpu(idx), gpu(weight),
                          per_element, 3);
    EXPECT_ALL_CLOSE(gloss.cpu(), loss, 1e-5, 1e-6);
    EXPECT_ALL_CLOSE(gtotal.cpu(), total, 1e-5, 1e-6);
    const Tensor up = per_element ? randn({25}) : randn({});
    Tensor grad = empty({25, 10}), ggrad = gpu(empty({25, 10}));
    nll_loss_backward_stub(DeviceType::CPU, grad, up, idx, weight, per_element, 3, 0.5);
    nll_loss_backward_stub(DeviceType::CUDA, ggrad, gpu(up), gpu(idx), gpu(weight), per_element, 3,
                           0.5);
    EXPECT_ALL_CLOSE(ggrad.cpu(), grad, 1e-6, 1e-7);
  }
}

// Runs `run(device_type, operands...)` with outputs allocated like `outputs` on each side and
// compares them; skips when the CPU has no kernel to compare with.
#define FERRY_SKIP_WITHOUT_CPU(stub)                                                  \
  if (!(stub).has_kernel(DeviceType::CPU)) {                                          \
    GTEST_SKIP() << "no CPU kernel for " << (stub).name() << " to compare with (the " \
                 << "oneDNN kernels live on branch dnnl-kernels)";                    \
  }

TEST_F(CudaVsCpu, Gemm) {
  FERRY_SKIP_WITHOUT_CPU(gemm_stub);
  for (ScalarType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32}) {
    const TensorOptions o(t);
    const Tensor a = t == kInt32 ? randint(-5, 5, {3, 20, 30}, o) : randn({3, 20, 30}, o);
    const Tensor b = (t == kInt32 ? randint(-5, 5, {3, 40, 30}, o) : randn({3, 40, 30}, o))
                         .transpose(1, 2);  // column-major b
    const Tensor bias = t == kInt32 ? randint(-5, 5, {40}, o) : randn({40}, o);
    for (double beta : {0.0, 0.5}) {
      Tensor out = t == kInt32 ? randint(-5, 5, {3, 20, 40}, o) : randn({3, 20, 40}, o);
      Tensor gout = gpu(out);
      gemm_stub(DeviceType::CPU, out, a, b, 2.0, t == kInt32 ? 0.0 : beta, bias);
      gemm_stub(DeviceType::CUDA, gout, gpu(a), gpu(b), 2.0, t == kInt32 ? 0.0 : beta, gpu(bias));
      EXPECT_ALL_CLOSE(gout.cpu(), out, rtol(t) * 10, rtol(t) * 10) << t << " beta " << beta;
    }
    // A broadcast batch (stride 0) and a transposed output.
    const Tensor a1 = a.select(0, 0).unsqueeze(0).expand({3, 20, 30});
    Tensor out = empty({3, 40, 20}, o).transpose(1, 2),
           gout = gpu(empty({3, 40, 20}, o)).transpose(1, 2);
    gemm_stub(DeviceType::CPU, out, a1, b, 1.0, 0.0, Tensor());
    gemm_stub(DeviceType::CUDA, gout, gpu(a1), gpu(b), 1.0, 0.0, Tensor());
    EXPECT_ALL_CLOSE(gout.cpu(), out, rtol(t) * 10, rtol(t) * 10) << t;
  }
}

TEST_F(CudaVsCpu, Convolutions) {
  FERRY_SKIP_WITHOUT_CPU(conv2d_forward_stub);
  for (ScalarType t : {kFloat32, kFloat64, kFloat16}) {
    for (bool channels_last : {false, true}) {
      const TensorOptions o(t);
      const MemoryFormat f = channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
      const Conv2dParams p{{2, 1}, {1, 2}, {1, 2}, 2};
      const Tensor x = randn({2, 4, 9, 11}, o).contiguous(f), w = randn({6, 2, 3, 3}, o);
      const Tensor bias = randn({6}, o);
      const Tensor y = empty({2, 6, 5, 11}, o);
      Tensor gy = gpu(y);
      conv2d_forward_stub(DeviceType::CPU, y, x, w, bias, p);
      conv2d_forward_stub(DeviceType::CUDA, gy, gpu(x), gpu(w), gpu(bias), p);
      const double r = rtol(t) * 20;
      EXPECT_ALL_CLOSE(gy.cpu(), y, r, r) << t << (channels_last ? " channels-last" : "");
      const Tensor dy = randn({2, 6, 5, 11}, o);
      Tensor dx = empty({2, 4, 9, 11}, o), gdx = gpu(dx);
      conv2d_backward_input_stub(DeviceType::CPU, dx, dy, w, p);
      conv2d_backward_input_stub(DeviceType::CUDA, gdx, gpu(dy), gpu(w), p);
      EXPECT_ALL_CLOSE(gdx.cpu(), dx, r, r) << t;
      Tensor dw = empty({6, 2, 3, 3}, o), db = empty({6}, o), gdw = gpu(dw), gdb = gpu(db);
      conv2d_backward_weight_stub(DeviceType::CPU, dw, db, x, dy, p);
      conv2d_backward_weight_stub(DeviceType::CUDA, gdw, gdb, gpu(x), gpu(dy), p);
      EXPECT_ALL_CLOSE(gdw.cpu(), dw, r, r) << t;
      EXPECT_ALL_CLOSE(gdb.cpu(), db, r, r) << t;
    }
  }
}

TEST_F(CudaVsCpu, Pooling) {
  FERRY_SKIP_WITHOUT_CPU(max_pool2d_forward_stub);
  for (ScalarType t : {kFloat32, kFloat64, kBFloat16}) {
    const TensorOptions o(t);
    const Tensor x = randn({2, 3, 9, 8}, o).contiguous(MemoryFormat::ChannelsLast);
    const Pool2dParams p{{3, 2}, {2, 2}, {1, 1}, {1, 1}, true, false, std::nullopt};
    // Output 5 x 5 (ceil mode).
    Tensor y = empty({2, 3, 5, 5}, o), idx = empty({2, 3, 5, 5}, TensorOptions(kInt64));
    Tensor gy = gpu(y), gidx = gpu(idx);
    max_pool2d_forward_stub(DeviceType::CPU, y, idx, x, p);
    max_pool2d_forward_stub(DeviceType::CUDA, gy, gidx, gpu(x), p);
    EXPECT_ALL_CLOSE(gy.cpu(), y, 0, 0) << t;
    EXPECT_ALL_CLOSE(gidx.cpu(), idx, 0, 0) << t;
    const Tensor dy = randn({2, 3, 5, 5}, o);
    Tensor dx = empty({2, 3, 9, 8}, o), gdx = gpu(dx);
    max_pool2d_backward_stub(DeviceType::CPU, dx, dy, idx);
    max_pool2d_backward_stub(DeviceType::CUDA, gdx, gpu(dy), gidx);
    EXPECT_ALL_CLOSE(gdx.cpu(), dx, rtol(t), rtol(t)) << t;
    avg_pool2d_forward_stub(DeviceType::CPU, y, x, p);
    avg_pool2d_forward_stub(DeviceType::CUDA, gy, gpu(x), p);
    EXPECT_ALL_CLOSE(gy.cpu(), y, rtol(t), rtol(t)) << t;
    avg_pool2d_backward_stub(DeviceType::CPU, dx, dy, p);
    avg_pool2d_backward_stub(DeviceType::CUDA, gdx, gpu(dy), p);
    EXPECT_ALL_CLOSE(gdx.cpu(), dx, rtol(t), rtol(t)) << t;
    Tensor ay = empty({2, 3, 4, 3}, o), gay = gpu(ay);
    adaptive_avg_pool2d_forward_stub(DeviceType::CPU, ay, x);
    adaptive_avg_pool2d_forward_stub(DeviceType::CUDA, gay, gpu(x));
    EXPECT_ALL_CLOSE(gay.cpu(), ay, rtol(t), rtol(t)) << t;
    const Tensor ady = randn({2, 3, 4, 3}, o);
    adaptive_avg_pool2d_backward_stub(DeviceType::CPU, dx, ady);
    adaptive_avg_pool2d_backward_stub(DeviceType::CUDA, gdx, gpu(ady));
    EXPECT_ALL_CLOSE(gdx.cpu(), dx, rtol(t), rtol(t)) << t;
  }
}

TEST_F(CudaVsCpu, Normalization) {
  FERRY_SKIP_WITHOUT_CPU(batch_norm_forward_training_stub);
  for (ScalarType t : {kFloat32, kFloat64, kFloat16}) {
    const TensorOptions o(t);
    const ScalarType st = t == kFloat64 ? kFloat64 : kFloat32;
    const TensorOptions so(st);
    const double r = rtol(t) * 10;
    const Tensor x = randn({4, 5, 6, 7}, o).contiguous(MemoryFormat::ChannelsLast);
    const Tensor w = randn({5}, o), b = randn({5}, o);
    Tensor y = empty({4, 5, 6, 7}, o), m = empty({5}, so), inv = empty({5}, so);
    Tensor rm = zeros({5}, so), rv = ones({5}, so);
    Tensor gy = gpu(y), gm = gpu(m), ginv = gpu(inv), grm = gpu(rm), grv = gpu(rv);
    batch_norm_forward_training_stub(DeviceType::CPU, y, m, inv, x, w, b, rm, rv, 0.1, 1e-5);
    batch_norm_forward_training_stub(DeviceType::CUDA, gy, gm, ginv, gpu(x), gpu(w), gpu(b), grm,
                                     grv, 0.1, 1e-5);
    EXPECT_ALL_CLOSE(gy.cpu(), y, r, r) << t;
    EXPECT_ALL_CLOSE(gm.cpu(), m, r, r) << t;
    EXPECT_ALL_CLOSE(ginv.cpu(), inv, r, r) << t;
    EXPECT_ALL_CLOSE(grm.cpu(), rm, r, r) << t;
    EXPECT_ALL_CLOSE(grv.cpu(), rv, r, r) << t;
    const Tensor dy = randn({4, 5, 6, 7}, o);
    Tensor dx = empty({4, 5, 6, 7}, o), dw = empty({5}, o), db = empty({5}, o);
    Tensor gdx = gpu(dx), gdw = gpu(dw), gdb = gpu(db);
    for (bool training : {true, false}) {
      batch_norm_backward_stub(DeviceType::CPU, dx, dw, db, dy, x, w, m, inv, training);
      batch_norm_backward_stub(DeviceType::CUDA, gdx, gdw, gdb, gpu(dy), gpu(x), gpu(w), gm, ginv,
                               training);
      EXPECT_ALL_CLOSE(gdx.cpu(), dx, r, r) << t << " training " << training;
      EXPECT_ALL_CLOSE(gdw.cpu(), dw, r * 10, r * 10) << t;
      EXPECT_ALL_CLOSE(gdb.cpu(), db, r * 10, r * 10) << t;
    }
    batch_norm_forward_inference_stub(DeviceType::CPU, y, x, w, b, rm, rv, 1e-5);
    batch_norm_forward_inference_stub(DeviceType::CUDA, gy, gpu(x), gpu(w), gpu(b), grm, grv, 1e-5);
    EXPECT_ALL_CLOSE(gy.cpu(), y, r, r) << t;

    const Tensor lx = randn({3, 4, 50}, o), lw = randn({4, 50}, o), lb = randn({4, 50}, o);
    Tensor ly = empty({3, 4, 50}, o), lm = empty({3}, so), lr = empty({3}, so);
    Tensor gly = gpu(ly), glm = gpu(lm), glr = gpu(lr);
    layer_norm_forward_stub(DeviceType::CPU, ly, lm, lr, lx, lw, lb, 2, 1e-5);
    layer_norm_forward_stub(DeviceType::CUDA, gly, glm, glr, gpu(lx), gpu(lw), gpu(lb), 2, 1e-5);
    EXPECT_ALL_CLOSE(gly.cpu(), ly, r, r) << t;
    EXPECT_ALL_CLOSE(glr.cpu(), lr, r, r) << t;
    const Tensor ldy = randn({3, 4, 50}, o);
    Tensor ldx = empty({3, 4, 50}, o), ldw = empty({4, 50}, o), ldb = empty({4, 50}, o);
    Tensor gldx = gpu(ldx), gldw = gpu(ldw), gldb = gpu(ldb);
    layer_norm_backward_stub(DeviceType::CPU, ldx, ldw, ldb, ldy, lx, lm, lr, lw, 2);
    layer_norm_backward_stub(DeviceType::CUDA, gldx, gldw, gldb, gpu(ldy), gpu(lx), glm, glr,
                             gpu(lw), 2);
    EXPECT_ALL_CLOSE(gldx.cpu(), ldx, r, r) << t;
    EXPECT_ALL_CLOSE(gldw.cpu(), ldw, r, r) << t;
    EXPECT_ALL_CLOSE(gldb.cpu(), ldb, r, r) << t;
  }
}

TEST_F(CudaVsCpu, Softmax) {
  FERRY_SKIP_WITHOUT_CPU(softmax_forward_stub);
  for (ScalarType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const TensorOptions o(t);
    const double r = rtol(t) * 10;
    const Tensor x = randn({5, 7, 9}, o).permute({1, 0, 2});  // dim 1 is the slowest in memory
    for (int64_t dim : {0, 1, 2}) {
      for (bool log : {false, true}) {
        Tensor y = empty({7, 5, 9}, o), gy = gpu(y);
        softmax_forward_stub(DeviceType::CPU, y, x, dim, log);
        softmax_forward_stub(DeviceType::CUDA, gy, gpu(x), dim, log);
        EXPECT_ALL_CLOSE(gy.cpu(), y, r, r) << t << " dim " << dim << " log " << log;
        const Tensor dy = randn({7, 5, 9}, o);
        Tensor dx = empty({7, 5, 9}, o), gdx = gpu(dx);
        softmax_backward_stub(DeviceType::CPU, dx, dy, y, dim, log);
        softmax_backward_stub(DeviceType::CUDA, gdx, gpu(dy), gy, dim, log);
        EXPECT_ALL_CLOSE(gdx.cpu(), dx, r, r) << t << " dim " << dim << " log " << log;
      }
    }
  }
}

}  // namespace
}  // namespace ferry::testing
