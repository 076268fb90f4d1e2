# Reference cases for linear algebra (matmul, mm, bmm, addmm, linear) and the NN operators
# (conv2d, batch_norm, layer_norm, pools, embedding, dropout, losses, cat/stack/split/chunk).
# Argument names follow PyTorch's schemas (aten::conv2d(Tensor input, Tensor weight, ...)): the
# C++ side calls ferry's operators of the same schema by these names.
import torch
import torch.nn.functional as F

from cases_math import LOG_SOFTMAX_TOL
from reference_ops import BF16, F16, F32, F64, FLOATS, I32, I64, C, T, op, r_layout, r_shape, rT

REDUCTIONS = ("mean", "sum", "none")


# ---- linear algebra -------------------------------------------------------------------------
def r_float(r):
    return r.choice((F32, F32, F64, BF16))


def sample_matmul(r):
    ra, rb = r.randint(1, 4), r.randint(1, 4)
    m, k, n = r.randint(1, 5), r.randint(0, 5), r.randint(1, 5)
    batch = r_shape(r, 0, max(ra, rb) - 2, lo=1, hi=3) if max(ra, rb) > 2 else []
    a = ([k] if ra == 1 else [m, k]) if ra <= 2 else [1 if r.random() < 0.3 else b for b in batch][-(ra - 2):] + [m, k]
    b = ([k] if rb == 1 else [k, n]) if rb <= 2 else [1 if r.random() < 0.3 else b for b in batch][-(rb - 2):] + [k, n]
    d = r_float(r)
    return [rT(r, a, d), rT(r, b, d)], {}


op("matmul", ("self", "other"), torch.matmul,
   [C("vec_vec", [T(5), T(5)]), C("mat_vec", [T(3, 4, layout="transposed"), T(4)]),
    C("vec_mat", [T(4, dtype=F64), T(4, 3, dtype=F64)]), C("mat_mat", [T(3, 4), T(4, 5, layout="sliced")]),
    C("batched_bcast", [T(2, 1, 3, 4), T(3, 4, 5)]), C("vec_batched", [T(4), T(2, 4, 3)]),
    C("batched_vec", [T(2, 3, 4, dtype=F64, layout="permuted"), T(4, dtype=F64)]),
    C("bf16", [T(4, 8, dtype=BF16), T(8, 3, dtype=BF16)], tol=2), C("f16", [T(4, 8, dtype=F16), T(8, 3, dtype=F16)], tol=2),
    C("k0", [T(3, 0), T(0, 2)]), C("mismatch", [T(3, 4), T(5, 2)], error=True),
    C("dtype_mismatch", [T(3, 4), T(4, 2, dtype=F64)], error=True)],
   sample_matmul)
op("mm", ("self", "mat2"), torch.mm,
   [C("f32", [T(3, 4), T(4, 5)]), C("transposed", [T(3, 4, layout="transposed"), T(4, 5, layout="transposed")]),
    C("f64_sliced", [T(3, 4, dtype=F64, layout="sliced"), T(4, 2, dtype=F64)]),
    C("bf16", [T(5, 16, dtype=BF16), T(16, 3, dtype=BF16)], tol=2), C("empty_m", [T(0, 3), T(3, 2)]),
    C("not_2d", [T(3), T(3, 2)], error=True)],
   lambda r: (lambda m, k, n, d: ([rT(r, [m, k], d), rT(r, [k, n], d)], {}))(
       r.randint(0, 6), r.randint(0, 6), r.randint(1, 6), r_float(r)))
op("bmm", ("self", "mat2"), torch.bmm,
   [C("f32", [T(2, 3, 4), T(2, 4, 5)]), C("permuted", [T(2, 3, 4, layout="permuted"), T(2, 4, 5, layout="transposed")]),
    C("f64", [T(3, 2, 2, dtype=F64), T(3, 2, 3, dtype=F64)]), C("bf16", [T(2, 4, 8, dtype=BF16), T(2, 8, 3, dtype=BF16)], tol=2),
    C("batch_mismatch", [T(2, 3, 4), T(3, 4, 5)], error=True)],
   lambda r: (lambda b, m, k, n, d: ([rT(r, [b, m, k], d), rT(r, [b, k, n], d)], {}))(
       r.randint(1, 3), r.randint(1, 5), r.randint(1, 5), r.randint(1, 5), r_float(r)))
