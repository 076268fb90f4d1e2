// Tensor factories. Storage comes from the allocator registered for the device type (or the
// pinned host allocator); values are generated on the host, then moved to the device.
#include "ferry/ops/factories.h"

#include <cmath>
#include <numbers>

#include "ferry/core/size_math.h"
#include "ferry/core/storage.h"
#include "ferry/device/runtime.h"
#include "ferry/iter/parallel.h"
#include "ferry/iter/stride_order.h"

namespace ferry {
namespace {

void check_sizes(IntArrayRef sizes, const char* op) {
  for (int64_t s : sizes) {
    FERRY_CHECK_AS(ShapeError, s >= 0, op, ": expected non-negative sizes, but got ", sizes);
  }
}

// Before the storage extent is computed from them (make_tensor checks again, later).
void check_strides(IntArrayRef strides, const char* op) {
  for (int64_t s : strides) {
    FERRY_CHECK_AS(ShapeError, s >= 0, op, ": expected non-negative strides, but got ", strides);
  }
}

Allocator* allocator_for(const TensorOptions& options) {
  if (options.pinned_memory()) {
    FERRY_CHECK_AS(DeviceError, options.device().is_cpu(),
                   "pinned_memory: expected a cpu tensor, but the options ask for device ",
                   options.device());
    return get_pinned_host_allocator();
  }
  return get_allocator(options.device().type());
}

// Elements per chunk of a generated tensor: a normal draw costs about 20 ns, so a chunk is
// about 0.3 ms of work, well above the pool's hand-off.
constexpr int64_t kGenerateGrain = 16384;

// A contiguous CPU tensor with `options`' dtype and memory format, filled by
// write(element_pointer, linear_index) in memory order; moved to the requested device last.
template <typename Write>
Tensor generate(IntArrayRef sizes, const TensorOptions& options, Write&& write) {
  const TensorOptions host = options.device(Device(DeviceType::CPU));
  Tensor out = empty(sizes, host);
  // Each element's value depends on its index only (the generators are counter-based), so the
  // range splits over the pool and gives the same values at any thread count.
  visit_dtype(out.dtype(), [&]<typename T>() {
    T* data = out.data_ptr<T>();
    parallel_for(0, out.numel(), kGenerateGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[i] = write.template operator()<T>(i);
    });
  });
  if (options.device().is_cpu()) return out;
  return out.to(options.device());
}

// The counters one random draw uses: `per_element` consecutive values for each element,
// reserved from the generator so that the next draw continues the stream.
struct Draw {
  uint64_t seed;
  uint64_t base;
  uint64_t per_element;
  uint64_t counter(int64_t element, uint64_t k = 0) const {
    return base + per_element * static_cast<uint64_t>(element) + k;
  }
};

Draw reserve_draw(IntArrayRef sizes, Generator* generator, uint64_t per_element) {
  Generator& gen = generator ? *generator : default_generator();
  const int64_t n = checked_numel(sizes, "random draw");
  const uint64_t seed = gen.seed();
  return Draw{seed, gen.reserve(per_element * static_cast<uint64_t>(n)), per_element};
}

void check_real_or_complex_float(const TensorOptions& options, const char* op) {
  const ScalarType t = options.dtype();
  FERRY_CHECK_AS(DTypeError, is_floating_point(t) || is_complex(t), op,
                 ": expected a floating-point or complex dtype, but got ", t);
}

// Note [Factories and requires_grad]: a factory asked for requires_grad builds its result
// without it (filling a leaf that requires grad would be an in-place write that autograd
// refuses) and turns it on last, so each public factory starts with
//   if (options.requires_grad()) return as_leaf(<itself>(..., options.requires_grad(false)));
Tensor as_leaf(Tensor out) {
  out.requires_grad_(true);
  return out;
}

}  // namespace

Tensor empty(IntArrayRef sizes, TensorOptions options) {
  if (options.requires_grad()) return as_leaf(empty(sizes, options.requires_grad(false)));
  check_sizes(sizes, "empty");
  MemoryFormat format = options.memory_format();
  FERRY_CHECK(format != MemoryFormat::Preserve,
              "empty: expected a concrete memory format, but got preserve_format");
  return empty_strided(sizes, strides_for_memory_format(sizes, format), options);
}

Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options) {
  if (options.requires_grad())
    return as_leaf(empty_strided(sizes, strides, options.requires_grad(false)));
  check_sizes(sizes, "empty_strided");
  FERRY_CHECK_AS(ShapeError, sizes.size() == strides.size(),
                 "empty_strided: expected as many strides as sizes, but got sizes ", sizes,
                 " and strides ", strides);
  const Device device = checked_device(options.device());
  const ScalarType dtype = options.dtype();
  check_strides(strides, "empty_strided");
  const auto nbytes = static_cast<size_t>(
      checked_storage_nbytes(sizes, strides, 0, element_size(dtype), "empty_strided"));
  Allocator* allocator = allocator_for(options);
  return make_tensor(Storage(nbytes, allocator, device), dtype, sizes, strides);
}

