"""ferry.Tensor from Python: dtypes, devices, factories, views, indexing, to/copy_, repr and the
error mapping. Values are checked against numpy doing the same thing."""

import itertools

import numpy as np
import pytest

import ferry


def test_version_and_module():
    assert isinstance(ferry.__version__, str) and ferry.__version__.count(".") == 2
    assert ferry.Tensor.__module__.startswith("ferry")


def test_dtypes_are_singletons_with_torch_aliases():
    t = ferry.zeros(2, dtype=ferry.float)
    assert t.dtype is ferry.float32
    assert ferry.half is ferry.float16 and ferry.long is ferry.int64 and ferry.double is ferry.float64
    assert repr(ferry.bfloat16) == "ferry.bfloat16"
    assert ferry.bfloat16.itemsize == 2 and ferry.bfloat16.is_floating_point
    assert ferry.complex64.is_complex and not ferry.uint8.is_signed
    # Other spellings of a dtype are accepted wherever one is taken.
    assert ferry.zeros(1, dtype="bf16").dtype is ferry.bfloat16
    assert ferry.zeros(1, dtype=np.float16).dtype is ferry.float16
    assert ferry.zeros(1, dtype=np.dtype("int16")).dtype is ferry.int16
    assert ferry.zeros(1, dtype=bool).dtype is ferry.bool
    with pytest.raises(ferry.DTypeError, match="float33"):
        ferry.zeros(1, dtype="float33")


def test_torch_dtypes_and_devices_are_accepted(torch):
    t = ferry.zeros(3, dtype=torch.bfloat16, device=torch.device("cpu"))
    assert t.dtype is ferry.bfloat16 and t.device == "cpu"


def test_devices():
    devices = ferry.devices()
    assert devices[0] == ferry.device("cpu")
    assert ferry.device("sim:1") in devices
    assert ferry.device_count("sim") == sum(d.type == "sim" for d in devices)
    d = ferry.device("sim:1")
    assert (d.type, d.index, str(d), repr(d)) == ("sim", 1, "sim:1", "device(type='sim', index=1)")
    assert ferry.device("cpu:0").index == 0 and ferry.device("cpu").index is None
    assert ferry.device("cpu:0") == ferry.device("cpu") == "cpu"
    assert hash(ferry.device("cpu:0")) == hash(ferry.device("cpu"))
    assert ferry.device("sim", 0) == "sim:0"
    with pytest.raises(ferry.DeviceError, match="gpu"):
        ferry.device("gpu:0")


def test_factories_take_sizes_either_way():
    assert ferry.empty(2, 3).shape == (2, 3)
    assert ferry.empty((2, 3)).shape == (2, 3)
    assert ferry.zeros([4]).shape == (4,)
    assert ferry.ones(2, dtype=ferry.int8).tolist() == [1, 1]
    assert ferry.full((2,), 7.5).tolist() == [7.5, 7.5]
    assert ferry.arange(5).dtype is ferry.int64
    assert ferry.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    r = ferry.rand(1000)
    assert r.dtype is ferry.float32 and 0 <= r.numpy().min() and r.numpy().max() < 1
    i = ferry.randint(3, 10, (100,))
    assert i.dtype is ferry.int64 and set(i.tolist()) <= set(range(3, 10))
    assert ferry.empty(2, 3, 4, 5, memory_format=ferry.channels_last).stride() == (60, 1, 15, 3)
    assert ferry.zeros_like(ferry.ones(2, 2, dtype=ferry.half)).dtype is ferry.half
    with pytest.raises(TypeError):
        ferry.empty(2.5)
    with pytest.raises(ferry.ShapeError):
        ferry.empty(-1)


def test_views_share_memory():
    t = ferry.arange(24, dtype=ferry.float32).view(2, 3, 4)
    p = t.permute(2, 0, 1)
    assert p.shape == (4, 2, 3) and p.stride() == (1, 12, 4)
    assert p.is_alias_of(t) and not p.is_contiguous()
    assert t.transpose(0, 2).shape == (4, 3, 2)
    assert t.T.shape == (4, 3, 2)
    assert t.narrow(2, 1, 2).shape == (2, 3, 2)
    assert t.select(1, 2).tolist() == [[8, 9, 10, 11], [20, 21, 22, 23]]
    assert t[0, :, 0].unsqueeze(1).expand(3, 5).stride() == (4, 0)
    assert ferry.zeros(1, 3, 1).squeeze().shape == (3,)
    assert ferry.zeros(1, 3, 1).squeeze(0).shape == (3, 1)
    assert t.flatten(1).shape == (2, 12)
    s = t.as_strided((2, 2), (1, 2), 3)
    assert s.storage_offset() == 3 and s.tolist() == [[3, 5], [4, 6]]
    p[0, 0, 0] = -1.0
    assert t[0, 0, 0].item() == -1.0


