"""The in-tree PEP 517 backend (python/build_backend/ferry_build.py) that `pip install .` runs:
its cheap hooks only (a wheel build compiles the library, minutes; docs/python.md shows it)."""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python", "build_backend"))

import ferry  # noqa: E402
import ferry_build  # noqa: E402


def test_version_comes_from_cmake_and_matches_the_module():
    assert ferry_build._version() == ferry.__version__


def test_no_build_requirements_and_metadata(tmp_path):
    assert ferry_build.get_requires_for_build_wheel() == []
    dist_info = ferry_build.prepare_metadata_for_build_wheel(str(tmp_path))
    text = (tmp_path / dist_info / "METADATA").read_text()
    assert "Name: ferry" in text and "Version: %s" % ferry.__version__ in text


def test_wheel_tag_names_this_interpreter():
    tag = ferry_build._tag()
    assert tag.startswith("cp%d%d-cp%d%d-" % (sys.version_info[:2] * 2))
    assert "linux" in tag
