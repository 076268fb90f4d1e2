"""`import ferry` must leave a process able to load other native libraries afterwards: libferry
is dlopen'ed here, so it must not take glibc's small static TLS surplus (Note [Local key sets
and the TLS model] in ferry/dispatch/local_dispatch_key_set.h). With an initial-exec
thread_local in libferry, `import ferry; import torch` fails with "cannot allocate memory in
static TLS block"."""

import os
import shutil
import subprocess
import sys

import pytest

import ferry

DF_STATIC_TLS = 0x10


def loaded_libferry():
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libferry.so"):
                return path
    return None


def test_libferry_is_not_static_tls():
    path = loaded_libferry()
    assert path, "libferry is not mapped into this process"
    if shutil.which("readelf") is None:
        pytest.skip("no readelf")
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    flags = [line for line in out.splitlines() if "(FLAGS)" in line]
    assert not any("STATIC_TLS" in f for f in flags), (
        "%s is marked STATIC_TLS: a thread_local with tls_model(\"initial-exec\") is in "
        "libferry; drop the attribute (the build uses TLS descriptors, -mtls-dialect=gnu2)" % path)


def test_torch_loads_after_ferry(torch):
    # A fresh process, ferry first: the order that failed.
    code = "import ferry, torch; print(torch.from_dlpack(ferry.arange(3)).tolist())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0, 1, 2]"
