"""DLPack exchange with torch, numpy and ferry itself: zero-copy both ways for every dtype and odd
strides, ownership (producer first, consumer first, capsules never consumed), version
negotiation, the sim's kDLExtDev exports, dl_device and copy, the stream handshake, and the
errors consumers see."""

import ctypes
import gc
import time
import weakref

import numpy as np
import pytest

import ferry

TORCH_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                "float64", "complex64", "complex128"]

_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule):
    for name in (b"dltensor", b"dltensor_versioned", b"used_dltensor", b"used_dltensor_versioned"):
        if _is_valid(capsule, name):
            return name.decode()
    return None


def strides_that_matter(t):
    """Strides of the dimensions longer than 1 (the others never move the address, and torch
    rewrites them on export); none for an empty tensor."""
    if t.numel() == 0:
        return ()
    return tuple(st for n, st in zip(t.shape, t.stride()) if n > 1)


def odd_views():
    """(name, make) pairs: views whose strides and offsets a consumer must keep."""
    base = lambda: ferry.arange(2 * 3 * 4 * 5).view(2, 3, 4, 5)  # noqa: E731
    return [
        ("contiguous", lambda: base()),
        ("permuted", lambda: base().permute(3, 1, 0, 2)),
        ("sliced_with_offset", lambda: base()[1, 1:, ::2, 3:]),
        ("transposed_2d", lambda: base()[0, 0].t()),
        ("expanded", lambda: base()[0, 0, 0, :1].expand(4, 5)),
        ("zero_d", lambda: base()[1, 2, 3, 4]),
        ("empty", lambda: base()[:, 3:]),
        ("size_one_dims", lambda: base()[:1, :, 1:2]),
    ]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_round_trip_every_dtype(torch, name):
    f = ferry.arange(12).view(3, 4).to(getattr(ferry, name))[:, 1:]
    t = torch.from_dlpack(f)
    assert t.dtype == getattr(torch, name)
    assert t.data_ptr() == f.data_ptr() and tuple(t.stride()) == f.stride()
    t[0, 0] = 1  # a write through torch is seen by ferry
    assert f[0, 0].item() == 1
    f[2, 2] = 0  # and one through ferry by torch
    assert t[2, 2].item() == 0
    back = ferry.from_dlpack(t)
    assert back.dtype is f.dtype and back.data_ptr() == f.data_ptr() and back.stride() == f.stride()


@pytest.mark.parametrize("view", [v for v in odd_views()], ids=[v[0] for v in odd_views()])
def test_torch_keeps_strides_and_offsets(torch, view):
    f = view[1]()
    t = torch.from_dlpack(f)
    assert tuple(t.shape) == f.shape and strides_that_matter(t) == strides_that_matter(f)
    if f.numel() > 0:
        assert t.data_ptr() == f.data_ptr()
    assert t.tolist() == f.tolist()
    g = ferry.from_dlpack(t)
    assert g.shape == f.shape and g.tolist() == f.tolist()
    assert strides_that_matter(g) == strides_that_matter(f)


def test_torch_views_come_across_with_their_offsets(torch):
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    for t in (base[1:, ::2, 3:], base.permute(2, 0, 1)[1:], base[2, 3], base[:, :, 1].t()):
        f = ferry.from_dlpack(t)
        assert f.data_ptr() == t.data_ptr() and f.stride() == tuple(t.stride())
        assert f.tolist() == t.tolist()
        f.fill_(-1)
        assert bool((t == -1).all())


@pytest.mark.parametrize("view", [v for v in odd_views()], ids=[v[0] for v in odd_views()])
def test_numpy_round_trip(view):
    f = view[1]().to(ferry.float64)
    a = np.from_dlpack(f)
    assert a.shape == f.shape
    if f.numel() > 0:
        assert a.strides == tuple(s * 8 for s in f.stride())
    assert a.tolist() == f.tolist()
    if f.numel() > 0:
        assert a.ctypes.data == f.data_ptr()
    g = ferry.from_dlpack(np.arange(24.0).reshape(2, 3, 4)[:, 1:, ::3])
    assert g.stride() == (12, 4, 3) and g.tolist() == np.arange(24.0).reshape(2, 3, 4)[:, 1:, ::3].tolist()


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64", "float16",
                                  "float32", "float64", "complex64", "complex128"])
def test_numpy_shares_memory_every_dtype(name):
    f = ferry.zeros(4, 3, dtype=getattr(ferry, name)).t()
    a = np.from_dlpack(f)  # numpy 1.24 marks its import read-only; ferry writes
    f[1, 2] = 1
    assert a[1, 2] == 1 and a.dtype == np.dtype(name)
    src = np.zeros((3, 4), dtype=name)
    g = ferry.from_dlpack(src)
    g[2, 3] = 1
    assert src[2, 3] == 1


