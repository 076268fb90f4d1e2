"""Streams, events and `with ferry.stream(s):` on the sim device, and the GIL being released
while a call blocks."""

import threading
import time

import pytest

import ferry


def test_streams_and_the_stream_context():
    s = ferry.Stream("sim:0")
    assert s.device == "sim:0" and 1 <= s.id <= 8
    assert ferry.Stream("sim:0", id=3) == ferry.Stream("sim:0", id=3)
    assert ferry.current_stream("sim:0") == ferry.default_stream("sim:0")
    with ferry.stream(s) as entered:
        assert entered == s
        assert ferry.current_stream("sim:0") == s
        t = ferry.ones(1 << 16, device="sim:0")  # queued on s
    assert ferry.current_stream("sim:0") == ferry.default_stream("sim:0")
    s.synchronize()
    assert s.query()
    with ferry.stream(None):
        pass
    assert t[:2].tolist() == [1.0, 1.0]
    with pytest.raises(ferry.DeviceError):
        ferry.Stream("sim:0", id=99)


def test_events(sim_settings):
    sim_settings({"FERRY_SIM_LATENCY": "h2d=50ms"})
    s = ferry.Stream("sim:0")
    start, end = ferry.Event(enable_timing=True), ferry.Event(enable_timing=True)
    host = ferry.ones(1024, pin_memory=True)
    dst = ferry.empty(1024, device="sim:0")
    with ferry.stream(s):
        start.record()
        dst.copy_(host, non_blocking=True)
        end.record()
    assert not end.query()
    other = ferry.Stream("sim:0")
    end.wait(other)  # the other stream waits; the host does not
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 40
    ev = s.record_event()
    ev.synchronize()
    assert ev.device == "sim:0"


def test_blocking_calls_release_the_gil(sim_settings):
    sim_settings({"FERRY_SIM_LATENCY": "h2d=300ms"})
    src = ferry.ones(1024)
    dst = ferry.empty(1024, device="sim:0")
    done = threading.Event()

    def copy():
        dst.copy_(src)  # blocking: returns after the 300 ms copy
        done.set()

    worker = threading.Thread(target=copy)
    t0 = time.monotonic()
    worker.start()
    ticks = 0
    while not done.is_set() and time.monotonic() - t0 < 5:
        ticks += 1
    worker.join()
    assert time.monotonic() - t0 >= 0.25
    assert ticks > 1000, "the main thread did not run while the copy blocked"
    assert dst.cpu().tolist() == [1.0] * 1024
