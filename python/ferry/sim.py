"""ferry.sim: the software device's settings at run time (the FERRY_SIM_* variables, see
docs/sim.md), e.g. a copy latency or chaos delays for a test, then back to the environment's."""

from ferry._C import _sim as _s

configure = _s.configure
reset = _s.reset
settings = _s.settings

__all__ = ["configure", "reset", "settings"]
