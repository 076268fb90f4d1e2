# Reference cases for the operators of ferry/ops/math.h and the Tensor methods: elementwise
# (tensor and scalar forms, in place), reductions, softmax, the backward helpers, views and
# conversions. Each op(...) call is one operator; the C++ side has an entry of the same name.
import torch
import torch.nn.functional as F

from reference_ops import (BF16, BOOL, F16, F32, F64, FLOATS, I16, I32, I64, INTS, U8, C, T, op,
                           r_bcast, r_dims, r_float_pair, r_shape, rT)

ALL_NUMERIC = FLOATS + INTS


# ---- elementwise: unary ---------------------------------------------------------------------
def unary_cases(fill=None, int_result=None, bool_ok=True):
    """int_result: the dtype PyTorch gives an int64 input ("error" when it raises)."""
    cs = [C("f32", [T(3, 4, fill=fill)]),
          C("f64_transposed", [T(4, 5, dtype=F64, layout="transposed", fill=fill)]),
          C("bf16_sliced", [T(2, 3, 4, dtype=BF16, layout="sliced", fill=fill)]),
          C("f16", [T(7, dtype=F16, fill=fill)]),
          C("f32_permuted", [T(2, 3, 4, layout="permuted", fill=fill)]),
          C("f32_expanded", [T(3, 4, layout="expanded", fill=fill)]),
          C("0d", [T(fill=fill)]),
          C("empty", [T(0, 3, fill=fill)])]
    if int_result == "error":
        cs.append(C("int64", [T(2, 3, dtype=I64)], error=True))
    elif int_result is not None:
        cs += [C("int64", [T(2, 3, dtype=I64, fill="positive" if fill else None)]),
               C("uint8", [T(4, dtype=U8)])]
    if bool_ok is not None:
        cs.append(C("bool", [T(4, dtype=BOOL)], error=not bool_ok))
    return cs


def unary_sampler(fill=None, dtypes=FLOATS):
    def sample(r):
        s = r_shape(r)
        return [rT(r, s, r.choice(dtypes), fill=fill)], {}
    return sample


for name, fn, fill, ints, bool_ok in [
        ("neg", torch.neg, None, I64, False), ("exp", torch.exp, None, F32, True),
        ("log", torch.log, "positive", F32, True), ("sqrt", torch.sqrt, "positive", F32, True),
        ("rsqrt", torch.rsqrt, "positive", F32, True), ("tanh", torch.tanh, None, F32, True),
        ("sigmoid", torch.sigmoid, None, F32, True), ("relu", torch.relu, "with_zeros", I64, False),
        ("abs", torch.abs, "with_zeros", I64, False), ("sign", torch.sign, "with_zeros", I64, True)]:
    extra = []
    if name in ("log", "sqrt", "rsqrt"):  # NaN and inf outside the domain, as PyTorch
        extra = [C("f32_negative", [T(3, 4, fill="with_zeros")])]
    op(name, ("self",), fn, unary_cases(fill, ints, bool_ok) + extra,
       unary_sampler(fill, ALL_NUMERIC if ints == I64 else FLOATS))

op("gelu", ("self",), lambda self, approximate="none": F.gelu(self, approximate=approximate),
   [C("f32", [T(3, 4)]), C("f32_tanh", [T(3, 4)], approximate="tanh"),
    C("f64_transposed", [T(4, 5, dtype=F64, layout="transposed")]),
    C("f64_tanh_sliced", [T(2, 3, dtype=F64, layout="sliced")], approximate="tanh"),
    C("bf16", [T(2, 3, 4, dtype=BF16)]), C("bf16_tanh", [T(5, dtype=BF16)], approximate="tanh"),
    C("f16", [T(6, dtype=F16)]), C("0d", [T()]), C("empty", [T(0, 2)]),
    C("int64", [T(3, dtype=I64)], error=True)],
   lambda r: ([rT(r, r_shape(r), r.choice(FLOATS))], {"approximate": r.choice(["none", "tanh"])}))