def test_bool_bfloat16_and_float8(torch):
    b = ferry.tensor([True, False, True])
    assert ferry.from_dlpack(b).tolist() == [True, False, True]  # kDLBool (DLPack 0.8)
    with pytest.raises(Exception):  # torch 1.13 and numpy 1.24 predate kDLBool
        torch.from_dlpack(b)
    with pytest.raises(Exception):
        np.from_dlpack(b)
    bf = torch.from_dlpack(ferry.tensor([1.5, -2.0], dtype=ferry.bfloat16))
    assert bf.dtype == torch.bfloat16 and bf.tolist() == [1.5, -2.0]
    e4 = ferry.tensor([1.0, 2.0], dtype=ferry.float8_e4m3fn)
    with pytest.raises(BufferError, match="DLPack 1.1"):
        e4.__dlpack__()  # a legacy capsule cannot name float8
    with pytest.raises(ferry.DLPackError, match="1.0"):
        e4.__dlpack__(max_version=(1, 0))
    back = ferry.from_dlpack(e4.__dlpack__(max_version=(1, 1)))
    assert back.dtype is ferry.float8_e4m3fn and back.data_ptr() == e4.data_ptr()
    assert ferry.from_dlpack(e4).dtype is ferry.float8_e4m3fn  # ferry asks for 1.1 itself


def test_version_negotiation():
    t = ferry.ones(3)
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(2, 0))) == "dltensor_versioned"
    assert capsule_name(ferry.to_dlpack(t)) == "dltensor"
    assert t.__dlpack_device__() == (1, 0)
    assert ferry.DLPACK_VERSION == (1, 1)
    cap = t.__dlpack__(max_version=(1, 1))
    ferry.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor_versioned"
    with pytest.raises(BufferError, match="not consumed yet"):
        ferry.from_dlpack(cap)


def test_capsules_from_torch(torch):
    t = torch.arange(6.0).reshape(2, 3).t()
    cap = torch.utils.dlpack.to_dlpack(t)
    f = ferry.from_dlpack(cap)  # a legacy capsule, consumed directly
    assert capsule_name(cap) == "used_dltensor"
    assert f.data_ptr() == t.data_ptr() and f.stride() == (1, 3) and f.tolist() == t.tolist()
    back = torch.utils.dlpack.from_dlpack(ferry.to_dlpack(f))
    assert back.data_ptr() == t.data_ptr()


def test_lifetime_producer_first(torch):
    alive = ferry._C._dlpack_exports_alive()
    f = ferry.arange(1000, dtype=ferry.float32)
    t = torch.from_dlpack(f)
    del f
    gc.collect()
    assert ferry._C._dlpack_exports_alive() == alive + 1
    assert t[999].item() == 999  # the export keeps ferry's memory alive
    del t
    gc.collect()
    assert ferry._C._dlpack_exports_alive() == alive


def test_lifetime_consumer_first(torch):
    alive = ferry._C._dlpack_exports_alive()
    f = ferry.arange(10)
    t = torch.from_dlpack(f)
    del t
    gc.collect()
    assert ferry._C._dlpack_exports_alive() == alive
    assert f.tolist() == list(range(10))


def test_lifetime_unconsumed_and_chained_capsules(torch):
    alive = ferry._C._dlpack_exports_alive()
    f = ferry.arange(10)
    caps = [f.__dlpack__(), f.__dlpack__(max_version=(1, 0))]
    assert ferry._C._dlpack_exports_alive() == alive + 2
    del caps
    gc.collect()
    assert ferry._C._dlpack_exports_alive() == alive
    # ferry -> torch -> ferry -> numpy: each hop holds the one before it.
    g = ferry.from_dlpack(torch.from_dlpack(f))
    a = np.from_dlpack(g)
    del f, g
    gc.collect()
    assert a.tolist() == list(range(10))
    del a
    gc.collect()
    assert ferry._C._dlpack_exports_alive() == alive


def test_imports_release_the_producer_exactly_when_the_last_view_goes():
    src = np.arange(8.0)
    ref = weakref.ref(src)
    f = ferry.from_dlpack(src)
    view = f[2:].view(2, 3)
    del src, f
    gc.collect()
    assert ref() is not None and view.tolist() == [[2, 3, 4], [5, 6, 7]]
    del view
    gc.collect()
    assert ref() is None


def test_torch_producer_outlives_its_python_object(torch):
    t = torch.arange(6.0)
    f = ferry.from_dlpack(t)
    del t
    gc.collect()
    assert f.tolist() == [0, 1, 2, 3, 4, 5]