op("addmm", ("self", "mat1", "mat2"),
   lambda self, mat1, mat2, beta=1, alpha=1: torch.addmm(self, mat1, mat2, beta=beta, alpha=alpha),
   [C("f32", [T(3, 5), T(3, 4), T(4, 5)]), C("bcast_bias", [T(5), T(3, 4), T(4, 5, layout="transposed")]),
    C("beta_alpha", [T(3, 5, dtype=F64), T(3, 4, dtype=F64), T(4, 5, dtype=F64)], beta=0.5, alpha=-2),
    C("beta0", [T(1, 5), T(3, 4), T(4, 5)], beta=0), C("bf16", [T(5, dtype=BF16), T(3, 8, dtype=BF16), T(8, 5, dtype=BF16)], tol=2)],
   lambda r: (lambda m, k, n, d: ([rT(r, r.choice([[m, n], [n], [1, n]]), d), rT(r, [m, k], d), rT(r, [k, n], d)],
                                  {"beta": r.choice([1, 0.5, 0]), "alpha": r.choice([1, 2, -0.5])}))(
       r.randint(1, 5), r.randint(1, 5), r.randint(1, 5), r_float(r)))
op("linear", ("input", "weight", "bias"), F.linear,
   [C("f32", [T(3, 4), T(5, 4), T(5)]), C("no_bias", [T(3, 4), T(5, 4)]),
    C("3d_input", [T(2, 3, 4, dtype=F64), T(5, 4, dtype=F64, layout="transposed"), T(5, dtype=F64)]),
    C("1d_input", [T(4), T(5, 4), T(5)]), C("bf16", [T(8, 16, dtype=BF16), T(4, 16, dtype=BF16), T(4, dtype=BF16)], tol=2),
    C("bad_features", [T(3, 4), T(5, 3)], error=True)],
   lambda r: (lambda i, o, d: ([rT(r, r_shape(r, 0, 2, lo=1, hi=3) + [i], d), rT(r, [o, i], d)] +
                               ([rT(r, [o], d)] if r.random() < 0.7 else []), {}))(r.randint(1, 5), r.randint(1, 5), r_float(r)))


