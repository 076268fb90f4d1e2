#!/usr/bin/env bash
# Installs the Debian packages ferry needs to build and test, skipping those already present: the
# C++ toolchain and libraries, DLPack's header, nlohmann-json (the tests' safetensors reader), and
# Debian's Python 3 with pybind11, numpy, pytest and matplotlib (for `import ferry`, its tests and
# the bench commands' `--plot` and `--timeline` figures).
# Usage: scripts/install-deps.sh [--torch]
#   --torch adds PyTorch: libtorch-dev (the C++ benchmarks' comparison) and python3-torch (the
#   operator comparison with PyTorch in tests/reference, the pytest round-trips with torch and
#   bench/python_overhead.py) with python3-torchvision (the model comparisons in tests/nn). CI passes
#   it; without it those tests skip, saying why.
set -euo pipefail

# libdnnl-dev's CMake config looks for OpenCL (Debian builds oneDNN with its OpenCL GPU runtime)
# but the package does not depend on OpenCL's headers: ocl-icd-opencl-dev brings them.
# nlohmann-json3-dev parses safetensors headers (ferry/nn); libtomlplusplus-dev parses
# `ferry serve`'s models.toml (ferry/switch). ninja-build: scripts/build.sh prefers Ninja.
# libucx-dev and libssl-dev: ferry/transport (UCX, and HMAC for its handshake); ucx-utils:
# ucx_perftest, which `ferry bench-transport` measures against; iproute2: the transport's
# network-namespace test.
packages=(cmake g++ make ninja-build libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev
          libcli11-dev libdnnl-dev ocl-icd-opencl-dev clang-format libdlpack-dev nlohmann-json3-dev
          libtomlplusplus-dev libucx-dev ucx-utils libssl-dev iproute2
          python3 python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest
          python3-matplotlib python3-venv)
if [[ "${1:-}" == "--torch" ]]; then
  # OpenBLAS too: Debian's PyTorch takes whichever libblas.so.3 is installed, and without
  # recommended packages that is the reference BLAS (about 6 GFLOP/s for a float32 GEMM on the
  # AMD EPYC VM of 2026-11-29), which no PyTorch user runs and bench-ops would compare against.
  packages+=(libtorch-dev python3-torch python3-torchvision libopenblas0-pthread)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "ferry: installing ${missing[*]}" >&2
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
