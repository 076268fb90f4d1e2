// ferry's operators in Python with torch's names and signatures: the elementwise math (as
// functions, Tensor methods and the arithmetic and comparison operators, each taking a tensor or
// a Python number on either side), reductions, softmax, linear algebra, cat/stack/split/chunk and
// where. Type promotion and broadcasting are the C++ operators' (PyTorch's rules). Arguments are
// converted with the GIL held; the operator itself runs with it released.
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "ferry/ops/linalg.h"
#include "ferry/ops/math.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::python {
namespace {

// The second operand of a binary operator: a tensor, or a number as a Scalar.
struct Operand {
  std::optional<Tensor> tensor;
  std::optional<Scalar> scalar;
};

// nullopt when `value` is neither (the operator then returns NotImplemented, as torch's do).
std::optional<Operand> operand_from_python(py::handle value) {
  if (py::isinstance<Tensor>(value)) return Operand{value.cast<Tensor>(), std::nullopt};
  PyObject* p = value.ptr();
  if (PyBool_Check(p) || PyLong_Check(p) || PyFloat_Check(p) || PyComplex_Check(p) ||
      PyIndex_Check(p) || py::hasattr(value, "__float__")) {
    return Operand{std::nullopt, scalar_from_python(value)};
  }
  return std::nullopt;
}

std::string python_type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

Operand require_operand(py::handle value, const char* op) {
  auto o = operand_from_python(value);
  if (!o) {
    throw py::type_error(std::string(op) + "(): expected a Tensor or a number, but got " +
                         python_type_name(value));
  }
  return *o;
}

template <typename TensorFn, typename ScalarFn>
Tensor apply_binary(const Tensor& self, const Operand& other, TensorFn on_tensor,
                    ScalarFn on_scalar) {
  py::gil_scoped_release release;
  return other.tensor ? on_tensor(self, *other.tensor) : on_scalar(self, *other.scalar);
}

// dim=None (all dims), an int, or a sequence of ints.
std::vector<int64_t> dims_from_python(py::handle dim) {
  if (dim.is_none()) return {};
  if (PyIndex_Check(dim.ptr())) return {dim.cast<int64_t>()};
  return dim.cast<std::vector<int64_t>>();
}

// torch's `int or tuple` arguments (kernel_size=3 or (3, 3)).
std::vector<int64_t> ints_from_python(py::handle value) {
  if (PyIndex_Check(value.ptr())) return {value.cast<int64_t>()};
  return value.cast<std::vector<int64_t>>();
}

// Binds a binary elementwise operator as ferry.<name>(input, other), Tensor.<name>(other) and,
// when given, the Python operator `dunder` and its reflected form.
template <typename TensorFn, typename ScalarFn>
void bind_binary(py::module_& m, py::class_<Tensor>& t, const char* name, TensorFn on_tensor,
                 ScalarFn on_scalar) {
  auto fn = [=](const Tensor& self, py::handle other) {
    return apply_binary(self, require_operand(other, name), on_tensor, on_scalar);
  };
  m.def(name, fn, py::arg("input"), py::arg("other"));
  t.def(name, fn, py::arg("other"));
}

template <typename Fn>
void bind_dunder(py::class_<Tensor>& t, const char* dunder, Fn fn) {
  t.def(dunder, [fn](const Tensor& self, py::handle other) -> py::object {
    auto o = operand_from_python(other);
    if (!o) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    return py::cast(fn(self, *o));
  });
}

template <typename Fn>
void bind_unary(py::module_& m, py::class_<Tensor>& t, const char* name, Fn fn) {
  auto call = [fn](const Tensor& self) {
    py::gil_scoped_release release;
    return fn(self);
  };
  m.def(name, call, py::arg("input"));
  t.def(name, call);
}

void bind_arithmetic(py::module_& m, py::class_<Tensor>& t) {
  // add and sub take alpha: other * alpha is added or subtracted.
  struct WithAlpha {
    const char* name;
    Tensor (*on_tensor)(const Tensor&, const Tensor&, const Scalar&);
    Tensor (*on_scalar)(const Tensor&, const Scalar&, const Scalar&);
  };
  const WithAlpha with_alpha[] = {
      {"add", [](const Tensor& x, const Tensor& y, const Scalar& a) { return add(x, y, a); },
       [](const Tensor& x, const Scalar& y, const Scalar& a) { return add(x, y, a); }},
      {"sub", [](const Tensor& x, const Tensor& y, const Scalar& a) { return sub(x, y, a); },
       [](const Tensor& x, const Scalar& y, const Scalar& a) { return sub(x, y, a); }},
  };
  for (const WithAlpha& op : with_alpha) {
    auto fn = [op](const Tensor& self, py::handle other, py::handle alpha) {
      const Operand o = require_operand(other, op.name);
      const Scalar a = scalar_from_python(alpha);
      py::gil_scoped_release release;
      return o.tensor ? op.on_tensor(self, *o.tensor, a) : op.on_scalar(self, *o.scalar, a);
    };
    m.def(op.name, fn, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = 1);
    t.def(op.name, fn, py::arg("other"), py::kw_only(), py::arg("alpha") = 1);
  }
  bind_binary(
      m, t, "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      [](const Tensor& a, const Scalar& b) { return mul(a, b); });
  bind_binary(
      m, t, "div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
      [](const Tensor& a, const Scalar& b) { return div(a, b); });

  auto tensor_or = [](auto on_tensor, auto on_scalar) {
    return [=](const Tensor& self, const Operand& o) {
      return apply_binary(self, o, on_tensor, on_scalar);
    };
  };
  bind_dunder(t, "__add__",
              tensor_or([](const Tensor& a, const Tensor& b) { return add(a, b); },
                        [](const Tensor& a, const Scalar& b) { return add(a, b); }));
  bind_dunder(t, "__radd__",
              tensor_or([](const Tensor& a, const Tensor& b) { return add(b, a); },
                        [](const Tensor& a, const Scalar& b) { return add(a, b); }));
  bind_dunder(t, "__sub__",
              tensor_or([](const Tensor& a, const Tensor& b) { return sub(a, b); },
                        [](const Tensor& a, const Scalar& b) { return sub(a, b); }));
  bind_dunder(t, "__rsub__",
              tensor_or([](const Tensor& a, const Tensor& b) { return sub(b, a); },
                        [](const Tensor& a, const Scalar& b) { return rsub(a, b); }));
  bind_dunder(t, "__mul__",
              tensor_or([](const Tensor& a, const Tensor& b) { return mul(a, b); },
                        [](const Tensor& a, const Scalar& b) { return mul(a, b); }));
  bind_dunder(t, "__rmul__",
              tensor_or([](const Tensor& a, const Tensor& b) { return mul(b, a); },
                        [](const Tensor& a, const Scalar& b) { return mul(a, b); }));
  bind_dunder(t, "__truediv__",
              tensor_or([](const Tensor& a, const Tensor& b) { return div(a, b); },
                        [](const Tensor& a, const Scalar& b) { return div(a, b); }));
  bind_dunder(t, "__rtruediv__",
              tensor_or([](const Tensor& a, const Tensor& b) { return div(b, a); },
                        [](const Tensor& a, const Scalar& b) { return rdiv(a, b); }));
  t.def("__neg__", [](const Tensor& self) {
    py::gil_scoped_release release;
    return neg(self);
  });
  t.def("__matmul__", [](const Tensor& a, const Tensor& b) {
    py::gil_scoped_release release;
    return matmul(a, b);
  });

  // In place: the tensor object itself comes back (x += 1 keeps x's identity, as torch).
  auto in_place = [](auto on_tensor, auto on_scalar, const char* op) {
    return [=](py::object self_obj, py::handle other) {
      Tensor self = self_obj.cast<Tensor>();
      const Operand o = require_operand(other, op);
      {
        py::gil_scoped_release release;
        if (o.tensor) {
          on_tensor(self, *o.tensor);
        } else {
          on_scalar(self, *o.scalar);
        }
      }
      return self_obj;
    };
  };
  const auto add_in_place = in_place([](Tensor& a, const Tensor& b) { add_(a, b); },
                                     [](Tensor& a, const Scalar& b) { add_(a, b); }, "add_");
  const auto sub_in_place = in_place([](Tensor& a, const Tensor& b) { sub_(a, b); },
                                     [](Tensor& a, const Scalar& b) { sub_(a, b); }, "sub_");
  const auto mul_in_place = in_place([](Tensor& a, const Tensor& b) { mul_(a, b); },
                                     [](Tensor& a, const Scalar& b) { mul_(a, b); }, "mul_");
  const auto div_in_place = in_place([](Tensor& a, const Tensor& b) { div_(a, b); },
                                     [](Tensor& a, const Scalar& b) { div_(a, b); }, "div_");
  t.def("add_", add_in_place).def("__iadd__", add_in_place);
  t.def("sub_", sub_in_place).def("__isub__", sub_in_place);
  t.def("mul_", mul_in_place).def("__imul__", mul_in_place);
  t.def("div_", div_in_place).def("__itruediv__", div_in_place);
  // The unary in-place forms: the same object back, as in PyTorch.
  const auto unary_in_place = [](Tensor& (*fn)(Tensor&)) {
    return [fn](py::object self) {
      Tensor s = self.cast<Tensor>();
      py::gil_scoped_release release;
      fn(s);
      return self;
    };
  };
  t.def("neg_", unary_in_place(&neg_));
  t.def("relu_", unary_in_place(&relu_));
  t.def("exp_", unary_in_place(&exp_));
  t.def("log_", unary_in_place(&log_));
  t.def("sqrt_", unary_in_place(&sqrt_));
  t.def("rsqrt_", unary_in_place(&rsqrt_));
  t.def("tanh_", unary_in_place(&tanh_));
  t.def("sigmoid_", unary_in_place(&sigmoid_));
  t.def("pow_", [](py::object self, py::handle exponent) {
    Tensor s = self.cast<Tensor>();
    const Scalar e = scalar_from_python(exponent);
    py::gil_scoped_release release;
    pow_(s, e);
    return self;
  });
}

void bind_comparisons(py::module_& m, py::class_<Tensor>& t) {
  struct Comparison {
    const char* name;
    const char* dunder;
    Tensor (*on_tensor)(const Tensor&, const Tensor&);
    Tensor (*on_scalar)(const Tensor&, const Scalar&);
  };
  const Comparison comparisons[] = {
      {"eq", "__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
       [](const Tensor& a, const Scalar& b) { return eq(a, b); }},
      {"ne", "__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
       [](const Tensor& a, const Scalar& b) { return ne(a, b); }},
      {"lt", "__lt__", [](const Tensor& a, const Tensor& b) { return lt(a, b); },
       [](const Tensor& a, const Scalar& b) { return lt(a, b); }},
      {"le", "__le__", [](const Tensor& a, const Tensor& b) { return le(a, b); },
       [](const Tensor& a, const Scalar& b) { return le(a, b); }},
      {"gt", "__gt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
       [](const Tensor& a, const Scalar& b) { return gt(a, b); }},
      {"ge", "__ge__", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
       [](const Tensor& a, const Scalar& b) { return ge(a, b); }},
  };
  for (const Comparison& c : comparisons) {
    bind_binary(m, t, c.name, c.on_tensor, c.on_scalar);
    bind_dunder(t, c.dunder, [c](const Tensor& self, const Operand& o) {
      return apply_binary(self, o, c.on_tensor, c.on_scalar);
    });
  }
  // Defining __eq__ removes the default hash; torch hashes tensors by identity, and so does this.
  t.def("__hash__", [](py::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); });
}

void bind_unary_math(py::module_& m, py::class_<Tensor>& t) {
  bind_unary(m, t, "neg", [](const Tensor& x) { return neg(x); });
  bind_unary(m, t, "exp", [](const Tensor& x) { return exp(x); });
  bind_unary(m, t, "log", [](const Tensor& x) { return log(x); });
  bind_unary(m, t, "sqrt", [](const Tensor& x) { return sqrt(x); });
  bind_unary(m, t, "rsqrt", [](const Tensor& x) { return rsqrt(x); });
  bind_unary(m, t, "tanh", [](const Tensor& x) { return tanh(x); });
  bind_unary(m, t, "sigmoid", [](const Tensor& x) { return sigmoid(x); });
  bind_unary(m, t, "relu", [](const Tensor& x) { return relu(x); });
  bind_unary(m, t, "abs", [](const Tensor& x) { return abs(x); });
  bind_unary(m, t, "sign", [](const Tensor& x) { return sign(x); });
  t.def("__abs__", [](const Tensor& x) {
    py::gil_scoped_release release;
    return abs(x);
  });
  auto gelu_fn = [](const Tensor& x, const std::string& approximate) {
    py::gil_scoped_release release;
    return gelu(x, approximate);
  };
  m.def("gelu", gelu_fn, py::arg("input"), py::kw_only(), py::arg("approximate") = "none");
  auto pow_fn = [](const Tensor& x, py::handle exponent) {
    const Scalar e = scalar_from_python(exponent);
    py::gil_scoped_release release;
    return pow(x, e);
  };
  m.def("pow", pow_fn, py::arg("input"), py::arg("exponent"));
  t.def("pow", pow_fn, py::arg("exponent")).def("__pow__", pow_fn);
  m.def(
      "where",
      [](const Tensor& condition, const Tensor& input, const Tensor& other) {
        py::gil_scoped_release release;
        return where(condition, input, other);
      },
      py::arg("condition"), py::arg("input"), py::arg("other"));
}

void bind_reductions(py::module_& m, py::class_<Tensor>& t) {
  // sum and mean: over every element (dim=None) or over the given dims.
  struct Reduction {
    const char* name;
    Tensor (*all)(const Tensor&, std::optional<ScalarType>);
    Tensor (*over)(const Tensor&, IntArrayRef, bool, std::optional<ScalarType>);
  };
  const Reduction reductions[] = {
      {"sum", [](const Tensor& x, std::optional<ScalarType> d) { return sum(x, d); },
       [](const Tensor& x, IntArrayRef dims, bool keep, std::optional<ScalarType> d) {
         return sum(x, dims, keep, d);
       }},
      {"mean", [](const Tensor& x, std::optional<ScalarType> d) { return mean(x, d); },
       [](const Tensor& x, IntArrayRef dims, bool keep, std::optional<ScalarType> d) {
         return mean(x, dims, keep, d);
       }},
  };
  for (const Reduction& r : reductions) {
    auto fn = [r](const Tensor& self, py::handle dim, bool keepdim,
                  std::optional<ScalarType> dtype) {
      const std::vector<int64_t> dims = dims_from_python(dim);
      const bool all = dim.is_none();
      py::gil_scoped_release release;
      return all ? r.all(self, dtype) : r.over(self, dims, keepdim, dtype);
    };
    m.def(r.name, fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false,
          py::kw_only(), py::arg("dtype") = py::none());
    t.def(r.name, fn, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
          py::arg("dtype") = py::none());
  }
  auto amax_fn = [](const Tensor& self, py::handle dim, bool keepdim) {
    const std::vector<int64_t> dims = dims_from_python(dim);
    py::gil_scoped_release release;
    return amax(self, dims, keepdim);
  };
  m.def("amax", amax_fn, py::arg("input"), py::arg("dim") = py::tuple(),
        py::arg("keepdim") = false);
  t.def("amax", amax_fn, py::arg("dim") = py::tuple(), py::arg("keepdim") = false);
  auto argmax_fn = [](const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    py::gil_scoped_release release;
    return argmax(self, dim, keepdim);
  };
  m.def("argmax", argmax_fn, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false);
  t.def("argmax", argmax_fn, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  using Softmax = Tensor (*)(const Tensor&, int64_t, std::optional<ScalarType>);
  const std::pair<const char*, Softmax> softmaxes[] = {
      {"softmax", [](const Tensor& x, int64_t dim,
                     std::optional<ScalarType> d) { return softmax(x, dim, d); }},
      {"log_softmax", [](const Tensor& x, int64_t dim,
                         std::optional<ScalarType> d) { return log_softmax(x, dim, d); }},
  };
  for (const auto& [name, op] : softmaxes) {
    auto fn = [op](const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
      py::gil_scoped_release release;
      return op(self, dim, dtype);
    };
    m.def(name, fn, py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
    t.def(name, fn, py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  }
}

void bind_linalg(py::module_& m, py::class_<Tensor>& t) {
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Binary> products[] = {
      {"matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }},
      {"mm", [](const Tensor& a, const Tensor& b) { return mm(a, b); }},
      {"bmm", [](const Tensor& a, const Tensor& b) { return bmm(a, b); }},
  };
  for (const auto& [name, product] : products) {
    auto fn = [product](const Tensor& a, const Tensor& b) {
      py::gil_scoped_release release;
      return product(a, b);
    };
    m.def(name, fn, py::arg("input"), py::arg("other"));
    t.def(name, fn, py::arg("other"));
  }
  m.def(
      "addmm",
      [](const Tensor& self, const Tensor& mat1, const Tensor& mat2, py::handle beta,
         py::handle alpha) {
        const Scalar b = scalar_from_python(beta);
        const Scalar a = scalar_from_python(alpha);
        py::gil_scoped_release release;
        return addmm(self, mat1, mat2, b, a);
      },
      py::arg("input"), py::arg("mat1"), py::arg("mat2"), py::kw_only(), py::arg("beta") = 1,
      py::arg("alpha") = 1);
}

void bind_join_split(py::module_& m, py::class_<Tensor>& t) {
  m.def(
      "cat",
      [](const std::vector<Tensor>& tensors, int64_t dim) {
        py::gil_scoped_release release;
        return cat(tensors, dim);
      },
      py::arg("tensors"), py::arg("dim") = 0);
  m.def(
      "stack",
      [](const std::vector<Tensor>& tensors, int64_t dim) {
        py::gil_scoped_release release;
        return stack(tensors, dim);
      },
      py::arg("tensors"), py::arg("dim") = 0);
  auto split_fn = [](const Tensor& self, py::handle split_size_or_sections, int64_t dim) {
    if (PyIndex_Check(split_size_or_sections.ptr())) {
      const auto size = split_size_or_sections.cast<int64_t>();
      py::gil_scoped_release release;
      return split(self, size, dim);
    }
    const auto sizes = split_size_or_sections.cast<std::vector<int64_t>>();
    py::gil_scoped_release release;
    return split_with_sizes(self, sizes, dim);
  };
  m.def("split", split_fn, py::arg("tensor"), py::arg("split_size_or_sections"),
        py::arg("dim") = 0);
  t.def("split", split_fn, py::arg("split_size"), py::arg("dim") = 0);
  auto chunk_fn = [](const Tensor& self, int64_t chunks, int64_t dim) {
    py::gil_scoped_release release;
    return chunk(self, chunks, dim);
  };
  m.def("chunk", chunk_fn, py::arg("input"), py::arg("chunks"), py::arg("dim") = 0);
  t.def("chunk", chunk_fn, py::arg("chunks"), py::arg("dim") = 0);
}

}  // namespace

std::vector<int64_t> int_or_ints(py::handle value) { return ints_from_python(value); }

void bind_ops(py::module_& m, py::class_<Tensor>& tensor) {
  bind_arithmetic(m, tensor);
  bind_comparisons(m, tensor);
  bind_unary_math(m, tensor);
  bind_reductions(m, tensor);
  bind_linalg(m, tensor);
  bind_join_split(m, tensor);
}

}  // namespace ferry::python