def test_sim_exports_are_extdev_and_refused_by_cpu_consumers(torch):
    s = ferry.arange(6, dtype=ferry.float32, device="sim:1")
    assert s.__dlpack_device__() == (12, 1)  # kDLExtDev
    with pytest.raises(Exception):
        torch.from_dlpack(s)
    with pytest.raises(Exception):
        np.from_dlpack(s)
    back = ferry.from_dlpack(s)  # zero-copy: the same sim memory
    assert back.device == "sim:1" and back.data_ptr() == s.data_ptr()


def test_sim_export_to_the_cpu_copies_unless_forbidden(torch):
    s = ferry.arange(12, dtype=ferry.float32, device="sim:0").view(3, 4).t()
    with pytest.raises(BufferError, match="copy=False"):
        s.__dlpack__(dl_device=(1, 0), copy=False)
    t = torch.utils.dlpack.from_dlpack(s.__dlpack__(dl_device=(1, 0)))
    assert t.device.type == "cpu" and t.tolist() == s.tolist()
    a = np.from_dlpack(ferry.from_dlpack(s, device="cpu"))
    assert a.tolist() == s.tolist()
    with pytest.raises(BufferError, match="sim devices"):
        s.__dlpack__(dl_device=(12, 9))
    # CPU data moves to a sim device on request, and copy=True always copies.
    h = ferry.arange(4)
    assert ferry.from_dlpack(h, device="sim:1").device == "sim:1"
    c = ferry.from_dlpack(h, copy=True)
    assert c.tolist() == h.tolist() and c.data_ptr() != h.data_ptr()


def test_sim_stream_handshake(sim_settings):
    """The consumer's stream waits for the producer's work by an event; the host never waits."""
    sim_settings({"FERRY_SIM_LATENCY": "h2d=200ms"})
    producer = ferry.Stream("sim:0")
    consumer_id = producer.id % 8 + 1
    consumer = ferry.Stream("sim:0", id=consumer_id)
    host = ferry.full((4096,), 3.0, pin_memory=True)
    dst = ferry.empty(4096, device="sim:0")
    with ferry.stream(producer):
        dst.copy_(host, non_blocking=True)  # 200 ms on the producer's stream
        t0 = time.monotonic()
        cap = dst.__dlpack__(stream=consumer_id)
        took = time.monotonic() - t0
    assert took < 0.1, "export waited on the host"
    assert not consumer.query(), "the consumer's stream does not wait for the producer"
    view = ferry.from_dlpack(cap)
    with ferry.stream(consumer):
        out = view.to("cpu")  # ordered after the producer's copy by the event
    assert out.tolist() == [3.0] * 4096
    assert producer.query()
    # stream=-1: no synchronization at all.
    with ferry.stream(producer):
        dst.copy_(host, non_blocking=True)
        dst.__dlpack__(stream=-1)
    assert consumer.query()
    producer.synchronize()
    # ferry as the consumer passes its current stream to the producer's __dlpack__, so the
    # producer can order it after its own work (as above). In one thread the producer's current
    # stream is the consumer's too, so a producer object that records what it was given checks
    # the hand-over; reading after a copy on another stream would only race.
    class RecordingProducer:
        def __init__(self, tensor):
            self.tensor, self.streams = tensor, []

        def __dlpack__(self, stream=None, **kwargs):
            self.streams.append(stream)
            return self.tensor.__dlpack__(stream=stream, **kwargs)

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

    producer.synchronize()
    recording = RecordingProducer(dst)
    with ferry.stream(consumer):
        assert ferry.from_dlpack(recording).to("cpu").tolist() == [3.0] * 4096
    assert recording.streams == [consumer_id]


def test_errors_consumers_see():
    with pytest.raises(BufferError, match="stream=None"):
        ferry.ones(2).__dlpack__(stream=5)
    with pytest.raises(BufferError, match="sim stream id"):
        ferry.ones(2, device="sim:0").__dlpack__(stream=42)
    with pytest.raises(TypeError, match="__dlpack__"):
        ferry.from_dlpack(object())
    with pytest.raises(BufferError):  # numpy refuses negative strides, or ferry does
        ferry.from_dlpack(np.arange(5.0)[::-1])
    with pytest.raises(BufferError, match="device"):
        ferry.ones(2).__dlpack__(dl_device=(4, 0))  # OpenCL
    c = ferry.tensor([1 + 1j]).conj()
    with pytest.raises(BufferError, match="conjugate"):
        c.__dlpack__(copy=False)
    assert ferry.from_dlpack(c).tolist() == [1 - 1j]  # copied, bit resolved