# ---- convolution, normalization, pooling -----------------------------------------------------
def sample_conv(r):
    groups = r.choice([1, 1, 2])
    cin, cout = groups * r.randint(1, 3), groups * r.randint(1, 3)
    kh, kw = r.randint(1, 3), r.randint(1, 3)
    stride, padding, dilation = [r.randint(1, 2)] * 2, [r.randint(0, 1), r.randint(0, 2)], [r.randint(1, 2)] * 2
    h = r.randint((kh - 1) * dilation[0] + 1, 7)
    w = r.randint((kw - 1) * dilation[1] + 1, 7)
    d = r_float(r)
    x = rT(r, [r.randint(1, 2), cin, h, w], d)
    inputs = [x, rT(r, [cout, cin // groups, kh, kw], d)] + ([rT(r, [cout], d)] if r.random() < 0.7 else [])
    return inputs, {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


# PyTorch 1.13's float64 convolution backward (slow_conv2d) refuses a non-contiguous weight
# ("grad_weight must be contiguous"): it gets a dense copy, ferry the strided one.
op("conv2d", ("input", "weight", "bias"),
   lambda input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1:
       F.conv2d(input, weight.contiguous(), bias, stride, padding, dilation, groups),
   [C("basic", [T(2, 3, 6, 6), T(4, 3, 3, 3), T(4)]),
    C("stride_pad", [T(1, 2, 7, 5), T(3, 2, 3, 2), T(3)], stride=[2, 1], padding=[1, 0]),
    C("dilation", [T(1, 2, 7, 7, dtype=F64), T(2, 2, 3, 3, dtype=F64), T(2, dtype=F64)], dilation=[2, 2], padding=[2, 1]),
    C("groups", [T(2, 4, 5, 5), T(6, 2, 3, 3), None], groups=2, padding=[1, 1]),
    C("depthwise", [T(1, 3, 5, 5), T(3, 1, 3, 3), T(3)], groups=3),
    C("channels_last", [T(2, 3, 5, 5, layout="channels_last"), T(4, 3, 3, 3), T(4)], padding=[1, 1], strides=True),
    C("1x1_no_bias", [T(2, 8, 4, 4, layout="sliced"), T(4, 8, 1, 1)]),
    C("bf16", [T(1, 4, 6, 6, dtype=BF16), T(4, 4, 3, 3, dtype=BF16), T(4, dtype=BF16)], tol=3),
    C("f16", [T(1, 3, 5, 5, dtype=F16), T(2, 3, 3, 3, dtype=F16), T(2, dtype=F16)], tol=3),
    C("channel_mismatch", [T(1, 3, 5, 5), T(4, 2, 3, 3)], error=True)],
   sample_conv)


def bn(input, weight=None, bias=None, running_mean=None, running_var=None, training=False,
       momentum=0.1, eps=1e-5):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def bn_inputs(shape, dtype=F32, layout=None, affine=True, stats=True, stat_dtype=None):
    c, sd = shape[1], stat_dtype or dtype
    return [T(*shape, dtype=dtype, layout=layout),
            T(c, dtype=sd) if affine else None, T(c, dtype=sd) if affine else None,
            T(c, dtype=sd, fill="normal", grad=False, mutated=True) if stats else None,
            T(c, dtype=sd, fill="positive", grad=False, mutated=True) if stats else None]


def sample_bn(r):
    # Three or more values per channel: over two, 1/std amplifies float32 rounding in the input
    # gradient (as for layer_norm), hence also the op's fourfold tolerance.
    shape = [r.randint(3, 4), r.randint(1, 4)] + r_shape(r, 0, 2, lo=1, hi=4)
    training = r.random() < 0.6
    return (bn_inputs(shape, r.choice((F32, F64)), r.choice(["contiguous", "sliced"]), r.random() < 0.7,
                      not training or r.random() < 0.7),
            {"training": training, "momentum": r.choice([0.1, 0.5]), "eps": 1e-5})


op("batch_norm", ("input", "weight", "bias", "running_mean", "running_var"), bn,
   [C("train", bn_inputs([4, 3, 2, 2]), training=True, momentum=0.1, eps=1e-5),
    C("eval", bn_inputs([4, 3, 2, 2]), training=False, momentum=0.1, eps=1e-5),
    C("train_no_stats", bn_inputs([3, 2, 5], affine=True, stats=False), training=True, momentum=0.1, eps=1e-5),
    C("train_no_affine_f64", bn_inputs([4, 3], F64, affine=False), training=True, momentum=0.3, eps=1e-3),
    C("eval_no_affine", bn_inputs([2, 3, 4], affine=False), training=False, momentum=0.1, eps=1e-5),
    C("channels_last", bn_inputs([2, 3, 3, 2], layout="channels_last"), training=True, momentum=0.1, eps=1e-5),
    C("train_empty_batch", bn_inputs([3, 3, 3, 0]), training=True, momentum=0.1, eps=1e-5),
    C("bf16_f32_params", bn_inputs([4, 2, 3, 3], BF16, stat_dtype=F32), training=True, momentum=0.1, eps=1e-5, tol=3)],
   sample_bn, tol=4)
op("layer_norm", ("input", "weight", "bias"),
   lambda input, weight=None, bias=None, normalized_shape=(), eps=1e-5:
       F.layer_norm(input, normalized_shape, weight, bias, eps),
   [C("last", [T(3, 5), T(5), T(5)], normalized_shape=[5]),
    C("last_two_f64", [T(2, 3, 4, dtype=F64, layout="permuted"), T(3, 4, dtype=F64), T(3, 4, dtype=F64)], normalized_shape=[3, 4]),
    C("no_affine", [T(4, 6)], normalized_shape=[6]), C("weight_only", [T(2, 4, layout="sliced"), T(4)], normalized_shape=[4]),
    C("eps", [T(3, 8)], normalized_shape=[8], eps=0.1),
    C("bf16", [T(2, 16, dtype=BF16), T(16, dtype=BF16), T(16, dtype=BF16)], normalized_shape=[16], tol=3),
    C("shape_mismatch", [T(3, 5)], normalized_shape=[4], error=True)],
   # Never an expanded input: constant rows have zero variance, where both libraries only round.
   lambda r: (lambda s, k, d: ([rT(r, s, d, layout=varied_layout(r, s))]
                               + ([rT(r, s[-k:], d), rT(r, s[-k:], d)] if r.random() < 0.7 else []),
                               {"normalized_shape": s[-k:], "eps": 1e-5}))(
       # Three or more normalized elements: over one, PyTorch's rounding of x - mean (0 exactly in
       # ferry) is scaled by 1/sqrt(eps); over a few, 1/std amplifies float32 rounding in the input
       # gradient in both libraries (measured against float64: ferry's error is the smaller one),
       # hence also the op's fourfold tolerance.
       r_shape(r, 1, 4, lo=1)[:-1] + [r.randint(3, 6)], 1, r.choice((F32, F64))), tol=4)


def varied_layout(r, shape):
    """A random layout other than "expanded" (whose repeated values make statistics degenerate)."""
    layout = r_layout(r, shape)
    return "contiguous" if layout == "expanded" else layout


def sample_pool(r, dilation=True, avg=False):
    k = [r.randint(1, 3), r.randint(1, 3)]
    p = {"kernel_size": k, "stride": r.choice([[], [1, 1], [2, 2], [2, 1]]),
         "padding": [r.randint(0, k[0] // 2), r.randint(0, k[1] // 2)], "ceil_mode": r.random() < 0.3}
    if dilation:
        p["dilation"] = [r.randint(1, 2), 1]
    if avg:
        p["count_include_pad"] = r.random() < 0.5
    shape = [r.randint(1, 2), r.randint(1, 3), r.randint(4, 7), r.randint(4, 7)]
    return [rT(r, shape, r.choice((F32, F64)), fill="distinct")], p


op("max_pool2d", ("self",),
   lambda self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False:
       F.max_pool2d(self, kernel_size, stride or None, padding, dilation, ceil_mode),
   [C("2x2", [T(2, 3, 6, 6, fill="distinct")], kernel_size=[2, 2]),
    C("3x3_s2_p1", [T(1, 2, 7, 5, fill="distinct", layout="sliced")], kernel_size=[3, 3], stride=[2, 2], padding=[1, 1]),
    C("dilation_ceil", [T(1, 1, 7, 7, dtype=F64, fill="distinct")], kernel_size=[2, 2], stride=[2, 2], dilation=[2, 1], ceil_mode=True),
    C("channels_last", [T(2, 3, 4, 4, fill="distinct", layout="channels_last")], kernel_size=[2, 2], strides=True),
    C("ties", [T(1, 2, 4, 4, fill="small_int")], kernel_size=[2, 2]),
    C("bf16", [T(1, 2, 4, 4, dtype=BF16, fill="distinct")], kernel_size=[2, 2])],
   sample_pool)
op("avg_pool2d", ("self",),
   lambda self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None:
       F.avg_pool2d(self, kernel_size, stride or None, padding, ceil_mode, count_include_pad, divisor_override),
   [C("2x2", [T(2, 3, 6, 6)], kernel_size=[2, 2]),
    C("3x3_pad_excluded", [T(1, 2, 5, 5, layout="transposed")], kernel_size=[3, 3], stride=[1, 1], padding=[1, 1], count_include_pad=False),
    C("3x3_pad_included", [T(1, 2, 5, 5, dtype=F64)], kernel_size=[3, 3], stride=[2, 2], padding=[1, 1]),
    C("ceil", [T(1, 1, 5, 5)], kernel_size=[2, 2], stride=[2, 2], ceil_mode=True),
    C("divisor", [T(1, 2, 4, 4)], kernel_size=[2, 2], divisor_override=3),
    C("bf16_channels_last", [T(2, 3, 4, 4, dtype=BF16, layout="channels_last")], kernel_size=[2, 2], strides=True)],
   lambda r: sample_pool(r, dilation=False, avg=True))
op("adaptive_avg_pool2d", ("self",), F.adaptive_avg_pool2d,
   [C("even", [T(2, 3, 6, 6)], output_size=[3, 3]), C("uneven", [T(1, 2, 7, 5, dtype=F64)], output_size=[3, 2]),
    C("global", [T(2, 4, 5, 5, layout="channels_last")], output_size=[1, 1]),
    C("larger", [T(1, 1, 2, 3)], output_size=[4, 4]), C("bf16", [T(1, 2, 6, 4, dtype=BF16)], output_size=[2, 2])],
   lambda r: ([rT(r, [r.randint(1, 2), r.randint(1, 3), r.randint(1, 7), r.randint(1, 7)], r.choice((F32, F64)))],
              {"output_size": [r.randint(1, 4), r.randint(1, 4)]}))


# ---- embedding, dropout, losses --------------------------------------------------------------
op("embedding", ("weight", "indices"),
   lambda weight, indices, padding_idx=-1: torch.embedding(weight, indices, padding_idx),
   [C("2d_indices", [T(10, 4), T(3, 5, dtype=I64, fill="index", high=10)]),
    C("repeated_rows", [T(3, 2, dtype=F64), T(12, dtype=I64, fill="index", high=3)]),
    C("padding_idx", [T(6, 3), T(4, 4, dtype=I64, fill="index", high=6)], padding_idx=2),
    C("int32_indices", [T(5, 3), T(7, dtype=I32, fill="index", high=5)]),
    C("bf16", [T(8, 4, dtype=BF16), T(6, dtype=I64, fill="index", high=8)]),
    C("out_of_range", [T(4, 2), T(3, dtype=I64, fill="index", low=4, high=9)], error=True)],
   lambda r: (lambda n: ([rT(r, [n, r.randint(1, 4)], r_float(r)), T(*r_shape(r, 0, 2), dtype=I64, fill="index", high=n)],
                         {"padding_idx": r.choice([-1, -1, r.randrange(n)])}))(r.randint(1, 8)))
op("dropout", ("input",), lambda input, p, train: torch.dropout(input, p, train),
   [C("p0_train", [T(3, 4)], p=0.0, train=True), C("eval", [T(3, 4, layout="transposed")], p=0.5, train=False),
    C("eval_bf16", [T(5, dtype=BF16)], p=0.3, train=False)])


def ce(self, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    return F.cross_entropy(self, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)


def nll(self, target, weight=None, reduction="mean", ignore_index=-100):
    # PyTorch 1.13's N-d (nll_loss2d) backward refuses a non-contiguous input ("grad_input must be
    # contiguous"); it gets a dense copy, ferry the strided one.
    return F.nll_loss(self.contiguous(), target, weight=weight, reduction=reduction,
                      ignore_index=ignore_index)


def target(*shape, high, ignore=None):
    return T(*shape, dtype=I64, fill="index", high=high, ignore=ignore)


def sample_class_loss(r, smoothing):
    n, c = r.randint(1, 5), r.randint(2, 5)
    extra = r_shape(r, 0, 2, lo=1, hi=3)
    ignore = r.choice([None, -100, r.randrange(c)])
    inputs = [rT(r, [n, c] + extra, r.choice((F32, F64))), target(n, *extra, high=c, ignore=ignore)]
    if r.random() < 0.4:
        inputs.append(T(c, dtype=inputs[0]["dtype"], fill="positive", grad=False))
    p = {"reduction": r.choice(REDUCTIONS), "ignore_index": -100 if ignore is None else ignore}
    if smoothing:
        p["label_smoothing"] = r.choice([0.0, 0.1, 0.3])
    return inputs, p


op("cross_entropy", ("self", "target", "weight"), ce,
   [C("mean", [T(4, 5), target(4, high=5)]),
    C("sum_f64", [T(3, 4, dtype=F64, layout="transposed"), target(3, high=4)], reduction="sum"),
    C("none", [T(4, 3), target(4, high=3)], reduction="none"),
    C("ignore_index", [T(6, 4), target(6, high=4, ignore=1)], ignore_index=1),
    C("ignore_default", [T(6, 4), target(6, high=4, ignore=-100)]),
    C("label_smoothing", [T(5, 3), target(5, high=3)], label_smoothing=0.2),
    C("weights", [T(5, 3), target(5, high=3), T(3, fill="positive", grad=False)]),
    C("weights_ignore_smoothing", [T(6, 4), target(6, high=4, ignore=0), T(4, fill="positive", grad=False)],
      ignore_index=0, label_smoothing=0.1),
    C("spatial", [T(2, 3, 2, 2), target(2, 2, 2, high=3)]),
    C("bf16", [T(4, 8, dtype=BF16), target(4, high=8)], tol=3),
    C("bad_target_shape", [T(4, 5), target(3, high=5)], error=True)],
   lambda r: sample_class_loss(r, True), tol=LOG_SOFTMAX_TOL)
op("nll_loss", ("self", "target", "weight"), nll,
   [C("mean", [T(4, 5), target(4, high=5)]), C("sum", [T(3, 4, dtype=F64), target(3, high=4)], reduction="sum"),
    C("none_weights", [T(5, 3), target(5, high=3), T(3, fill="positive", grad=False)], reduction="none"),
    C("ignore_weights_mean", [T(6, 3, layout="sliced"), target(6, high=3, ignore=2), T(3, fill="positive", grad=False)], ignore_index=2),
    C("spatial", [T(2, 3, 2, 2), target(2, 2, 2, high=3)])],
   lambda r: sample_class_loss(r, False))
op("mse_loss", ("self", "target"),
   lambda self, target, reduction="mean": F.mse_loss(self, target, reduction=reduction),
   [C("mean", [T(3, 4), T(3, 4)]), C("sum_f64", [T(3, 4, dtype=F64, layout="transposed"), T(3, 4, dtype=F64)], reduction="sum"),
    C("none", [T(5), T(5)], reduction="none"), C("bf16", [T(4, 4, dtype=BF16), T(4, 4, dtype=BF16)], tol=3),
    C("0d", [T(), T()])],
   lambda r: (lambda s, d: ([rT(r, s, d), rT(r, s, d)], {"reduction": r.choice(REDUCTIONS)}))(r_shape(r), r_float(r)))


# ---- joining and splitting ------------------------------------------------------------------
def sample_join(r, stack):
    s, d = r_shape(r, 1, 3, lo=1), r.randrange(3)
    dim = r.randint(-len(s) - (1 if stack else 0), len(s) - (0 if stack else 1))
    shapes = []
    for _ in range(r.randint(1, 3)):
        t = list(s)
        if not stack:
            t[dim] = r.randint(0, 3)
        shapes.append(t)
    dtype = (F32, F64, BF16)[d]
    return [rT(r, t, dtype) for t in shapes], {"dim": dim}


op("cat", ("tensors[]",), lambda *tensors, dim=0: torch.cat(tensors, dim),
   [C("dim0", [T(2, 3), T(4, 3)]), C("dim1_mixed_layouts", [T(2, 3, layout="transposed"), T(2, 1), T(2, 4, layout="sliced")], dim=1),
    C("neg_dim_f64", [T(2, 2, 3, dtype=F64), T(2, 2, 1, dtype=F64)], dim=-1),
    C("promotes", [T(2, 3), T(1, 3, dtype=F64)]), C("with_empty", [T(0, 3), T(2, 3)]),
    C("legacy_empty_1d", [T(2, 3), T(0)]), C("bf16", [T(2, dtype=BF16), T(3, dtype=BF16)]),
    C("shape_mismatch", [T(2, 3), T(2, 4)], error=True)],
   lambda r: sample_join(r, False))
op("stack", ("tensors[]",), lambda *tensors, dim=0: torch.stack(tensors, dim),
   [C("dim0", [T(2, 3), T(2, 3)]), C("dim1", [T(2, 3, layout="transposed"), T(2, 3), T(2, 3)], dim=1),
    C("last_f64", [T(4, dtype=F64), T(4, dtype=F64)], dim=-1), C("shape_mismatch", [T(2, 3), T(3, 2)], error=True)],
   lambda r: sample_join(r, True))
op("split", ("self",), lambda self, split_size, dim=0: torch.split(self, split_size, dim),
   [C("even", [T(6, 2)], split_size=2), C("uneven_dim1", [T(2, 7, layout="transposed")], split_size=3, dim=1),
    C("larger", [T(3)], split_size=5), C("neg_dim_f64", [T(2, 5, dtype=F64)], split_size=2, dim=-1)],
   lambda r: (lambda s: ([rT(r, s, r_float(r))], {"split_size": r.randint(1, 4), "dim": r.randrange(len(s))}))(
       r_shape(r, 1, 3, lo=1)), strides=True)
op("chunk", ("self",), lambda self, chunks, dim=0: torch.chunk(self, chunks, dim),
   [C("even", [T(6, 2)], chunks=3), C("uneven", [T(2, 7, dtype=F64)], chunks=3, dim=1),
    C("more_chunks_than_rows", [T(2, 3)], chunks=4)],
   lambda r: (lambda s: ([rT(r, s, r_float(r))], {"chunks": r.randint(1, 4), "dim": r.randrange(len(s))}))(
       r_shape(r, 1, 3, lo=1)), strides=True)