op("pow_scalar", ("self",), lambda self, exponent: torch.pow(self, exponent),
   [C("f32_sq", [T(3, 4)], exponent=2), C("f64_cube_transposed", [T(3, 4, dtype=F64, layout="transposed")], exponent=3),
    C("f32_sqrt", [T(5, fill="positive")], exponent=0.5),
    C("f64_neg_frac", [T(2, 3, dtype=F64, fill="positive")], exponent=-1.5),
    C("f32_zero", [T(4)], exponent=0), C("f32_one", [T(4)], exponent=1),
    C("bf16", [T(2, 3, dtype=BF16)], exponent=2), C("f16", [T(5, dtype=F16, fill="positive")], exponent=2.5),
    C("int64_sq", [T(4, dtype=I64)], exponent=2), C("int64_frac", [T(4, dtype=I64, fill="positive")], exponent=0.5),
    C("int64_neg", [T(4, dtype=I64)], exponent=-1, error=True), C("0d", [T()], exponent=3),
    C("empty", [T(0)], exponent=2)],
   lambda r: ([rT(r, r_shape(r), r.choice(FLOATS), fill="positive")],
              {"exponent": r.choice([2, 3, 0.5, -1.5, 1.25, 0])}))


# ---- elementwise: binary ---------------------------------------------------------------------
def binary_cases(fill=None, alpha=False, bool_error=False):
    """`fill` draws the second operand (nonzero for divisors)."""
    cs = [C("f32", [T(3, 4), T(3, 4, fill=fill)]),
          C("bcast", [T(3, 1, 4), T(2, 4, fill=fill)]),
          C("f64_transposed_sliced", [T(4, 5, dtype=F64, layout="transposed"),
                                      T(4, 5, dtype=F64, layout="sliced", fill=fill)]),
          C("bf16", [T(2, 3, dtype=BF16), T(3, dtype=BF16, fill=fill)]),
          C("f16", [T(5, dtype=F16), T(5, dtype=F16, fill=fill)]),
          C("f32_f64", [T(2, 3), T(2, 3, dtype=F64, fill=fill)]),
          C("bf16_f32", [T(4, dtype=BF16), T(2, 4, fill=fill)]),
          C("int64_f32", [T(2, 3, dtype=I64), T(2, 3, fill=fill)]),
          C("int32_int64", [T(4, dtype=I32), T(4, dtype=I64, fill=fill)]),
          C("uint8_int8", [T(4, dtype=U8), T(4, dtype="int8", fill=fill)]),
          C("bool_int64", [T(3, dtype=BOOL), T(3, dtype=I64, fill=fill)], error=bool_error),
          C("bool_bool", [T(3, dtype=BOOL), T(3, dtype=BOOL)], error=bool_error),
          C("0d_f64_with_f32", [T(dtype=F64), T(2, 3, fill=fill)]),
          C("f32_with_0d_int", [T(2, 3), T(dtype=I64, fill=fill)]),
          C("int64_with_0d_f64", [T(2, 3, dtype=I64), T(dtype=F64, fill=fill)]),
          C("f32_with_0d_cpu", [T(2, 3), T(fill=fill, device="cpu")]),
          C("0d_0d", [T(), T(dtype=F64, fill=fill)]),
          C("empty", [T(0, 4), T(4, fill=fill)]),
          C("channels_last", [T(2, 3, 2, 2, layout="channels_last"), T(2, 3, 2, 2, fill=fill)]),
          C("expanded_permuted", [T(3, 2, 4, layout="expanded"), T(3, 2, 4, layout="permuted", fill=fill)]),
          C("shape_mismatch", [T(3, 4), T(3, 5)], error=True)]
    if alpha:
        cs += [C("alpha_int", [T(3, 4), T(3, 4)], alpha=2),
               C("alpha_float_f64", [T(2, 3, dtype=F64), T(3, dtype=F64)], alpha=0.5),
               C("alpha_int64", [T(3, dtype=I64), T(3, dtype=I64)], alpha=3),
               C("alpha_float_int", [T(3, dtype=I64), T(3, dtype=I64)], alpha=0.5, error=True)]
    return cs


def binary_sampler(fill=None, pairs=r_float_pair):
    def sample(r):
        (a, b), (da, db) = r_bcast(r), pairs(r)
        return [rT(r, a, da), rT(r, b, db, fill=fill)], {}
    return sample


