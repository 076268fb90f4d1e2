"""ferry.memory: the caching allocator's counters per device and the pinned allocator's."""

import ferry


def test_stats_follow_allocations():
    d = "sim:1"
    before = ferry.memory.memory_allocated(d)
    t = ferry.empty(1 << 20, dtype=ferry.uint8, device=d)
    stats = ferry.memory.stats(d)
    assert stats["allocated_bytes"]["current"] == before + (1 << 20)
    assert stats["allocated_bytes"]["peak"] >= stats["allocated_bytes"]["current"]
    assert ferry.memory.memory_reserved(d) >= ferry.memory.memory_allocated(d)
    del t
    assert ferry.memory.memory_allocated(d) == before
    ferry.memory.empty_cache(d)
    ferry.memory.check_invariants(d)
    free, total = ferry.memory.mem_get_info(d)
    assert 0 < free <= total
    assert isinstance(ferry.memory.snapshot(d), list)
    assert ferry.memory.format_bytes(1536) == "1.50 KiB"


def test_pinned_stats():
    before = ferry.memory.pinned_stats()["allocation"]["current"]
    t = ferry.empty(4096, pin_memory=True)
    assert t.is_pinned()
    assert ferry.memory.pinned_stats()["allocation"]["current"] == before + 1
    del t
    assert ferry.memory.pinned_stats()["allocation"]["current"] == before
