"""Shared fixtures for ferry's pytest suite (run by scripts/test.sh after ctest, with
PYTHONPATH pointing at the build tree's python/ directory). torch is optional: its tests skip
unless FERRY_REQUIRE_TORCH=1 (CI), which turns a missing torch into a failure."""

import os
import random

import numpy as np
import pytest

import ferry

# One seed per run for the random inputs (the `seed` and `rng` fixtures), printed in pytest's
# header; FERRY_TEST_SEED replays a run.
SEED = int(os.environ.get("FERRY_TEST_SEED", random.randrange(1 << 30)))


def pytest_report_header(config):
    return "ferry python tests: seed %d (replay with FERRY_TEST_SEED=%d)" % (SEED, SEED)


@pytest.fixture
def seed():
    return SEED


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


@pytest.fixture(scope="session")
def torch():
    try:
        import torch as module
    except ImportError as e:
        if os.environ.get("FERRY_REQUIRE_TORCH") == "1":
            pytest.fail("FERRY_REQUIRE_TORCH=1 but torch cannot be imported: %s" % e)
        pytest.skip("python3-torch is not installed (scripts/install-deps.sh --torch)")
    return module


@pytest.fixture
def sim_settings():
    """Lets a test change the sim's settings; the environment's come back afterwards."""
    yield ferry.sim.configure
    ferry.sim.reset()


def storage_alias(a, b):
    """Whether two ferry tensors share memory (ferry.Tensor.is_alias_of)."""
    return a.is_alias_of(b)
