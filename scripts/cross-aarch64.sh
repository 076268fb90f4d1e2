#!/usr/bin/env bash
# Cross-compiles ferry's CPU copy engine and its tests for aarch64 and runs them under qemu-user
# (issue: the copy engine on every CPU). Installs what it needs from Debian: the cross toolchain
# (g++-aarch64-linux-gnu), qemu-user, and the arm64 packages of the dependencies (adding the arm64
# architecture to dpkg). libdnnl-dev:arm64 cannot be installed beside libdnnl-dev (its
# dnnl_config.h differs), so it is extracted into the build directory instead.
# Usage: scripts/cross-aarch64.sh [ctest arguments...]   (default: the CPU copy suites, and the
#   core, dispatch, iter and ops suites without the tests that start the `ferry` tool)
# Environment: FERRY_BUILD_DIR (default build/aarch64). A full library build (about 6 minutes on
#   two cores); the suites then take about a minute under qemu (10-30 times their native time).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build/aarch64}
sudo=""
[[ $(id -u) -ne 0 ]] && sudo=sudo

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
fi
packages=(g++-aarch64-linux-gnu qemu-user libgtest-dev:arm64 libgmock-dev:arm64 libhwy-dev:arm64
          libdnnl2:arm64 libtomlplusplus-dev:arm64 ocl-icd-opencl-dev:arm64 libgomp1:arm64)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

sysroot=$build/arm64-sysroot
if [[ ! -f "$sysroot/usr/include/oneapi/dnnl/dnnl_config.h" ]]; then
  mkdir -p "$sysroot"
  (cd "$build" && apt-get download libdnnl-dev:arm64 >/dev/null)
  dpkg -x "$build"/libdnnl-dev_*_arm64.deb "$sysroot"
fi
# The package's CMake files name the library beside them; it is installed (libdnnl2:arm64) in /usr.
for lib in /usr/lib/aarch64-linux-gnu/libdnnl.so.*; do
  ln -sf "$lib" "$sysroot/usr/lib/aarch64-linux-gnu/$(basename "$lib")"
done

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DFERRY_ARM64_SYSROOT="$sysroot" -DFERRY_CUDA=OFF -DFERRY_PYTHON=OFF -DFERRY_BUILD_BENCH=OFF \
  >/dev/null
# The CPU copy suites, and the suites of the layers they sit in (tensors, dispatch,
# TensorIterator, the operators, oneDNN's included).
cmake --build "$build" -j "$(nproc)" --target ferry_cpu_tests ferry_core_tests ferry_dispatch_tests \
  ferry_iter_tests ferry_ops_tests
if [[ $# -eq 0 ]]; then
  # The randomized runs against the oracle take most of it; the limit leaves room for a slow host.
  set -- -R '^(cpu(_target_.*)?|core|dispatch|iter|ops)$' --timeout 1800
  # Left out: the tests that start the `ferry` tool or a new test process through the shell,
  # which cannot run an arm64 binary without binfmt_misc (their code is the same on every CPU).
  export GTEST_FILTER="${GTEST_FILTER:--Explain.*:OpsCommand.*:NumThreadsInANewProcess.*}"
fi
ctest --test-dir "$build" --output-on-failure "$@"
