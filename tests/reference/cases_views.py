# Reference cases for the views, the conversions and the dispatched backward helpers (the
# operators autograd formulas call, which must themselves be right and differentiable). View
# cases also compare strides, storage offsets and whether the output aliases its input.
import torch

from reference_ops import (BF16, BOOL, F16, F32, F64, FLOATS, I64, C, T, op, r_shape, rT)


def aten(name):
    return getattr(torch.ops.aten, name)


# ---- backward helpers -----------------------------------------------------------------------
op("threshold_backward", ("grad_output", "self"), aten("threshold_backward"),
   [C("f32", [T(3, 4), T(3, 4, fill="with_zeros")], threshold=0),
    C("f64_half", [T(3, 4, dtype=F64, layout="transposed"), T(3, 4, dtype=F64)], threshold=0.5),
    C("bf16", [T(5, dtype=BF16), T(5, dtype=BF16, fill="with_zeros")], threshold=0)],
   lambda r: (lambda s, d: ([rT(r, s, d), rT(r, s, d, fill="with_zeros")], {"threshold": r.choice([0, 0.5])}))(
       r_shape(r), r.choice(FLOATS)))
for name in ("sigmoid_backward", "tanh_backward"):
    op(name, ("grad_output", "output"), aten(name),
       [C("f32", [T(3, 4), T(3, 4, fill="unit")]),
        C("f64_sliced", [T(3, 4, dtype=F64), T(3, 4, dtype=F64, fill="unit", layout="sliced")]),
        C("bf16", [T(5, dtype=BF16), T(5, dtype=BF16, fill="unit")]),
        C("f16", [T(5, dtype=F16), T(5, dtype=F16, fill="unit")])],
       lambda r: (lambda s, d: ([rT(r, s, d), rT(r, s, d, fill="unit")], {}))(r_shape(r), r.choice(FLOATS)))
op("gelu_backward", ("grad_output", "self"),
   lambda g, s, approximate="none": aten("gelu_backward")(g, s, approximate=approximate),
   [C("f32", [T(3, 4), T(3, 4)]), C("f32_tanh", [T(3, 4), T(3, 4, layout="transposed")], approximate="tanh"),
    C("f64", [T(5, dtype=F64), T(5, dtype=F64)]), C("bf16_tanh", [T(5, dtype=BF16), T(5, dtype=BF16)], approximate="tanh")],
   lambda r: (lambda s, d: ([rT(r, s, d), rT(r, s, d)], {"approximate": r.choice(["none", "tanh"])}))(
       r_shape(r), r.choice(FLOATS)))
# PyTorch 1.13's CPU kernel reads a non-contiguous `output` as if it were contiguous (wrong
# gradients; fixed upstream in pytorch/pytorch#139740), so the reference gets a dense copy of it
# while ferry still gets the strided one.
for name in ("_softmax_backward_data", "_log_softmax_backward_data"):
    op(name, ("grad_output", "output"),
       lambda g, o, dim, _f=aten(name): _f(g, o.contiguous(), dim, o.dtype),
       [C("f32", [T(3, 5), T(3, 5, fill="unit")], dim=1),
        C("f64_dim0", [T(4, 3, dtype=F64), T(4, 3, dtype=F64, fill="unit", layout="transposed")], dim=0),
        C("bf16", [T(2, 6, dtype=BF16), T(2, 6, dtype=BF16, fill="unit")], dim=-1)],
       lambda r: (lambda s, d: ([rT(r, s, d), rT(r, s, d, fill="unit")], {"dim": r.randrange(len(s))}))(
           r_shape(r, min_rank=1), r.choice(FLOATS)))
op("slice_backward", ("grad_output",), aten("slice_backward"),
   [C("f32", [T(3, 4)], input_sizes=[3, 9], dim=1, start=1, end=9, step=2),
    C("f64_dim0", [T(2, 5, dtype=F64, layout="transposed")], input_sizes=[6, 5], dim=0, start=3, end=5, step=1)])
op("select_backward", ("grad_output",), aten("select_backward"),
   [C("f32", [T(3, 4)], input_sizes=[3, 5, 4], dim=1, index=2),
    C("bf16_first", [T(5, dtype=BF16)], input_sizes=[2, 5], dim=0, index=0)])


# ---- views ----------------------------------------------------------------------------------
def view_op(name, fn, cases, sample=None):
    op(name, ("self",), fn, cases, sample, strides=True)