Tensor empty_like(const Tensor& like, TensorOptions options, std::optional<MemoryFormat> format) {
  if (options.requires_grad())
    return as_leaf(empty_like(like, options.requires_grad(false), format));
  const TensorOptions merged = options.merged_over(like.options());
  const MemoryFormat f =
      format.value_or(options.memory_format_opt().value_or(MemoryFormat::Preserve));
  if (f != MemoryFormat::Preserve) return empty(like.sizes(), merged.memory_format(f));
  if (like.is_non_overlapping_and_dense()) {
    return empty_strided(like.sizes(), like.strides(), merged);
  }
  // Not dense: a dense layout with `like`'s dimension order (a sliced transpose stays transposed).
  return empty_strided(like.sizes(), infer_dense_strides(like.sizes(), like.strides()), merged);
}

// zeros and ones default to float32 (the options' default), not to the value's kind.
Tensor zeros(IntArrayRef sizes, TensorOptions options) {
  if (options.requires_grad()) return as_leaf(zeros(sizes, options.requires_grad(false)));
  return empty(sizes, options).zero_();
}
Tensor ones(IntArrayRef sizes, TensorOptions options) {
  if (options.requires_grad()) return as_leaf(ones(sizes, options.requires_grad(false)));
  return empty(sizes, options).fill_(1);
}

Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options) {
  if (options.requires_grad()) return as_leaf(full(sizes, value, options.requires_grad(false)));
  if (!options.dtype_opt()) {
    const ScalarType t = value.is_bool()       ? kBool
                         : value.is_integral() ? kInt64
                         : value.is_complex()  ? kComplex64
                                               : kFloat32;
    options = options.dtype(t);
  }
  Tensor out = empty(sizes, options);
  out.fill_(value);
  return out;
}

Tensor zeros_like(const Tensor& like, TensorOptions options) { return full_like(like, 0, options); }
Tensor ones_like(const Tensor& like, TensorOptions options) { return full_like(like, 1, options); }
Tensor full_like(const Tensor& like, const Scalar& value, TensorOptions options) {
  if (options.requires_grad()) return as_leaf(full_like(like, value, options.requires_grad(false)));
  Tensor out = empty_like(like, options);
  out.fill_(value);
  return out;
}

Tensor arange(const Scalar& end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  if (options.requires_grad())
    return as_leaf(arange(start, end, step, options.requires_grad(false)));
  for (const Scalar* s : {&start, &end, &step}) {
    FERRY_CHECK_AS(DTypeError, !s->is_complex(), "arange: expected real bounds, but got ", *s);
  }
  const bool integral =
      !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  if (!options.dtype_opt()) options = options.dtype(integral ? kInt64 : kFloat32);
  const double lo = start.to<double>(), hi = end.to<double>(), by = step.to<double>();
  FERRY_CHECK(by != 0, "arange: step: expected a non-zero value, but got ", step);
  FERRY_CHECK(std::isfinite(lo) && std::isfinite(hi), "arange: expected finite bounds, but got ",
              start, " and ", end);
  FERRY_CHECK((by > 0 && hi >= lo) || (by < 0 && hi <= lo),
              "arange: expected the bounds to agree with the step's sign, but got start ", start,
              ", end ", end, " and step ", step);
  const double count = std::ceil((hi - lo) / by);
  FERRY_CHECK_AS(ShapeError, count < 9.0e15, "arange: expected a representable length, but the ",
                 "range ", start, " to ", end, " by ", step, " has ", count, " elements");
  const auto n = static_cast<int64_t>(count);
  const int64_t ilo = start.to<int64_t>(), iby = step.to<int64_t>();
  return generate({n}, options, [&]<typename T>(int64_t i) -> T {
    if (integral) return convert_value<T>(ilo + i * iby);
    return convert_value<T>(lo + static_cast<double>(i) * by);
  });
}