op("add", ("self", "other"), lambda self, other, alpha=1: torch.add(self, other, alpha=alpha),
   binary_cases(alpha=True), binary_sampler())
op("sub", ("self", "other"), lambda self, other, alpha=1: torch.sub(self, other, alpha=alpha),
   binary_cases(alpha=True, bool_error=True),
   binary_sampler(pairs=lambda r: r.choice([(F32, F32), (F64, F32), (BF16, BF16), (I64, F32), (F16, F16)])))
op("mul", ("self", "other"), torch.mul, binary_cases(), binary_sampler())
op("div", ("self", "other"), torch.div, binary_cases(fill="nonzero"), binary_sampler(fill="nonzero"))

COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}
for name, fn in COMPARE.items():
    op(name, ("self", "other"), fn,
       [C("f32_ties", [T(3, 4, fill="small_int"), T(3, 4, fill="small_int")]),
        C("bcast", [T(3, 1, fill="small_int"), T(2, 1, 4, fill="small_int")]),
        C("int64_f32", [T(2, 3, dtype=I64, fill="small_int"), T(2, 3, fill="small_int", layout="transposed")]),
        C("bf16_f64", [T(4, dtype=BF16, fill="small_int"), T(4, dtype=F64, fill="small_int")]),
        C("bool_bool", [T(5, dtype=BOOL), T(5, dtype=BOOL)]),
        C("f32_0d", [T(2, 3, fill="small_int"), T(fill="small_int")]),
        C("empty", [T(0, 3), T(3)])],
       binary_sampler(fill="small_int"))
    op(name + "_scalar", ("self",), fn,
       [C("f32_int", [T(3, 4, fill="small_int")], other=1),
        C("f32_float", [T(3, 4, fill="small_int", layout="sliced")], other=0.5),
        C("int64_float", [T(4, dtype=I64, fill="small_int")], other=-1.5),
        C("bool_bool", [T(4, dtype=BOOL)], other=True), C("bf16", [T(4, dtype=BF16, fill="small_int")], other=2)],
       lambda r: ([rT(r, r_shape(r), r.choice(ALL_NUMERIC), fill="small_int")],
                  {"other": r.choice([0, 1, -2, 0.5])}))

op("where", ("condition", "self", "other"), torch.where,
   [C("f32", [T(3, 4, dtype=BOOL), T(3, 4), T(3, 4)]),
    C("bcast_f32_f64", [T(3, 1, dtype=BOOL), T(3, 4), T(4, dtype=F64)]),
    C("transposed_bf16", [T(4, 3, dtype=BOOL, layout="transposed"), T(4, 3, dtype=BF16, layout="sliced"), T(3, dtype=BF16)]),
    C("int64_f32", [T(5, dtype=BOOL), T(5, dtype=I64), T(5)]),
    C("0d_other", [T(2, 3, dtype=BOOL), T(2, 3), T(dtype=F64)]),
    C("empty", [T(0, 3, dtype=BOOL), T(3), T(1)]),
    C("cond_not_bool", [T(3, dtype=I64), T(3), T(3)], error=True)],
   lambda r: (lambda s: ([rT(r, s[0], BOOL), rT(r, s[1], r.choice(FLOATS)), rT(r, s[0], F32)], {}))(r_bcast(r)))


def scalar_cases(fill=None, alpha=False, bool_error=False):
    cs = [C("f32_int", [T(3, 4, fill=fill)], other=2),
          C("f32_float", [T(3, 4, fill=fill, layout="transposed")], other=0.5),
          C("f64", [T(2, 3, dtype=F64, fill=fill)], other=-1.25),
          C("bf16", [T(5, dtype=BF16, fill=fill)], other=1.5),
          C("f16", [T(5, dtype=F16, fill=fill)], other=3),
          C("int64_int", [T(4, dtype=I64, fill=fill)], other=3),
          C("int64_float", [T(4, dtype=I64, fill=fill)], other=2.5),
          C("bool_int", [T(4, dtype=BOOL)], other=2, error=bool_error),
          C("0d", [T(fill=fill)], other=2.0), C("empty", [T(0, 2, fill=fill)], other=1)]
    if alpha:
        cs += [C("alpha", [T(3, fill=fill)], other=1.5, alpha=2)]
    return cs