def r_input(r, min_rank=0, max_rank=4, layout=None, lo=1):
    s = r_shape(r, min_rank, max_rank, lo=lo)
    return s, rT(r, s, r.choice(FLOATS + (I64,)), layout=layout)


def sample_shape_change(r, contiguous):
    """An input and a shape with its element count: neighbours merged, one size inferred."""
    s, x = r_input(r, layout="contiguous" if contiguous else None)
    shape = list(s)
    if len(shape) >= 2 and r.random() < 0.5:
        i = r.randrange(len(shape) - 1)
        shape[i:i + 2] = [shape[i] * shape[i + 1]]
    if shape and 0 not in shape and r.random() < 0.5:
        shape[r.randrange(len(shape))] = -1
    return x, shape


def sample_select(r):
    s, x = r_input(r, 1)
    d = r.randrange(len(s))
    return [x], {"dim": d, "index": r.randrange(-s[d], s[d])} if s[d] else {"dim": d, "index": 0}


def sample_slice(r):
    s, x = r_input(r, 1)
    return [x], {"dim": r.randrange(len(s)), "start": r.randint(-3, 3),
                 "end": r.choice([None, r.randint(-3, 6)]), "step": r.randint(1, 3)}


view_op("view", lambda self, size: self.view(size),
        [C("merge", [T(2, 3, 4)], size=[6, 4]), C("infer", [T(2, 3, 4, dtype=F64)], size=[-1]),
         C("split", [T(12)], size=[3, 2, 2]), C("0d_to_1", [T()], size=[1]), C("to_0d", [T(1, 1)], size=[]),
         C("empty", [T(0, 3)], size=[3, 0]), C("transposed_fails", [T(3, 4, layout="transposed")], size=[12], error=True),
         C("sliced_keeps_dims", [T(3, 4, layout="sliced")], size=[3, 2, 2]),
         C("bad_numel", [T(3, 4)], size=[5, 2], error=True)],
        lambda r: (lambda x, shape: ([x], {"size": shape}))(*sample_shape_change(r, True)))
view_op("reshape", lambda self, shape: self.reshape(shape),
        [C("view_possible", [T(2, 3, 4)], shape=[6, -1]), C("copy_needed", [T(3, 4, layout="transposed")], shape=[12]),
         C("sliced_copy", [T(3, 4, dtype=F64, layout="sliced")], shape=[12]),
         C("expanded", [T(3, 4, layout="expanded")], shape=[2, 6]), C("0d", [T()], shape=[1, 1])],
        lambda r: (lambda x, shape: ([x], {"shape": shape}))(*sample_shape_change(r, False)))
view_op("permute", lambda self, dims: self.permute(dims),
        [C("3d", [T(2, 3, 4)], dims=[2, 0, 1]), C("neg_dims", [T(2, 3, 4, dtype=F64, layout="sliced")], dims=[-1, -3, -2]),
         C("bf16_transposed", [T(3, 4, dtype=BF16, layout="transposed")], dims=[1, 0]),
         C("0d", [T()], dims=[]), C("repeated", [T(2, 3)], dims=[0, 0], error=True)],
        lambda r: (lambda s, x: ([x], {"dims": r.sample(range(len(s)), len(s))}))(*r_input(r)))
view_op("transpose", lambda self, dim0, dim1: self.transpose(dim0, dim1),
        [C("01", [T(3, 4)], dim0=0, dim1=1), C("neg", [T(2, 3, 4, layout="permuted")], dim0=-1, dim1=-3),
         C("same", [T(2, 3)], dim0=1, dim1=1), C("0d", [T()], dim0=0, dim1=-1)],
        lambda r: (lambda s, x: ([x], {"dim0": r.randrange(len(s)), "dim1": r.randrange(len(s))}))(*r_input(r, 1)))
view_op("t", lambda self: self.t(), [C("2d", [T(3, 4)]), C("1d", [T(4)]), C("0d", [T()])])
view_op("slice", lambda self, dim=0, start=None, end=None, step=1: aten("slice")(self, dim, start, end, step),
        [C("step2", [T(3, 8)], dim=1, start=1, end=7, step=2),
         C("neg_start", [T(6, 3, dtype=F64, layout="transposed")], dim=0, start=-4),
         C("end_clamped", [T(5, 2)], dim=0, start=2, end=100), C("empty_range", [T(5)], start=4, end=2),
         C("neg_dim", [T(2, 3, 9, dtype=BF16, layout="sliced")], dim=-1, start=0, end=None, step=3)],
        sample_slice)
