"""The `ferry` tool's outputs that Python tooling reads: `bench --json -` on a pipe and
`bench --plot out.png` (tools/plot_bench.py with matplotlib). FERRY_TOOL names the tool
(scripts/test.sh sets it); without it these tests skip."""

import json
import os
import subprocess

import pytest

TOOL = os.environ.get("FERRY_TOOL")
pytestmark = pytest.mark.skipif(not TOOL or not os.path.exists(TOOL),
                                reason="FERRY_TOOL does not name a ferry tool")
QUICK = ["bench", "--quick", "--repeat", "10", "--threads", "1,2",
         "--filter", "^(contig_f32|transpose2d_f32_1024|copy_1_f32)$"]


def run(args, **kw):
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=300, **kw)


def bench_built():
    return "built without the benchmarks" not in run(["bench", "--quick", "--repeat", "3"]).stderr


def test_json_on_stdout_parses():
    if not bench_built():
        pytest.skip("this build has no benchmarks")
    r = run(QUICK + ["--json", "-"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert len(data["cases"]) == 6 and "xmemcpy" in r.stderr


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    if not bench_built():
        pytest.skip("this build has no benchmarks")
    out = tmp_path / "bench.png"
    r = run(QUICK + ["--plot", str(out)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "wrote %s" % out in r.stdout
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_fails_before_running_when_it_cannot_succeed(tmp_path):
    if not bench_built():
        pytest.skip("this build has no benchmarks")
    r = run(QUICK + ["--plot", "/nonexistent-ferry-dir/x.png"])
    assert r.returncode != 0 and "cannot write" in r.stderr and "contig_f32" not in r.stdout
    env = dict(os.environ, FERRY_PYTHON=str(tmp_path / "no-python"))
    r = run(QUICK + ["--plot", str(tmp_path / "x.png")], env=env)
    assert r.returncode != 0 and "cannot run" in r.stderr
