"""numpy interop: t.numpy() and ferry.from_numpy share memory with their strides; ferry.tensor
copies, with torch's default dtypes for Python numbers."""

import gc
import weakref

import numpy as np
import pytest

import ferry

NUMPY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
                "float64", "complex64", "complex128"]


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_numpy_shares_memory_both_ways(name):
    t = ferry.arange(12).view(3, 4).to(getattr(ferry, name))
    a = t.numpy()
    assert a.dtype == np.dtype(name) and a.shape == (3, 4)
    assert a.ctypes.data == t.data_ptr()
    a[1, 2] = 1
    assert t[1, 2].item() == 1
    t[2, 3] = 0
    assert a[2, 3] == 0


def test_numpy_keeps_view_strides_and_the_storage():
    t = ferry.arange(24, dtype=ferry.float32).view(2, 3, 4).permute(2, 0, 1)[1:, :, ::2]
    a = t.numpy()
    assert a.strides == tuple(s * 4 for s in t.stride())
    assert np.array_equal(a, np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)[1:, :, ::2])
    del t
    gc.collect()
    assert a.sum() == np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)[1:, :, ::2].sum()


def test_numpy_refusals():
    with pytest.raises(TypeError, match="bfloat16"):
        ferry.zeros(2, dtype=ferry.bfloat16).numpy()
    with pytest.raises(TypeError, match="cpu"):
        ferry.zeros(2, device="sim:0").numpy()
    # np.asarray copies a device tensor to the host.
    assert np.asarray(ferry.arange(3, device="sim:0")).tolist() == [0, 1, 2]
    assert np.asarray(ferry.arange(3), dtype=np.float64).dtype == np.float64


def test_from_numpy_is_zero_copy_and_keeps_the_array_alive():
    a = np.arange(10, dtype=np.int32)[2::2]
    ref = weakref.ref(a.base)
    t = ferry.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data and t.stride() == (2,)
    t[0] = -5
    assert a[0] == -5
    del a
    gc.collect()
    assert ref() is not None and t.tolist() == [-5, 4, 6, 8]
    del t
    gc.collect()
    assert ref() is None
    with pytest.raises(ValueError, match="strides"):
        ferry.from_numpy(np.arange(5)[::-1])


def test_tensor_copies_with_torch_default_dtypes():
    assert ferry.tensor([1.0, 2.0]).dtype is ferry.float32
    assert ferry.tensor([1, 2]).dtype is ferry.int64
    assert ferry.tensor([True]).dtype is ferry.bool
    assert ferry.tensor([1j]).dtype is ferry.complex64
    assert ferry.tensor(np.zeros(2)).dtype is ferry.float64  # an array keeps its dtype
    a = np.arange(6.0).reshape(2, 3).T
    t = ferry.tensor(a)
    assert t.tolist() == a.tolist() and t.data_ptr() != a.ctypes.data
    assert ferry.tensor([[1, 2], [3, 4]], dtype=ferry.float8_e4m3fn).to(ferry.float32).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(TypeError):
        ferry.tensor(["a"])
