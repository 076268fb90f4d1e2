"""A minimal PEP 517 build backend for ferry: configures and builds the `ferry_python` target with
CMake (wheel layout: libferry.so inside the package, run path $ORIGIN), installs the "python"
component into a staging directory and zips it into a wheel for the running interpreter. Only
the standard library is used, so `pip install .` works offline.

Settings: FERRY_CMAKE_ARGS (extra -D arguments, e.g. "-DFERRY_CUDA=OFF"), FERRY_WHEEL_BUILD_DIR
(default build/wheel in the source tree, kept so that a reinstall only rebuilds what changed).
"""

import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(ferry\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("ferry_build: no `project(ferry VERSION x.y.z)` in CMakeLists.txt")
    return m.group(1)


def _tag():
    impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name
    abi = "%s%d%d" % (impl, sys.version_info[0], sys.version_info[1])
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (abi, abi, plat)


def _metadata(version):
    return ("Metadata-Version: 2.1\nName: ferry\nVersion: %s\n"
            "Summary: Moves tensors between layouts, dtypes, devices, streams and processes\n"
            "Requires-Python: >=3.9\n" % version)


def _run(cmd):
    sys.stderr.write("ferry_build: %s\n" % " ".join(shlex.quote(c) for c in cmd))
    subprocess.run(cmd, check=True, stdout=sys.stderr)


def _build_and_stage(staging):
    build = os.environ.get("FERRY_WHEEL_BUILD_DIR") or os.path.join(ROOT, "build", "wheel")
    args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
            "-DFERRY_PYTHON=ON", "-DFERRY_PYTHON_WHEEL=ON", "-DFERRY_BUILD_TESTS=OFF",
            "-DFERRY_BUILD_BENCH=OFF", "-DPython3_EXECUTABLE=" + sys.executable,
            "-DFERRY_PYTHON_INSTALL_DIR=site"]
    if shutil.which("ccache"):
        args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    args += shlex.split(os.environ.get("FERRY_CMAKE_ARGS", ""))
    _run(args)
    _run(["cmake", "--build", build, "--target", "ferry_python", "-j", str(os.cpu_count() or 2)])
    _run(["cmake", "--install", build, "--component", "python", "--prefix", staging])
    return os.path.join(staging, "site")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version()
    dist_info = "ferry-%s.dist-info" % version
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata(version))
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    tag = _tag()
    name = "ferry-%s-%s.whl" % (version, tag)
    dist_info = "ferry-%s.dist-info" % version
    with tempfile.TemporaryDirectory() as staging:
        site = _build_and_stage(staging)
        records = []
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as whl:
            for base, _, files in sorted(os.walk(site)):
                for file in sorted(files):
                    path = os.path.join(base, file)
                    arcname = os.path.relpath(path, site).replace(os.sep, "/")
                    with open(path, "rb") as f:
                        data = f.read()
                    info = zipfile.ZipInfo(arcname)
                    info.external_attr = (os.stat(path).st_mode & 0o777) << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    whl.writestr(info, data)
                    records.append(_record_line(arcname, data))
            extra = {
                "METADATA": _metadata(version),
                "WHEEL": "Wheel-Version: 1.0\nGenerator: ferry_build\nRoot-Is-Purelib: false\n"
                         "Tag: %s\n" % tag,
            }
            for file, text in extra.items():
                arcname = "%s/%s" % (dist_info, file)
                whl.writestr(arcname, text)
                records.append(_record_line(arcname, text.encode()))
            records.append("%s/RECORD,," % dist_info)
            whl.writestr("%s/RECORD" % dist_info, "\n".join(records) + "\n")
    return name
