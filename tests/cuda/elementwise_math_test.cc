// The CUDA elementwise kernel's arithmetic (ferry/backends/cuda/elementwise_math.h), run on the
// host against the CPU kernel (elementwise_stub for the CPU): the same table of dtypes each kind
// takes, and the same values for every kind, dtype and operand form (two tensors, a scalar second
// or first, alpha), special values included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ferry/backends/cuda/elementwise_math.h"
#include "ferry/core/error.h"
#include "ferry/iter/elementwise_stub.h"
#include "ferry/iter/tensor_iterator.h"
#include "ferry/ops/factories.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

using K = ElementwiseKind;
namespace ew = cuda::ew;

constexpr int kKinds = static_cast<int>(K::Where) + 1;

// The CPU kernel's result for `op` over `inputs` (output allocated with out_dtype).
Tensor cpu_result(const ElementwiseOp& op, const std::vector<Tensor>& inputs,
                  ScalarType out_dtype) {
  Tensor out = empty(inputs.back().sizes(), TensorOptions(out_dtype));
  TensorIteratorConfig config;
  config.add_output(out);
  for (const Tensor& t : inputs) config.add_input(t);
  config.check_all_same_dtype(false).resize_outputs(false);
  const TensorIterator iter = config.build();
  elementwise_stub(DeviceType::CPU, iter, op);
  return out;
}

int tensor_inputs(const ElementwiseOp& op) {
  if (op.kind == K::Where) return 3;
  return op.scalar_operand ? 1 : elementwise_arity(op.kind);
}

TEST(CudaElementwiseMath, TakesTheDtypesTheCpuKernelTakes) {
  for (int k = 0; k < kKinds; ++k) {
    for (int t = 0; t < kNumScalarTypes; ++t) {
      for (bool alpha : {true, false}) {
        const auto kind = static_cast<K>(k);
        const auto dtype = static_cast<ScalarType>(t);
        ElementwiseOp op{kind, alpha, 0, false, false};
        std::vector<Tensor> inputs;
        if (kind == K::Where) inputs.push_back(zeros({3}, TensorOptions(kBool)));
        while (static_cast<int>(inputs.size()) < tensor_inputs(op)) {
          inputs.push_back(zeros({3}, TensorOptions(dtype)));
        }
        const ScalarType out = is_comparison(kind) ? kBool : dtype;
        bool cpu_takes = true;
        try {
          (void)cpu_result(op, inputs, out);
        } catch (const DTypeError&) {
          cpu_takes = false;
        }
        EXPECT_EQ(ew::defined_for(op, dtype), cpu_takes)
            << elementwise_kind_name(kind) << " on " << dtype << " (alpha " << alpha << ")";
      }
    }
  }
}

// Random values of T with the special ones mixed in.
template <typename T>
Tensor values(int64_t n, std::mt19937_64& rng) {
  Tensor t = empty({n}, TensorOptions(scalar_type_v<T>));
  T* p = t.data_ptr<T>();
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      p[i] = rng() % 2;
    } else if constexpr (std::is_integral_v<T>) {
      const int64_t lo = std::is_signed_v<T> ? -6 : 0;
      p[i] = static_cast<T>(lo + static_cast<int64_t>(rng() % 13));
    } else {
      constexpr double kSpecial[] = {0.0,
                                     -0.0,
                                     0.5,
                                     2.0,
                                     -1.0,
                                     std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity(),
                                     std::numeric_limits<double>::quiet_NaN()};
      const double v =
          i % 5 == 0 ? kSpecial[rng() % 8] : std::uniform_real_distribution<double>(-4, 4)(rng);
      p[i] = static_cast<T>(static_cast<float>(v));
      if constexpr (std::is_same_v<T, double>) p[i] = v;
    }
  }
  return t;
}