view_op("narrow", lambda self, dim, start, length: self.narrow(dim, start, length),
        [C("mid", [T(4, 6)], dim=1, start=2, length=3), C("neg_start", [T(5, 2, dtype=F64)], dim=0, start=-3, length=2),
         C("too_long", [T(4)], dim=0, start=2, length=3, error=True)])
view_op("select", lambda self, dim, index: self.select(dim, index),
        [C("row", [T(3, 4)], dim=0, index=1), C("neg_index", [T(3, 4, 5, dtype=F64, layout="permuted")], dim=1, index=-1),
         C("to_0d", [T(4)], dim=0, index=3), C("out_of_range", [T(3)], dim=0, index=3, error=True)],
        sample_select)
view_op("expand", lambda self, size: self.expand(size),
        [C("new_dims", [T(3, 1)], size=[2, 3, 4]), C("keep", [T(1, 4, dtype=F64, layout="sliced")], size=[3, -1]),
         C("0d", [T()], size=[2, 2]), C("bad", [T(3)], size=[4], error=True)])
view_op("unsqueeze", lambda self, dim: self.unsqueeze(dim),
        [C("front", [T(3, 4)], dim=0), C("neg", [T(3, 4, layout="transposed")], dim=-1), C("0d", [T()], dim=0)])
view_op("squeeze", lambda self: self.squeeze(), [C("some", [T(1, 3, 1, 2)]), C("none", [T(2, 3)]), C("all", [T(1, 1)])])
view_op("squeeze_dim", lambda self, dim: self.squeeze(dim),
        [C("one", [T(3, 1, 2)], dim=1), C("not_one", [T(3, 2)], dim=0), C("neg", [T(2, 1, dtype=F64, layout="sliced")], dim=-1)])
view_op("flatten", lambda self, start_dim=0, end_dim=-1: self.flatten(start_dim, end_dim),
        [C("all", [T(2, 3, 4)]), C("middle", [T(2, 3, 4, 5)], start_dim=1, end_dim=2),
         C("transposed_copy", [T(3, 4, layout="transposed")]), C("0d", [T()])])
view_op("as_strided", lambda self, size, stride, storage_offset=None: self.as_strided(size, stride, storage_offset),
        [C("sub_block", [T(4, 5)], size=[2, 2], stride=[5, 1], storage_offset=6),
         C("transposing", [T(3, 4, dtype=F64)], size=[4, 3], stride=[1, 4])])
view_op("alias", lambda self: aten("alias")(self), [C("f32", [T(3, 4, layout="transposed")])])
view_op("contiguous", lambda self: self.contiguous(),
        [C("already", [T(3, 4)]), C("transposed", [T(3, 4, layout="transposed")]),
         C("sliced_bf16", [T(2, 5, dtype=BF16, layout="sliced")]), C("expanded", [T(3, 4, layout="expanded")])],
        lambda r: (lambda s, x: ([x], {}))(*r_input(r)))
view_op("clone", lambda self: self.clone(),
        [C("contiguous", [T(3, 4)]), C("transposed_preserved", [T(3, 4, layout="transposed")]),
         C("channels_last", [T(2, 3, 2, 2, layout="channels_last")]), C("sliced", [T(3, 4, layout="sliced")]),
         C("int64", [T(4, dtype=I64)])],
        lambda r: (lambda s, x: ([x], {}))(*r_input(r)))
view_op("to_dtype", lambda self, dtype: self.to(getattr(torch, dtype)),
        [C("f32_f64", [T(3, 4)], dtype=F64), C("f32_bf16", [T(3, 4, layout="transposed")], dtype=BF16),
         C("f64_f16", [T(5, dtype=F64)], dtype=F16), C("f64_int64", [T(5, dtype=F64)], dtype=I64),
         C("f32_bool", [T(5, fill="with_zeros")], dtype=BOOL), C("int64_f32", [T(4, dtype=I64)], dtype=F32),
         C("same", [T(3)], dtype=F32)],
        lambda r: (lambda s, x: ([x], {"dtype": r.choice(FLOATS + (I64,))}))(*r_input(r)))