def scalar_sampler(fill=None):
    return lambda r: ([rT(r, r_shape(r), r.choice(ALL_NUMERIC), fill=fill)],
                      {"other": r.choice([2, -1, 0.5, 3.25])})


op("add_scalar", ("self",), lambda self, other, alpha=1: torch.add(self, other, alpha=alpha),
   scalar_cases(alpha=True), scalar_sampler())
op("sub_scalar", ("self",), lambda self, other, alpha=1: torch.sub(self, other, alpha=alpha),
   scalar_cases(alpha=True, bool_error=True), scalar_sampler())
op("rsub_scalar", ("self",), lambda self, other, alpha=1: torch.rsub(self, other, alpha=alpha),
   scalar_cases(alpha=True, bool_error=True), scalar_sampler())
op("mul_scalar", ("self",), torch.mul, scalar_cases(), scalar_sampler())
op("div_scalar", ("self",), torch.div, scalar_cases(), scalar_sampler())
op("rdiv_scalar", ("self",), lambda self, other: other / self, scalar_cases(fill="nonzero"),
   scalar_sampler(fill="nonzero"))


# ---- in place -------------------------------------------------------------------------------
# The C++ entries do the same: clone (so that a leaf is not modified), then the in-place op.
def inplace_cases(fill=None, alpha=False):
    cs = [C("f32_bcast", [T(3, 4), T(4, fill=fill)]),
          C("f64_f32", [T(2, 3, dtype=F64), T(2, 3, fill=fill)]),
          C("f32_int64", [T(2, 3), T(3, dtype=I64, fill=fill)]),
          C("bf16_f32", [T(4, dtype=BF16), T(4, fill=fill)]),
          C("int64_f32", [T(4, dtype=I64), T(4, fill=fill)], error=True),
          C("transposed_0d", [T(3, 4, layout="transposed"), T(fill=fill)]),
          C("sliced_sliced", [T(2, 5, dtype=F64, layout="sliced"), T(2, 5, dtype=F64, layout="sliced", fill=fill)]),
          C("cannot_broadcast_self", [T(4), T(3, 4, fill=fill)], error=True)]
    if alpha:
        cs.append(C("alpha", [T(3, 4), T(3, 4)], alpha=-2))
    return cs


def inplace_sampler(fill=None):
    def sample(r):
        s = r_shape(r)
        other = s[len(s) - r.randint(0, len(s)):]
        ds, do = r.choice([(F32, F32), (F64, F64), (BF16, BF16), (F32, I64), (F64, F32), (F16, F16)])
        return [rT(r, s, ds), rT(r, other, do, fill=fill)], {}
    return sample


op("add_", ("self", "other"), lambda self, other, alpha=1: self.clone().add_(other, alpha=alpha),
   inplace_cases(alpha=True), inplace_sampler())
op("sub_", ("self", "other"), lambda self, other, alpha=1: self.clone().sub_(other, alpha=alpha),
   inplace_cases(alpha=True), inplace_sampler())
op("mul_", ("self", "other"), lambda self, other: self.clone().mul_(other), inplace_cases(),
   inplace_sampler())
op("div_", ("self", "other"), lambda self, other: self.clone().div_(other),
   inplace_cases(fill="nonzero"), inplace_sampler(fill="nonzero"))
SCALAR_INPLACE = [C("f32_int", [T(3, 4)], other=2), C("f64_float", [T(3, dtype=F64, layout="sliced")], other=-0.5),
                  C("bf16", [T(4, dtype=BF16)], other=1.5), C("int64_int", [T(4, dtype=I64)], other=3),
                  C("int64_float", [T(4, dtype=I64)], other=2.5, error=True), C("0d", [T()], other=2)]
op("add_scalar_", ("self",), lambda self, other, alpha=1: self.clone().add_(other, alpha=alpha),
   SCALAR_INPLACE + [C("alpha", [T(3)], other=1.5, alpha=2)], scalar_sampler())
