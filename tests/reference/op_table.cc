// The C++ entries of the PyTorch comparison, one per operator of the Python side's table, each
// calling ferry's public API as a user would (free functions, Tensor methods). The linear
// algebra and NN front-ends are used when their headers are in the tree; before that, those
// entries call operators of PyTorch's names through boxed() (skipped while none is registered).
// In-place entries clone first, as the Python ones do.
#include "tests/reference/op_table.h"

#include "ferry/ops/math.h"
#include "ferry/ops/view_ops.h"
#if __has_include("ferry/ops/linalg.h")
#include "ferry/ops/linalg.h"
#define FERRY_REFERENCE_LINALG 1
#endif
#if __has_include("ferry/ops/nn_ops.h")
#include "ferry/ops/nn_ops.h"
#define FERRY_REFERENCE_NN 1
#endif

namespace ferry::reference {
namespace {

std::vector<Tensor> out(Tensor t) { return {std::move(t)}; }

OpEntry fn(std::string ferry_op, OpFn f) { return OpEntry{std::move(ferry_op), std::move(f)}; }

using UnaryFn = Tensor (*)(const Tensor&);
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using ScalarFn = Tensor (*)(const Tensor&, const Scalar&);

OpEntry unary(const std::string& name, UnaryFn f) {
  return fn("ferry::" + name, [f](const Call& c) { return out(f(c.t(0))); });
}
OpEntry binary(const std::string& op, BinaryFn f) {
  return fn(op, [f](const Call& c) { return out(f(c.t(0), c.t(1))); });
}
OpEntry with_scalar(const std::string& op, ScalarFn f) {
  return fn(op, [f](const Call& c) { return out(f(c.t(0), c.scalar("other"))); });
}

[[maybe_unused]] std::optional<Tensor> opt(const Call& c, size_t i) {
  return i < c.size() && c.t(i).defined() ? std::optional<Tensor>(c.t(i)) : std::nullopt;
}

void add_linalg(std::map<std::string, OpEntry>& t) {
#ifdef FERRY_REFERENCE_LINALG
  t["matmul"] = fn("ferry::matmul", [](const Call& c) { return out(c.t(0).matmul(c.t(1))); });
  t["mm"] = fn("ferry::mm", [](const Call& c) { return out(c.t(0).mm(c.t(1))); });
  t["bmm"] = fn("ferry::bmm", [](const Call& c) { return out(c.t(0).bmm(c.t(1))); });
  t["addmm"] = fn("ferry::addmm", [](const Call& c) {
    return out(ferry::addmm(c.t(0), c.t(1), c.t(2), c.scalar("beta", 1), c.scalar("alpha", 1)));
  });
  t["linear"] = fn("ferry::linear",
                   [](const Call& c) { return out(ferry::linear(c.t(0), c.t(1), opt(c, 2))); });
#else
  for (const char* name : {"matmul", "mm", "bmm", "addmm", "linear"}) {
    t[name] = boxed(std::string("ferry::") + name);
  }
#endif
}

// Composites (batch_norm, the losses, dropout, split) name the operator they run on.
void add_nn(std::map<std::string, OpEntry>& t) {
#ifdef FERRY_REFERENCE_NN
  using V = std::vector<int64_t>;
  t["conv2d"] = fn("ferry::conv2d", [](const Call& c) {
    return out(ferry::conv2d(c.t(0), c.t(1), opt(c, 2), c.ints("stride", V{1, 1}),
                             c.ints("padding", V{0, 0}), c.ints("dilation", V{1, 1}),
                             c.i64("groups", 1)));
  });
  t["max_pool2d"] = fn("ferry::max_pool2d", [](const Call& c) {
    return out(ferry::max_pool2d(c.t(0), c.ints("kernel_size"), c.ints("stride", V{}),
                                 c.ints("padding", V{0, 0}), c.ints("dilation", V{1, 1}),
                                 c.flag("ceil_mode", false)));
  });
  t["avg_pool2d"] = fn("ferry::avg_pool2d", [](const Call& c) {
    return out(ferry::avg_pool2d(c.t(0), c.ints("kernel_size"), c.ints("stride", V{}),
                                 c.ints("padding", V{0, 0}), c.flag("ceil_mode", false),
                                 c.flag("count_include_pad", true), c.opt_i64("divisor_override")));
  });
  t["adaptive_avg_pool2d"] = fn("ferry::adaptive_avg_pool2d", [](const Call& c) {
    return out(ferry::adaptive_avg_pool2d(c.t(0), c.ints("output_size")));
  });
  t["batch_norm"] = fn("ferry::native_batch_norm", [](const Call& c) {
    return out(ferry::batch_norm(c.t(0), opt(c, 1), opt(c, 2), opt(c, 3), opt(c, 4),
                                 c.flag("training"), c.f64("momentum"), c.f64("eps")));
  });
  t["layer_norm"] = fn("ferry::native_layer_norm", [](const Call& c) {
    return out(ferry::layer_norm(c.t(0), c.ints("normalized_shape"), opt(c, 1), opt(c, 2),
                                 c.f64("eps", 1e-5)));
  });
  t["embedding"] = fn("ferry::embedding", [](const Call& c) {
    return out(ferry::embedding(c.t(0), c.t(1), c.i64("padding_idx", -1)));
  });
  t["dropout"] = fn("ferry::mul.Tensor", [](const Call& c) {
    return out(ferry::dropout(c.t(0), c.f64("p"), c.flag("train")));
  });
  t["cross_entropy"] = fn("ferry::nll_loss_forward", [](const Call& c) {
    return out(ferry::cross_entropy(c.t(0), c.t(1), opt(c, 2), c.str("reduction", "mean"),
                                    c.i64("ignore_index", -100), c.f64("label_smoothing", 0.0)));
  });
  t["nll_loss"] = fn("ferry::nll_loss_forward", [](const Call& c) {
    return out(ferry::nll_loss(c.t(0), c.t(1), opt(c, 2), c.str("reduction", "mean"),
                               c.i64("ignore_index", -100)));
  });
  t["mse_loss"] = fn("ferry::sub.Tensor", [](const Call& c) {
    return out(ferry::mse_loss(c.t(0), c.t(1), c.str("reduction", "mean")));
  });
  t["cat"] =
      fn("ferry::cat", [](const Call& c) { return out(ferry::cat(c.inputs(), c.i64("dim", 0))); });
  t["stack"] = fn("ferry::stack",
                  [](const Call& c) { return out(ferry::stack(c.inputs(), c.i64("dim", 0))); });
  t["split"] = fn("ferry::slice.Tensor",
                  [](const Call& c) { return c.t(0).split(c.i64("split_size"), c.i64("dim", 0)); });
  t["chunk"] = fn("ferry::slice.Tensor",
                  [](const Call& c) { return c.t(0).chunk(c.i64("chunks"), c.i64("dim", 0)); });
#else
  for (const char* name :
       {"conv2d", "layer_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "embedding",
        "dropout", "nll_loss", "mse_loss", "cat", "stack", "chunk"}) {
    t[name] = boxed(std::string("ferry::") + name);
  }
  t["batch_norm"] = boxed("ferry::batch_norm", {{"cudnn_enabled", false}});
  t["cross_entropy"] = boxed("ferry::cross_entropy_loss");
  t["split"] = boxed("ferry::split.Tensor");
#endif
}

std::map<std::string, OpEntry> make_table() {
  std::map<std::string, OpEntry> t;
  // ---- elementwise ----------------------------------------------------------------------------
  for (const auto& [name, f] :
       std::vector<std::pair<std::string, UnaryFn>>{{"neg", &ferry::neg},
                                                    {"exp", &ferry::exp},
                                                    {"log", &ferry::log},
                                                    {"sqrt", &ferry::sqrt},
                                                    {"rsqrt", &ferry::rsqrt},
                                                    {"tanh", &ferry::tanh},
                                                    {"sigmoid", &ferry::sigmoid},
                                                    {"relu", &ferry::relu},
                                                    {"abs", &ferry::abs},
                                                    {"sign", &ferry::sign}}) {
    t[name] = unary(name, f);
  }
  t["gelu"] = fn("ferry::gelu", [](const Call& c) {
    return out(ferry::gelu(c.t(0), c.str("approximate", "none")));
  });
  t["pow_scalar"] = fn("ferry::pow.Tensor_Scalar",
                       [](const Call& c) { return out(ferry::pow(c.t(0), c.scalar("exponent"))); });
  t["add"] = fn("ferry::add.Tensor", [](const Call& c) {
    return out(ferry::add(c.t(0), c.t(1), c.scalar("alpha", 1)));
  });
  t["sub"] = fn("ferry::sub.Tensor", [](const Call& c) {
    return out(ferry::sub(c.t(0), c.t(1), c.scalar("alpha", 1)));
  });
  t["mul"] = fn("ferry::mul.Tensor", [](const Call& c) { return out(c.t(0) * c.t(1)); });
  t["div"] = fn("ferry::div.Tensor", [](const Call& c) { return out(c.t(0) / c.t(1)); });
  BinaryFn eq = &ferry::eq, ne = &ferry::ne, lt = &ferry::lt, le = &ferry::le, gt = &ferry::gt,
           ge = &ferry::ge;
  ScalarFn eqs = &ferry::eq, nes = &ferry::ne, lts = &ferry::lt, les = &ferry::le, gts = &ferry::gt,
           ges = &ferry::ge;
  for (const auto& [name, f, fs] :
       std::vector<std::tuple<std::string, BinaryFn, ScalarFn>>{{"eq", eq, eqs},
                                                                {"ne", ne, nes},
                                                                {"lt", lt, lts},
                                                                {"le", le, les},
                                                                {"gt", gt, gts},
                                                                {"ge", ge, ges}}) {
    t[name] = binary("ferry::" + name + ".Tensor", f);
    t[name + "_scalar"] = with_scalar("ferry::" + name + ".Scalar", fs);
  }
  t["where"] = fn("ferry::where.self",
                  [](const Call& c) { return out(ferry::where(c.t(0), c.t(1), c.t(2))); });
  t["add_scalar"] = fn("ferry::add.Scalar", [](const Call& c) {
    return out(ferry::add(c.t(0), c.scalar("other"), c.scalar("alpha", 1)));
  });
  t["sub_scalar"] = fn("ferry::sub.Scalar", [](const Call& c) {
    return out(ferry::sub(c.t(0), c.scalar("other"), c.scalar("alpha", 1)));
  });
  t["rsub_scalar"] = fn("ferry::rsub.Scalar", [](const Call& c) {
    return out(ferry::rsub(c.t(0), c.scalar("other"), c.scalar("alpha", 1)));
  });
  t["mul_scalar"] =
      fn("ferry::mul.Scalar", [](const Call& c) { return out(c.t(0) * c.scalar("other")); });
  t["div_scalar"] =
      fn("ferry::div.Scalar", [](const Call& c) { return out(c.t(0) / c.scalar("other")); });
  t["rdiv_scalar"] =
      fn("ferry::rdiv.Scalar", [](const Call& c) { return out(c.scalar("other") / c.t(0)); });

  // ---- in place (on a clone, as the Python side) ----------------------------------------------
  t["add_"] = fn("ferry::add_.Tensor", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.add_(c.t(1), c.scalar("alpha", 1));
    return out(s);
  });
  t["sub_"] = fn("ferry::sub_.Tensor", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.sub_(c.t(1), c.scalar("alpha", 1));
    return out(s);
  });
  t["mul_"] = fn("ferry::mul_.Tensor", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s *= c.t(1);
    return out(s);
  });
  t["div_"] = fn("ferry::div_.Tensor", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s /= c.t(1);
    return out(s);
  });
  t["add_scalar_"] = fn("ferry::add_.Scalar", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.add_(c.scalar("other"), c.scalar("alpha", 1));
    return out(s);
  });
  t["sub_scalar_"] = fn("ferry::sub_.Scalar", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.sub_(c.scalar("other"), c.scalar("alpha", 1));
    return out(s);
  });
  t["mul_scalar_"] = fn("ferry::mul_.Scalar", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.mul_(c.scalar("other"));
    return out(s);
  });
  t["div_scalar_"] = fn("ferry::div_.Scalar", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.div_(c.scalar("other"));
    return out(s);
  });
  t["neg_"] = fn("ferry::neg_", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.neg_();
    return out(s);
  });
  t["relu_"] = fn("ferry::relu_", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.relu_();
    return out(s);
  });
  const auto unary_in_place = [&](const char* name, const char* op, Tensor& (Tensor::*method)()) {
    t[name] = fn(op, [method](const Call& c) {
      Tensor s = c.t(0).clone();
      (s.*method)();
      return out(s);
    });
  };
  unary_in_place("exp_", "ferry::exp_", &Tensor::exp_);
  unary_in_place("log_", "ferry::log_", &Tensor::log_);
  unary_in_place("sqrt_", "ferry::sqrt_", &Tensor::sqrt_);
  unary_in_place("rsqrt_", "ferry::rsqrt_", &Tensor::rsqrt_);
  unary_in_place("tanh_", "ferry::tanh_", &Tensor::tanh_);
  unary_in_place("sigmoid_", "ferry::sigmoid_", &Tensor::sigmoid_);
  t["pow_"] = fn("ferry::pow_.Scalar", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.pow_(c.scalar("exponent"));
    return out(s);
  });
  t["mul_slice_"] = fn("ferry::mul_.Tensor", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.slice(1, 1).mul_(c.t(1));
    return out(s);
  });
  t["copy_"] = fn("ferry::copy_", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.copy_(c.t(1));
    return out(s);
  });
  t["fill_"] = fn("ferry::fill_", [](const Call& c) {
    Tensor s = c.t(0).clone();
    s.fill_(c.scalar("value"));
    return out(s);
  });

  // ---- reductions and softmax -----------------------------------------------------------------
  t["sum"] =
      fn("ferry::sum", [](const Call& c) { return out(ferry::sum(c.t(0), c.dtype("dtype"))); });
  t["sum_dim"] = fn("ferry::sum.dim_IntList", [](const Call& c) {
    return out(ferry::sum(c.t(0), c.ints("dim"), c.flag("keepdim", false), c.dtype("dtype")));
  });
  t["mean"] =
      fn("ferry::mean", [](const Call& c) { return out(ferry::mean(c.t(0), c.dtype("dtype"))); });
  t["mean_dim"] = fn("ferry::mean.dim", [](const Call& c) {
    return out(ferry::mean(c.t(0), c.ints("dim"), c.flag("keepdim", false), c.dtype("dtype")));
  });
  t["amax"] = fn("ferry::amax", [](const Call& c) {
    return out(
        ferry::amax(c.t(0), c.ints("dim", std::vector<int64_t>{}), c.flag("keepdim", false)));
  });
  t["argmax"] = fn("ferry::argmax", [](const Call& c) {
    return out(ferry::argmax(c.t(0), c.opt_i64("dim"), c.flag("keepdim", false)));
  });
  t["softmax"] = fn("ferry::softmax.int", [](const Call& c) {
    return out(ferry::softmax(c.t(0), c.i64("dim"), c.dtype("dtype")));
  });
  t["log_softmax"] = fn("ferry::log_softmax.int", [](const Call& c) {
    return out(ferry::log_softmax(c.t(0), c.i64("dim"), c.dtype("dtype")));
  });

  // ---- the backward helpers -------------------------------------------------------------------
  t["threshold_backward"] = fn("ferry::threshold_backward", [](const Call& c) {
    return out(ferry::threshold_backward(c.t(0), c.t(1), c.scalar("threshold")));
  });
  t["sigmoid_backward"] = binary("ferry::sigmoid_backward", &ferry::sigmoid_backward);
  t["tanh_backward"] = binary("ferry::tanh_backward", &ferry::tanh_backward);
  t["gelu_backward"] = fn("ferry::gelu_backward", [](const Call& c) {
    return out(ferry::gelu_backward(c.t(0), c.t(1), c.str("approximate", "none")));
  });
  t["_softmax_backward_data"] = fn("ferry::_softmax_backward_data", [](const Call& c) {
    return out(ferry::softmax_backward_data(c.t(0), c.t(1), c.i64("dim")));
  });
  t["_log_softmax_backward_data"] = fn("ferry::_log_softmax_backward_data", [](const Call& c) {
    return out(ferry::log_softmax_backward_data(c.t(0), c.t(1), c.i64("dim")));
  });
  t["slice_backward"] = fn("ferry::slice_backward", [](const Call& c) {
    return out(ferry::slice_backward(c.t(0), c.ints("input_sizes"), c.i64("dim"), c.i64("start"),
                                     c.i64("end"), c.i64("step")));
  });
  t["select_backward"] = fn("ferry::select_backward", [](const Call& c) {
    return out(ferry::select_backward(c.t(0), c.ints("input_sizes"), c.i64("dim"), c.i64("index")));
  });

  // ---- views and conversions ------------------------------------------------------------------
  t["view"] = fn("ferry::view", [](const Call& c) { return out(c.t(0).view(c.ints("size"))); });
  t["reshape"] =
      fn("ferry::view", [](const Call& c) { return out(c.t(0).reshape(c.ints("shape"))); });
  t["permute"] =
      fn("ferry::permute", [](const Call& c) { return out(c.t(0).permute(c.ints("dims"))); });
  t["transpose"] = fn("ferry::transpose.int", [](const Call& c) {
    return out(c.t(0).transpose(c.i64("dim0"), c.i64("dim1")));
  });
  t["t"] = fn("ferry::transpose.int", [](const Call& c) { return out(c.t(0).t()); });
  t["slice"] = fn("ferry::slice.Tensor", [](const Call& c) {
    return out(
        c.t(0).slice(c.i64("dim", 0), c.opt_i64("start"), c.opt_i64("end"), c.i64("step", 1)));
  });
  t["narrow"] = fn("ferry::slice.Tensor", [](const Call& c) {
    return out(c.t(0).narrow(c.i64("dim"), c.i64("start"), c.i64("length")));
  });
  t["select"] = fn("ferry::select.int",
                   [](const Call& c) { return out(c.t(0).select(c.i64("dim"), c.i64("index"))); });
  t["expand"] =
      fn("ferry::expand", [](const Call& c) { return out(c.t(0).expand(c.ints("size"))); });
  t["unsqueeze"] =
      fn("ferry::unsqueeze", [](const Call& c) { return out(c.t(0).unsqueeze(c.i64("dim"))); });
  t["squeeze"] = fn("ferry::squeeze", [](const Call& c) { return out(c.t(0).squeeze()); });
  t["squeeze_dim"] =
      fn("ferry::squeeze.dim", [](const Call& c) { return out(c.t(0).squeeze(c.i64("dim"))); });
  t["flatten"] = fn("ferry::view", [](const Call& c) {
    return out(c.t(0).flatten(c.i64("start_dim", 0), c.i64("end_dim", -1)));
  });
  t["as_strided"] = fn("ferry::as_strided", [](const Call& c) {
    return out(c.t(0).as_strided(c.ints("size"), c.ints("stride"), c.opt_i64("storage_offset")));
  });
  t["alias"] = fn("ferry::alias", [](const Call& c) { return out(c.t(0).alias()); });
  t["contiguous"] = fn("ferry::copy_", [](const Call& c) { return out(c.t(0).contiguous()); });
  t["clone"] = fn("ferry::copy_", [](const Call& c) { return out(c.t(0).clone()); });
  t["to_dtype"] =
      fn("ferry::copy_", [](const Call& c) { return out(c.t(0).to(*c.dtype("dtype"))); });

  add_linalg(t);
  add_nn(t);
  return t;
}

}  // namespace

const std::map<std::string, OpEntry>& op_table() {
  static const std::map<std::string, OpEntry> table = make_table();
  return table;
}

}  // namespace ferry::reference
