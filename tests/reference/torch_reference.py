#!/usr/bin/python3
# The PyTorch side of ferry's reference comparison: for every case in reference_ops.py it
# draws the inputs from the case's seed, runs PyTorch forward and backward (with a random
# grad_output) and writes inputs, outputs and input gradients to one safetensors file per case,
# the case itself in the header's __metadata__. Run with Debian's /usr/bin/python3 (python3-torch).
#
#   torch_reference.py --out DIR --seed S [--sweep N] [--only op,op]
#
# Exit status: 0 written, 3 torch cannot be imported (the C++ suite then skips), 1 anything else.
import argparse
import hashlib
import json
import os
import struct
import sys

try:
    import torch
except ImportError as e:  # the C++ suite turns this into a skip that names the reason
    print(f"torch_reference: cannot import torch ({e}); install python3-torch", file=sys.stderr)
    sys.exit(3)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_ops  # noqa: E402
import cases_math  # noqa: E402,F401  (each registers its operators in reference_ops.OPS)
import cases_views  # noqa: E402,F401
import cases_nn  # noqa: E402,F401

DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
SAFETENSORS = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
    "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
}
FLOATING = ("float64", "float32", "float16", "bfloat16")


def case_seed(base, name):
    """The seed of one case: the run's base seed mixed with the case's name."""
    digest = hashlib.sha256(f"{base}:{name}".encode()).hexdigest()
    return int(digest[:15], 16)