op("sub_scalar_", ("self",), lambda self, other, alpha=1: self.clone().sub_(other, alpha=alpha),
   SCALAR_INPLACE, scalar_sampler())
op("mul_scalar_", ("self",), lambda self, other: self.clone().mul_(other), SCALAR_INPLACE,
   scalar_sampler())
op("div_scalar_", ("self",), lambda self, other: self.clone().div_(other),
   SCALAR_INPLACE[:3] + [C("int64_int", [T(4, dtype=I64)], other=2, error=True)], None)
op("neg_", ("self",), lambda self: self.clone().neg_(),
   [C("f32", [T(3, 4)]), C("bf16_transposed", [T(3, 4, dtype=BF16, layout="transposed")]),
    C("int64", [T(4, dtype=I64)])], unary_sampler())
op("relu_", ("self",), lambda self: self.clone().relu_(),
   [C("f32", [T(3, 4, fill="with_zeros")]), C("f64_sliced", [T(3, 4, dtype=F64, layout="sliced", fill="with_zeros")]),
    C("int64", [T(4, dtype=I64)])], unary_sampler("with_zeros"))


def in_place(name):
    return lambda self: getattr(self.clone(), name)()


for name, fill in [("exp_", None), ("log_", "positive"), ("sqrt_", "positive"), ("rsqrt_", "positive"),
                   ("tanh_", None), ("sigmoid_", None)]:
    op(name, ("self",), in_place(name),
       [C("f32", [T(3, 4, fill=fill)]), C("f64_sliced", [T(3, 4, dtype=F64, layout="sliced", fill=fill)]),
        C("bf16_transposed", [T(3, 4, dtype=BF16, layout="transposed", fill=fill)]),
        C("int64", [T(4, dtype=I64, fill=fill)], error=True)], unary_sampler(fill))

op("pow_", ("self",), lambda self, exponent: self.clone().pow_(exponent),
   [C("f32_sq", [T(3, 4)], exponent=2),
    C("f64_frac_sliced", [T(3, 4, dtype=F64, layout="sliced", fill="positive")], exponent=1.5),
    C("int64_sq", [T(4, dtype=I64)], exponent=2),
    C("int64_frac", [T(4, dtype=I64, fill="positive")], exponent=0.5, error=True)])


def mul_into_slice(self, other):
    base = self.clone()
    base[:, 1:].mul_(other)
    return base


op("mul_slice_", ("self", "other"), mul_into_slice,  # in place through a view of a clone
   [C("f32", [T(3, 4), T(3, 3)]), C("f64_bcast", [T(2, 5, dtype=F64), T(4, dtype=F64)])])

op("copy_", ("self", "src"), lambda self, src: self.clone().copy_(src),
   [C("f32", [T(3, 4), T(3, 4)]), C("f32_from_f64_bcast", [T(3, 4), T(4, dtype=F64)]),
    C("f64_from_transposed", [T(3, 4, dtype=F64), T(3, 4, layout="transposed")]),
    C("f32_from_int64", [T(2, 3), T(2, 3, dtype=I64)]),
    C("bf16_from_f32_sliced", [T(2, 4, dtype=BF16, layout="sliced"), T(2, 4)]),
    C("int64_from_f32", [T(4, dtype=I64), T(4, grad=False)]),
    C("0d", [T(), T(dtype=F64)])],
   lambda r: (lambda s: ([rT(r, s, r.choice(FLOATS)), rT(r, s[len(s) - r.randint(0, len(s)):], r.choice(FLOATS))], {}))(r_shape(r)))
op("fill_", ("self",), lambda self, value: self.clone().fill_(value),
   [C("f32", [T(3, 4)], value=2.5), C("f64_transposed", [T(3, 4, dtype=F64, layout="transposed")], value=-1),
    C("int64", [T(4, dtype=I64)], value=3), C("bool", [T(3, dtype=BOOL)], value=True), C("0d", [T()], value=7)])


# ---- reductions -----------------------------------------------------------------------------
def dense16(t):
    """PyTorch 1.13 sums a strided float16/bfloat16 view with 16-bit partial sums (6 float16 ulps
    off the exact sum measured where ferry, accumulating in float64, rounds correctly); its dense
    path accumulates in float32. The reference reduces a dense copy of 16-bit inputs."""
    return t.contiguous() if t.dtype in (torch.float16, torch.bfloat16) else t


