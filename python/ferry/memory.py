"""ferry.memory: the caching device allocator's statistics and controls per device, the pinned
host allocator's, and the backend's free/total memory (torch.cuda's memory functions)."""

from ferry._C import _memory as _m

stats = _m.stats
memory_allocated = _m.memory_allocated
max_memory_allocated = _m.max_memory_allocated
memory_reserved = _m.memory_reserved
max_memory_reserved = _m.max_memory_reserved
reset_peak_stats = _m.reset_peak_stats
reset_accumulated_stats = _m.reset_accumulated_stats
empty_cache = _m.empty_cache
set_per_process_memory_fraction = _m.set_per_process_memory_fraction
memory_fraction = _m.memory_fraction
snapshot = _m.snapshot
check_invariants = _m.check_invariants
mem_get_info = _m.mem_get_info
pinned_stats = _m.pinned_stats
pinned_empty_cache = _m.pinned_empty_cache
format_bytes = _m.format_bytes

__all__ = [name for name in dir() if not name.startswith("_")]