// What the CUDA kernel computes, evaluated on the host.
template <typename T>
Tensor expected_result(const ElementwiseOp& op, const std::vector<Tensor>& inputs,
                       ScalarType out_dtype) {
  using C = ew::compute_t<T>;
  ew::Scalars<C> s;
  s.kind = op.kind;
  s.alpha = op.alpha.to<C>();
  s.scalar = op.scalar.to<C>();
  s.int_exponent = op.scalar.to<int64_t>();
  s.scalar_operand = op.scalar_operand;
  s.scalar_first = op.scalar_first;
  const int64_t n = inputs[0].numel();
  Tensor out = empty({n}, TensorOptions(out_dtype));
  const T* a = inputs[0].data_ptr<T>();
  const T* b = inputs.size() > 1 ? inputs[1].data_ptr<T>() : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    if (out_dtype == kBool) {
      out.data_ptr<bool>()[i] =
          b ? ew::apply2<T, bool>(s, a[i], b[i]) : ew::apply1<T, bool>(s, a[i]);
    } else if constexpr (!std::is_same_v<T, bool>) {
      out.data_ptr<T>()[i] = b ? ew::apply2<T, T>(s, a[i], b[i]) : ew::apply1<T, T>(s, a[i]);
    }
  }
  return out;
}

template <typename T>
void check_dtype(std::mt19937_64& rng) {
  constexpr ScalarType dtype = scalar_type_v<T>;
  const double rtol = std::is_same_v<T, double> ? 1e-15 : 1e-6;
  for (int k = 0; k < static_cast<int>(K::Where); ++k) {
    const auto kind = static_cast<K>(k);
    for (int form = 0; form < 3; ++form) {  // two tensors; scalar second; scalar first
      if (form > 0 && elementwise_arity(kind) == 1 && kind != K::Pow) continue;
      if (form > 0 && kind == K::Pow) continue;
      ElementwiseOp op{kind, std::is_same_v<T, bool> ? Scalar(true) : Scalar(2), 0, form > 0,
                       form == 2};
      if (kind == K::Pow) op.scalar = std::is_integral_v<T> ? Scalar(3) : Scalar(1.5);
      if (form > 0) {
        op.scalar = std::is_integral_v<T> ? (std::is_same_v<T, bool> ? Scalar(true) : Scalar(3))
                                          : Scalar(1.25);
      }
      if (!ew::defined_for(op, dtype)) continue;
      std::vector<Tensor> inputs{values<T>(200, rng)};
      if (tensor_inputs(op) == 2) inputs.push_back(values<T>(200, rng));
      const ScalarType out = is_comparison(kind) ? kBool : dtype;
      const Tensor cpu = cpu_result(op, inputs, out);
      const Tensor mine = expected_result<T>(op, inputs, out);
      EXPECT_TRUE(all_close(mine, cpu, rtol, 0))
          << elementwise_kind_name(kind) << " on " << dtype << ", form " << form;
    }
  }
  // Pow with the exponents the CPU kernel special-cases.
  if constexpr (std::is_floating_point_v<ew::compute_t<T>>) {
    for (double e : {2.0, 0.5, -1.0, 3.0}) {
      const ElementwiseOp op{K::Pow, 1, e, false, false};
      const std::vector<Tensor> inputs{values<T>(100, rng)};
      EXPECT_TRUE(
          all_close(expected_result<T>(op, inputs, dtype), cpu_result(op, inputs, dtype), rtol, 0))
          << "pow " << e << " on " << dtype;
    }
  }
}

TEST(CudaElementwiseMath, ComputesWhatTheCpuKernelComputes) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  check_dtype<float>(rng);
  check_dtype<double>(rng);
  check_dtype<Half>(rng);
  check_dtype<BFloat16>(rng);
  check_dtype<int64_t>(rng);
  check_dtype<int32_t>(rng);
  check_dtype<int16_t>(rng);
  check_dtype<int8_t>(rng);
  check_dtype<uint8_t>(rng);
  check_dtype<bool>(rng);
}

TEST(CudaElementwiseMath, ComparisonsIsCompare) {
  for (int k = 0; k < kKinds; ++k) {
    EXPECT_EQ(ew::is_compare(static_cast<K>(k)), is_comparison(static_cast<K>(k)));
  }
}

}  // namespace
}  // namespace ferry::testing