op("sum", ("self",), lambda self, dtype=None: torch.sum(dense16(self), dtype=getattr(torch, dtype) if dtype else None),
   [C("f32", [T(3, 4)]), C("f64_transposed", [T(5, 6, dtype=F64, layout="transposed")]),
    C("bf16", [T(4, 8, dtype=BF16)], tol=2), C("f16", [T(3, 5, dtype=F16)]),
    C("f32_to_f64", [T(3, 4)], dtype=F64), C("int64", [T(3, 4, dtype=I64)]),
    C("int32", [T(5, dtype=I32)]), C("bool", [T(7, dtype=BOOL)]),
    C("int64_to_f32", [T(4, dtype=I64)], dtype=F32), C("0d", [T()]), C("empty", [T(0, 3)]),
    C("expanded", [T(4, 3, layout="expanded")])],
   lambda r: ([rT(r, r_shape(r), r.choice(ALL_NUMERIC + (BOOL,)))], {}))


def dim_reduction_cases(allow_int=True):
    cs = [C("dim0", [T(3, 4)], dim=[0]), C("dim_neg_keepdim", [T(3, 4, layout="transposed")], dim=[-1], keepdim=True),
          C("dims_list", [T(2, 3, 4, dtype=F64, layout="permuted")], dim=[0, 2]),
          C("dims_list_keepdim", [T(2, 3, 4)], dim=[2, 0], keepdim=True),
          C("all_dims_empty_list", [T(3, 4)], dim=[]),
          C("bf16", [T(4, 6, dtype=BF16, layout="sliced")], dim=[1], tol=2),
          C("f16", [T(4, 6, dtype=F16)], dim=[0]),
          C("f32_to_f64", [T(3, 4)], dim=[1], dtype=F64),
          C("empty_reduced", [T(0, 3)], dim=[0]), C("empty_kept", [T(0, 3)], dim=[1], keepdim=True),
          C("0d", [T()], dim=[0]), C("expanded", [T(3, 4, layout="expanded")], dim=[0]),
          C("duplicate_dim", [T(3, 4)], dim=[1, -1], error=True),
          C("dim_out_of_range", [T(3, 4)], dim=[2], error=True)]
    if allow_int:
        cs += [C("int64", [T(3, 4, dtype=I64)], dim=[1]), C("bool", [T(3, 4, dtype=BOOL)], dim=[0])]
    else:
        cs += [C("int64", [T(3, 4, dtype=I64)], dim=[1], error=True)]
    return cs


def dim_reduction_sampler(dtypes=FLOATS):
    def sample(r):
        s = r_shape(r)
        return [rT(r, s, r.choice(dtypes))], {"dim": r_dims(r, len(s)), "keepdim": r.random() < 0.5}
    return sample


def dt(dtype):
    return getattr(torch, dtype) if dtype else None


op("sum_dim", ("self",),
   lambda self, dim, keepdim=False, dtype=None: torch.sum(dense16(self), dim, keepdim, dtype=dt(dtype)),
   dim_reduction_cases(), dim_reduction_sampler(ALL_NUMERIC + (BOOL,)))
op("mean", ("self",), lambda self, dtype=None: torch.mean(dense16(self), dtype=dt(dtype)),
   [C("f32", [T(3, 4)]), C("f64_transposed", [T(5, 6, dtype=F64, layout="transposed")]),
    C("bf16", [T(4, 8, dtype=BF16)]), C("f16", [T(3, 5, dtype=F16)]),
    C("f32_to_f64", [T(3, 4)], dtype=F64), C("int64", [T(3, 4, dtype=I64)], error=True),
    C("0d", [T()]), C("empty", [T(0, 3)])],
   lambda r: ([rT(r, r_shape(r), r.choice(FLOATS))], {}))
op("mean_dim", ("self",),
   lambda self, dim, keepdim=False, dtype=None: torch.mean(dense16(self), dim, keepdim, dtype=dt(dtype)),
   dim_reduction_cases(allow_int=False), dim_reduction_sampler())