KEYS = [
    0, -1, 2, slice(None), slice(1, None), slice(None, None, 2), slice(-3, -1), slice(5, 1),
    (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 1), (0, None, slice(None, None, 3)),
    (Ellipsis,), (1, Ellipsis, None), (slice(0, 3, 2), slice(None), -2), (-2, -3, -4),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_indexing_matches_numpy(key):
    a = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    t = ferry.tensor(a)
    view = t[key]
    expected = a[key]
    assert view.shape == expected.shape
    assert np.array_equal(view.numpy(), expected)
    assert view.is_alias_of(t)


def test_indexing_errors_and_iteration():
    t = ferry.arange(6).view(2, 3)
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(ferry.IndexError, match=r"\[-2, 1\]"):
        t[-3]
    with pytest.raises(IndexError, match="advanced indexing"):
        t[[0, 1]]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(ValueError, match="step"):
        t[::-1]
    rows = [r.tolist() for r in t]  # iteration ends on IndexError
    assert rows == [[0, 1, 2], [3, 4, 5]]
    assert len(t) == 2
    with pytest.raises(TypeError):
        len(ferry.tensor(1.0))


def test_setitem_fills_and_copies():
    t = ferry.zeros(3, 4)
    t[0] = 1.5
    t[1, 1:3] = ferry.tensor([7.0, 8.0])
    t[2] = [1, 2, 3, 4]
    t[:, 3] = ferry.tensor(9.0)  # broadcast
    assert t.tolist() == [[1.5, 1.5, 1.5, 9.0], [0, 7, 8, 9.0], [1, 2, 3, 9.0]]


def test_to_copy_and_contiguous():
    a = ferry.arange(12, dtype=ferry.float32).view(3, 4)
    assert a.to(ferry.float32) is a  # nothing changes: the tensor itself
    b = a.to(ferry.bfloat16)
    assert b.dtype is ferry.bfloat16 and b.tolist() == a.tolist()
    s = a.t().to("sim:0")
    assert s.device == "sim:0" and s.stride() == (1, 4)  # layout preserved
    assert s.contiguous().stride() == (3, 1)
    assert s.to("cpu", ferry.float64).tolist() == a.t().tolist()
    assert a.to(device="sim:1", dtype=ferry.half).device == ferry.device("sim:1")
    assert a.to(s).device == "sim:0"
    assert a.to(ferry.float32, copy=True) is not a
    c = a.clone(memory_format=ferry.contiguous_format)
    assert not c.is_alias_of(a)
    dst = ferry.empty(4, 3, dtype=ferry.float16, device="sim:1")
    assert dst.copy_(s) is dst  # returns the same Python object, as torch does
    host = ferry.empty(4, 3, pin_memory=True)
    assert host.is_pinned()
    host.copy_(dst, non_blocking=True)
    ferry.current_stream("sim:1").synchronize()
    assert host.tolist() == a.t().tolist()
    assert a.cpu() is a and a.contiguous() is a
    with pytest.raises(TypeError, match="unexpected keyword"):
        a.to(device="cpu", bogus=1)


def test_scalars_items_and_lists():
    assert ferry.tensor(3).item() == 3 and isinstance(ferry.tensor(3).item(), int)
    assert ferry.tensor(True).item() is True
    assert ferry.tensor(2.5, device="sim:0").item() == 2.5
    assert ferry.tensor(1 + 2j).item() == 1 + 2j
    assert float(ferry.tensor([0.5])) == 0.5 and int(ferry.tensor([4])) == 4
    assert bool(ferry.tensor([1])) and not bool(ferry.tensor(0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(ferry.ones(2))
    z = ferry.zeros(2, dtype=ferry.int32)
    z.fill_(5)
    assert z.tolist() == [5, 5]
    assert z.zero_() is z and z.tolist() == [0, 0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "uint8",
                                   "bool", "complex64"])
def test_repr_matches_torch(torch, dtype):
    values = [[0.0, 1.5, -2.25], [1e-3, 12345.0, 7.0]]
    if dtype in ("int64", "uint8"):
        values = [[0, 1, 2], [3, 200, 7]]
    if dtype == "bool":
        values = [[True, False, True], [False, False, True]]
    f = ferry.tensor(values, dtype=dtype)
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    assert repr(f) == repr(t).replace("torch.", "ferry.")
    assert repr(f[0, 1:]) == repr(t[0, 1:]).replace("torch.", "ferry.")


def test_errors_are_mapped_with_their_messages():
    assert issubclass(ferry.ShapeError, ferry.Error) and issubclass(ferry.ShapeError, ValueError)
    assert issubclass(ferry.Error, RuntimeError)
    assert issubclass(ferry.DTypeError, TypeError)
    assert issubclass(ferry.OutOfMemoryError, MemoryError)
    assert issubclass(ferry.DLPackError, BufferError)
    with pytest.raises(ferry.ShapeError, match="invalid for a tensor of 6 elements") as e:
        ferry.zeros(2, 3).view(4)
    assert "ferry/" in str(e.value)  # the C++ message, with its source location
    with pytest.raises(ferry.DeviceError, match="sim:9"):
        ferry.zeros(2, device="sim:9")
    with pytest.raises(ferry.OutOfMemoryError):
        ferry.empty(1 << 40, dtype=ferry.uint8, device="sim:0")
    with pytest.raises(ferry.ShapeError):
        ferry.zeros(2, 3).copy_(ferry.zeros(4))


def test_threads_and_seed():
    n = ferry.get_num_threads()
    ferry.set_num_threads(1)
    assert ferry.get_num_threads() == 1
    ferry.set_num_threads(n)
    ferry.manual_seed(3)
    a = ferry.rand(5).tolist()
    ferry.manual_seed(3)
    assert ferry.rand(5).tolist() == a
    with pytest.raises(ferry.Error):
        ferry.set_num_threads(0)


def test_every_dtype_pair_converts_on_sim():
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
             "float32", "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"]
    base = ferry.tensor([0, 1, 2, 3], dtype=ferry.uint8)
    for src, dst in itertools.product(names, repeat=2):
        a = base.to(getattr(ferry, src)).to("sim:0")
        b = a.to(getattr(ferry, dst)).cpu()
        assert b.dtype is getattr(ferry, dst)
        expected = base.to(getattr(ferry, src)).to(getattr(ferry, dst))
        assert b.to(ferry.complex128).tolist() == expected.to(ferry.complex128).tolist()