# ---- safetensors ----------------------------------------------------------------------------
def tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata):
    """8-byte little-endian header length, the JSON header, then the raw data in order."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t)
        header[name] = {"dtype": SAFETENSORS[NAMES[t.dtype]], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


# ---- inputs ---------------------------------------------------------------------------------
def base_shape(shape, layout):
    """The shape of the contiguous tensor that `layout` turns into a view of `shape`."""
    s = list(shape)
    if layout == "contiguous":
        return s
    if layout == "transposed":
        return s[:-2] + [s[-1], s[-2]]
    if layout == "permuted":
        return s[::-1]
    if layout == "sliced":
        return s[:-1] + [2 * s[-1] + 1]
    if layout == "expanded":
        return [1] + s[1:]
    if layout == "channels_last":
        return [s[0], s[2], s[3], s[1]]
    raise ValueError(f"unknown layout {layout}")


def apply_layout(base, shape, layout):
    """The view the C++ side makes the same way (reference_harness.cc, apply_layout)."""
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.transpose(-2, -1)
    if layout == "permuted":
        return base.permute(*reversed(range(base.dim())))
    if layout == "sliced":
        return base[..., 1::2]
    if layout == "expanded":
        return base.expand(*shape)
    if layout == "channels_last":
        return base.permute(0, 3, 1, 2)
    raise ValueError(f"unknown layout {layout}")


def draw(spec, shape, gen):
    """Values for one input, drawn in float64/int64 and then converted to its dtype."""
    dtype = spec["dtype"]
    fill = spec.get("fill") or ("bool" if dtype == "bool" else
                                "normal" if dtype in FLOATING else "int")
    n = 1
    for s in shape:
        n *= s
    f64 = dict(dtype=torch.float64, generator=gen)
    if fill == "bool":
        v = torch.rand(shape, **f64) < 0.5
    elif fill == "normal":
        v = torch.randn(shape, **f64)
    elif fill == "positive":
        v = torch.rand(shape, **f64) * 1.5 + 0.5
    elif fill == "nonzero":
        sign = torch.randint(0, 2, shape, generator=gen) * 2 - 1
        if dtype in FLOATING:
            v = (torch.rand(shape, **f64) * 1.5 + 0.5) * sign
        else:
            v = torch.randint(1, 6, shape, generator=gen) * (sign if dtype != "uint8" else 1)
    elif fill == "large":  # softmax's stability
        v = torch.randn(shape, **f64) * 30
    elif fill == "unit":  # (0, 1): probabilities and outputs of sigmoid
        v = torch.rand(shape, **f64) * 0.98 + 0.01
    elif fill == "with_zeros":  # a quarter exact zeros: relu's, abs' and sign's gradient at 0
        v = torch.randn(shape, **f64) * (torch.rand(shape, **f64) >= 0.25)
    elif fill == "small_int":  # ties, for comparisons and max
        v = torch.randint(-3, 4, shape, generator=gen)
    elif fill == "distinct":  # no ties (argmax, max_pool): exact in every floating dtype
        v = (torch.randperm(n, generator=gen).reshape(shape) - n // 2) * 0.25
    elif fill == "int":
        low = 0 if dtype == "uint8" else -5
        v = torch.randint(low, 6, shape, generator=gen)
    elif fill == "index":  # class indices and embedding rows in [0, high), some set to `ignore`
        v = torch.randint(spec.get("low", 0), spec["high"], shape, generator=gen)
        if "ignore" in spec and n > 0:
            v = torch.where(torch.rand(shape, **f64) < 0.3, torch.tensor(spec["ignore"]), v)
    else:
        raise ValueError(f"unknown fill {fill}")
    return v.to(DTYPES[dtype])


def wants_grad(spec):
    return spec.get("grad", spec["dtype"] in FLOATING)


# ---- running one case -----------------------------------------------------------------------
def storage_ptr(t):
    return t.storage().data_ptr()


def low_precision_error(e):
    """The dtype a "not implemented for 'Half'/'BFloat16'" error names, else None."""
    for name, dtype in (("'Half'", torch.float16), ("'BFloat16'", torch.bfloat16)):
        if f"not implemented for {name}" in str(e):
            return dtype
    return None


def run_torch(op, case, bases, upcast=None):
    """Forward and backward on fresh leaves. upcast: a dtype PyTorch's CPU kernels lack (1.13
    has few float16 ops): its inputs are computed in float32 and the results rounded back once,
    as PyTorch's CUDA kernels do. Returns the tensors to write and the outputs' details."""
    views = []
    for spec, base in zip(case["inputs"], bases):
        if spec is None:
            views.append(None)
            continue
        leaf = base.clone().requires_grad_(wants_grad(spec))
        views.append(apply_layout(leaf, spec["shape"], spec.get("layout", "contiguous")))
    params = case.get("params", {})
    args = [v.float() if upcast and v is not None and v.dtype == upcast else v for v in views]
    out = op.fn(*args, **params)
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    wider = any(v is not None and v.dtype in (torch.float32, torch.float64) for v in views)
    if upcast and not wider and "dtype" not in params:
        outs = [o.to(upcast) if o.dtype == torch.float32 else o for o in outs]
    tensors, info = {}, []
    first = next((v for v in views if v is not None), None)
    for i, o in enumerate(outs):
        tensors[f"out.{i}"] = o.detach().clone()
        info.append({"strides": list(o.stride()), "offset": o.storage_offset(),
                     "requires_grad": o.requires_grad,
                     "aliases_input": first is not None and o.numel() > 0 and
                     storage_ptr(o) == storage_ptr(first)})
    for k, (spec, v) in enumerate(zip(case["inputs"], views)):
        if spec is not None and spec.get("mutated"):
            tensors[f"after.{k}"] = v.detach().clone()
    # Backward, with a random gradient for every output that requires grad (drawn from its own
    # generator, so that a second attempt with upcast draws the same).
    gen = torch.Generator().manual_seed(case["seed"] + 1)
    diff_outs = [(i, o) for i, o in enumerate(outs) if o.requires_grad]
    grad_inputs = [(k, v) for k, v in enumerate(views) if v is not None and v.requires_grad]
    if diff_outs and grad_inputs:
        grad_outs = []
        for i, o in diff_outs:
            g = torch.randn(o.shape, dtype=torch.float64, generator=gen).to(o.dtype)
            tensors[f"grad_out.{i}"] = g
            grad_outs.append(g)
        grads = torch.autograd.grad([o for _, o in diff_outs], [v for _, v in grad_inputs],
                                    grad_outs, allow_unused=True)
        for (k, _), g in zip(grad_inputs, grads):
            if g is not None:
                tensors[f"grad.{k}"] = g.detach().clone()
    return tensors, info


def run_case(op, case, path):
    gen = torch.Generator().manual_seed(case["seed"])
    bases = [None if s is None else draw(s, base_shape(s["shape"], s.get("layout", "contiguous")), gen)
             for s in case["inputs"]]
    tensors = {f"in.{k}": b for k, b in enumerate(bases) if b is not None}
    meta = {"torch": torch.__version__}
    upcast = None
    try:
        try:
            results, info = run_torch(op, case, bases)
        except RuntimeError as e:
            upcast = low_precision_error(e)
            if upcast is None:
                raise
            results, info = run_torch(op, case, bases, upcast)
    except Exception as e:  # noqa: BLE001 - any PyTorch error is the expected result here
        if "/sweep" in case["name"]:  # a sampled case PyTorch rejects: ferry must reject it too
            case["expect_error"] = True
        if not case.get("expect_error"):
            raise RuntimeError(f"case {case['name']}: PyTorch raised {type(e).__name__}: {e}") from e
        meta["error"] = f"{type(e).__name__}: {e}"
        meta["case"] = json.dumps(case)
        write_safetensors(path, tensors, meta)
        return
    if case.get("expect_error"):
        raise RuntimeError(f"case {case['name']}: expected an error, PyTorch raised none")
    meta["case"] = json.dumps(case)
    meta["via_float32"] = "1" if upcast else "0"
    meta["outputs"] = json.dumps(info)
    tensors.update(results)
    write_safetensors(path, tensors, meta)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory for the case files")
    parser.add_argument("--seed", type=int, default=0, help="the run's base seed")
    parser.add_argument("--sweep", type=int, default=0,
                        help="random cases per operator beyond the fixed ones")
    parser.add_argument("--only", default="", help="comma-separated operators to run")
    a = parser.parse_args()
    torch.set_num_threads(1)  # deterministic reductions and a fair share of the 2 cores
    only = set(filter(None, a.only.split(",")))
    os.makedirs(a.out, exist_ok=True)
    cases = reference_ops.all_cases(a.sweep, lambda name: case_seed(a.seed, name))
    manifest = {"torch": torch.__version__, "seed": a.seed, "sweep": a.sweep,
                "ops": sorted(reference_ops.OPS), "cases": []}
    for n, case in enumerate(cases):
        if only and case["op"] not in only:
            continue
        op = reference_ops.OPS[case["op"]]
        case["args"] = op.arg_names(len(case["inputs"]))
        file = f"{n:05d}.safetensors"
        run_case(op, case, os.path.join(a.out, file))
        manifest["cases"].append({"name": case["name"], "op": case["op"], "file": file,
                                  "seed": case["seed"]})
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"torch_reference: torch {torch.__version__}, {len(manifest['cases'])} cases of "
          f"{len(reference_ops.OPS)} operators (seed {a.seed}, sweep {a.sweep}) in {a.out}")


if __name__ == "__main__":
    main()