op("amax", ("self",), lambda self, dim=(), keepdim=False: torch.amax(self, dim, keepdim),
   [C("all", [T(3, 4, fill="distinct")]), C("dim1", [T(3, 4, fill="distinct", layout="transposed")], dim=[1]),
    C("dims_keepdim", [T(2, 3, 4, dtype=F64, fill="distinct")], dim=[0, 2], keepdim=True),
    C("ties", [T(4, 6, fill="small_int")], dim=[1]), C("ties_all", [T(3, 3, dtype=F64, fill="small_int")]),
    C("bf16", [T(4, 5, dtype=BF16, fill="distinct")], dim=[-1]),
    C("f16", [T(4, 5, dtype=F16, fill="distinct")], dim=[0]),
    C("int64", [T(3, 4, dtype=I64)], dim=[1]), C("bool", [T(3, 4, dtype=BOOL)], dim=[0]),
    C("0d", [T()]), C("empty_kept", [T(0, 3)], dim=[1]),
    C("empty_reduced", [T(0, 3)], dim=[0], error=True)],
   lambda r: (lambda s: ([rT(r, s, r.choice(FLOATS), fill=r.choice(["distinct", "small_int"]))],
                         {"dim": r_dims(r, len(s)), "keepdim": r.random() < 0.5}))(r_shape(r, lo=1)))
op("argmax", ("self",), lambda self, dim=None, keepdim=False: torch.argmax(self, dim, keepdim),
   [C("all", [T(3, 4, fill="distinct")]), C("dim1", [T(3, 4, fill="distinct", layout="transposed")], dim=1),
    C("dim0_keepdim", [T(3, 4, dtype=F64, fill="distinct")], dim=0, keepdim=True),
    C("ties_first", [T(4, 6, fill="small_int")], dim=1), C("neg_dim", [T(2, 3, 4, dtype=BF16, fill="distinct")], dim=-1),
    C("int64", [T(3, 4, dtype=I64)], dim=1), C("0d", [T()]), C("empty", [T(0)], error=True)],
   lambda r: (lambda s: ([rT(r, s, r.choice(FLOATS + (I64,)), fill="small_int")],
                         {"dim": r.randrange(-len(s), len(s)) if s else None, "keepdim": r.random() < 0.5}))(r_shape(r, lo=1)))


# ---- softmax --------------------------------------------------------------------------------
def softmax_cases():
    return [C("last", [T(3, 5)], dim=-1), C("dim0_transposed", [T(4, 3, dtype=F64, layout="transposed")], dim=0),
            C("dim1_3d_permuted", [T(2, 3, 4, layout="permuted")], dim=1),
            C("bf16", [T(3, 6, dtype=BF16)], dim=1), C("f16", [T(3, 6, dtype=F16)], dim=-1),
            C("large", [T(2, 8, fill="large")], dim=1), C("f32_to_f64", [T(3, 4)], dim=1, dtype=F64),
            C("int64_to_f32", [T(2, 3, dtype=I64)], dim=1, dtype=F32),
            C("0d", [T()], dim=0), C("empty", [T(0, 3)], dim=1), C("empty_dim", [T(3, 0)], dim=1)]


def softmax_sampler(r):
    s = r_shape(r, min_rank=1)
    return [rT(r, s, r.choice(FLOATS))], {"dim": r.randrange(-len(s), len(s))}


op("softmax", ("self",), lambda self, dim, dtype=None: torch.softmax(self, dim, dtype=dt(dtype)),
   softmax_cases(), softmax_sampler)
# oneDNN's float32 log_softmax (ferry's CPU kernel) is within about 4e-6 of the exact value
# where PyTorch's is within 7e-7, and its backward's exp is as loose (seen as 6e-6 after the
# cancellation in g - exp(y) * sum(g)): its ops get eight times the float32 tolerance.
LOG_SOFTMAX_TOL = 8
op("log_softmax", ("self",), lambda self, dim, dtype=None: torch.log_softmax(self, dim, dtype=dt(dtype)),
   softmax_cases(), softmax_sampler, tol=LOG_SOFTMAX_TOL)