Tensor rand(IntArrayRef sizes, TensorOptions options, Generator* generator) {
  if (options.requires_grad()) return as_leaf(rand(sizes, options.requires_grad(false), generator));
  check_sizes(sizes, "rand");
  check_real_or_complex_float(options, "rand");
  const Draw draw = reserve_draw(sizes, generator, 2);
  return generate(sizes, options, [&]<typename T>(int64_t i) -> T {
    const double re = Generator::uniform(draw.seed, draw.counter(i));
    const double im = Generator::uniform(draw.seed, draw.counter(i, 1));
    // Rounding to a narrow float could reach 1.0; keep the interval half-open.
    T v = convert_value<T>(std::complex<double>(re, im));
    if constexpr (!detail::is_complex_type<T>::value) {
      if (convert_value<double>(v) >= 1.0) v = convert_value<T>(0.0);
    }
    return v;
  });
}

Tensor randn(IntArrayRef sizes, TensorOptions options, Generator* generator) {
  if (options.requires_grad())
    return as_leaf(randn(sizes, options.requires_grad(false), generator));
  check_sizes(sizes, "randn");
  check_real_or_complex_float(options, "randn");
  const Draw draw = reserve_draw(sizes, generator, 2);
  return generate(sizes, options, [&]<typename T>(int64_t i) -> T {
    // Box-Muller on the element's two counters; complex gets both outputs, scaled so that
    // E|z|^2 = 1 as PyTorch's complex randn.
    const double u1 = Generator::uniform(draw.seed, draw.counter(i));
    const double u2 = Generator::uniform(draw.seed, draw.counter(i, 1));
    const double r = std::sqrt(-2.0 * std::log1p(-u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    if constexpr (detail::is_complex_type<T>::value) {
      return convert_value<T>(std::complex<double>(r * std::cos(angle), r * std::sin(angle)) *
                              std::numbers::sqrt2 / 2.0);
    } else {
      return convert_value<T>(r * std::cos(angle));
    }
  });
}

Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options,
               Generator* generator) {
  if (options.requires_grad())
    return as_leaf(randint(low, high, sizes, options.requires_grad(false), generator));
  check_sizes(sizes, "randint");
  FERRY_CHECK(low < high, "randint: expected low < high, but got low ", low, " and high ", high);
  if (!options.dtype_opt()) options = options.dtype(kInt64);
  const Draw draw = reserve_draw(sizes, generator, 1);
  __extension__ using uint128 = unsigned __int128;
  const auto range = static_cast<uint128>(static_cast<uint64_t>(high) - static_cast<uint64_t>(low));
  return generate(sizes, options, [&]<typename T>(int64_t i) -> T {
    // Multiply-shift maps 64 random bits onto [0, range) with negligible bias.
    const auto bits = Generator::bits(draw.seed, draw.counter(i));
    const auto pick = static_cast<uint64_t>((bits * range) >> 64);
    return convert_value<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + pick));
  });
}

Tensor randint(int64_t high, IntArrayRef sizes, TensorOptions options, Generator* generator) {
  return randint(0, high, sizes, options, generator);
}

Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options) {
  return from_blob(data, sizes, contiguous_strides(sizes), options);
}

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options) {
  return from_blob(data, sizes, strides, nullptr, options);
}

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides,
                 std::function<void(void*)> deleter, TensorOptions options) {
  if (options.requires_grad())
    return as_leaf(
        from_blob(data, sizes, strides, std::move(deleter), options.requires_grad(false)));
  check_sizes(sizes, "from_blob");
  FERRY_CHECK_AS(ShapeError, sizes.size() == strides.size(),
                 "from_blob: expected as many strides as sizes, but got sizes ", sizes,
                 " and strides ", strides);
  check_strides(strides, "from_blob");
  const Device device = checked_device(options.device());
  const auto nbytes = static_cast<size_t>(
      checked_storage_nbytes(sizes, strides, 0, element_size(options.dtype()), "from_blob"));
  DataPtr ptr(data, device);
  if (deleter) {
    struct Context {
      void* data;
      std::function<void(void*)> deleter;
    };
    auto* context = new Context{data, std::move(deleter)};
    ptr = DataPtr(
        data, context,
        [](void* c) {
          auto* ctx = static_cast<Context*>(c);
          ctx->deleter(ctx->data);
          delete ctx;
        },
        device);
  }
  return make_tensor(Storage(std::move(ptr), nbytes), options.dtype(), sizes, strides);
}

}  // namespace ferry
