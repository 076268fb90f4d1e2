# The registry of the reference comparison: one Op per operator (its PyTorch call, its argument
# names as in PyTorch's schema, its fixed cases and a sampler of random cases for the sweep), and
# the helpers the case files use. cases_math.py and cases_nn.py register the operators; the C++
# side (tests/reference/op_table.cc) has one entry per operator name registered here.
import random

F64, F32, F16, BF16 = "float64", "float32", "float16", "bfloat16"
I64, I32, I16, I8, U8, BOOL = "int64", "int32", "int16", "int8", "uint8", "bool"
FLOATS = (F32, F64, BF16, F16)
INTS = (I64, I32, I16, I8, U8)


class Op:
    def __init__(self, fn, args, cases, sample=None, strides=False, tol=None):
        self.tol = tol          # default tolerance factor of its cases (a case's own wins)
        self.fn = fn            # PyTorch: fn(*inputs, **params) -> Tensor or sequence of Tensors
        self.args = args        # PyTorch's argument names; a trailing "name[]" takes the rest
        self.cases = cases      # fixed cases, run in CI
        self.sample = sample    # sample(random.Random) -> (inputs, params), for the sweep
        self.strides = strides  # compare output strides and aliasing (views, layouts)

    def arg_names(self, n):
        names = []
        for i in range(n):
            last = self.args[-1]
            if last.endswith("[]") and i >= len(self.args) - 1:
                names.append(last[:-2])
            else:
                names.append(self.args[i])
        return names


OPS = {}


def op(name, args, fn, cases, sample=None, strides=False, tol=None):
    """Registers an operator; `name` is the key the C++ op table uses."""
    assert name not in OPS, name
    OPS[name] = Op(fn, args, cases, sample, strides, tol)


def T(*shape, dtype=F32, layout=None, fill=None, grad=None, device=None, low=None, high=None,
      ignore=None, mutated=None):
    """An input: its shape and dtype, how its values are drawn (fill), the view its data is seen
    through (layout), whether it requires grad (default: floating), device "cpu" to stay on the
    CPU when the case runs on a device (a 0-d tensor as a number), mutated: compare it after;
    fill "index" draws from [low, high), some set to `ignore`."""
    spec = {"shape": list(shape), "dtype": dtype}
    for k, v in (("layout", layout), ("fill", fill), ("grad", grad), ("device", device),
                 ("low", low), ("high", high), ("ignore", ignore), ("mutated", mutated)):
        if v is not None:
            spec[k] = v
    return spec


def C(name, inputs, tol=None, error=False, strides=None, **params):
    """A case: inputs (None for an omitted optional tensor), params as the op's keywords; tol
    multiplies the dtype's tolerance; error: PyTorch raises, so ferry must raise too."""
    case = {"name": name, "inputs": inputs, "params": params}
    if tol is not None:
        case["tol"] = tol
    if error:
        case["expect_error"] = True
    if strides is not None:
        case["strides"] = strides
    return case


def all_cases(sweep, seed_of):
    """The fixed cases of every operator, then `sweep` sampled cases per operator that has a
    sampler; each with its seed. The first case of each operator also runs under sim chaos."""
    cases = []
    for name, o in OPS.items():
        own = [dict(c, name=f"{name}/{c['name']}") for c in o.cases]
        for i in range(sweep if o.sample else 0):
            seed = seed_of(f"{name}/sweep{i}")
            inputs, params = o.sample(random.Random(seed))
            own.append({"name": f"{name}/sweep{i}", "inputs": inputs, "params": params})
        for i, c in enumerate(own):
            c["op"] = name
            if o.tol is not None:
                c.setdefault("tol", o.tol)
            c.setdefault("seed", seed_of(c["name"]))
            c["chaos"] = i == 0
            c.setdefault("strides", o.strides)
        cases += own
    return cases


# ---- samplers -------------------------------------------------------------------------------
def r_size(r, lo=1, hi=5):
    return 0 if r.random() < 0.04 else r.randint(lo, hi)


def r_shape(r, min_rank=0, max_rank=4, lo=1, hi=5):
    return [r_size(r, lo, hi) for _ in range(r.randint(min_rank, max_rank))]


def r_layout(r, shape):
    opts = ["contiguous"] * 3
    if len(shape) >= 1:
        opts += ["sliced", "expanded"]
    if len(shape) >= 2:
        opts += ["transposed", "permuted"]
    if len(shape) == 4:
        opts.append("channels_last")
    return r.choice(opts)


def rT(r, shape, dtype=F32, layout=None, **kw):
    """A random-layout input (layout given: that one)."""
    return T(*shape, dtype=dtype, layout=layout or r_layout(r, shape), **kw)


def r_bcast(r, max_rank=4):
    """Two shapes that broadcast: trailing parts of one shape, some sizes set to 1."""
    out = r_shape(r, 0, max_rank)

    def part():
        s = out[len(out) - r.randint(0, len(out)):]
        return [1 if r.random() < 0.25 else d for d in s]
    return part(), part()


def r_dims(r, rank):
    """A random non-empty subset of dims, some given negative."""
    if rank == 0:
        return [0] if r.random() < 0.5 else []
    dims = sorted(r.sample(range(rank), r.randint(1, rank)))
    return [d - rank if r.random() < 0.3 else d for d in dims]


def r_float_pair(r):
    return r.choice([(F32, F32), (F64, F64), (BF16, BF16), (F16, F16), (F32, F64), (I64, F32),
                     (F32, I32), (BF16, F32), (F16, F64), (I64, I64), (BOOL, F32), (U8, I16)])
