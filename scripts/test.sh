#!/usr/bin/env bash
# Builds ferry and runs every test (the README's test command; CI runs it too): the GoogleTest
# suites through ctest, then the Python package's pytest suite when it was built.
# Usage: scripts/test.sh [ctest arguments...]      e.g. scripts/test.sh -R core
# Environment: FERRY_BUILD_DIR (default build/release), FERRY_SANITIZE (e.g. address,undefined),
#   FERRY_PYTEST_ARGS (extra pytest arguments, e.g. "-k dlpack").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"

build=${FERRY_BUILD_DIR:-$root/build/release}
args=()
if [[ -n "${FERRY_SANITIZE:-}" ]]; then
  # Sanitizer builds: baseline SIMD target only, no benchmarks, -Og with line tables only
  # (enough for the sanitizers' stack traces), to keep CI fast. -Og against -O1 (2026-11-29,
  # GCC 12, ASan+UBSan, two cores): the build 444 -> 377 s, ctest 123 s either way. No CUDA
  # backend: without a GPU its kernels never run, and the release build already compiles it.
  args+=(-DFERRY_SANITIZE="$FERRY_SANITIZE" -DFERRY_BUILD_BENCH=OFF -DFERRY_SIMD_TARGETS=STATIC
         -DFERRY_CUDA=OFF
         -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-Og -g1"
         "-DCMAKE_CUDA_FLAGS_RELWITHDEBINFO=-O1")
  # ThreadSanitizer cannot watch an uninstrumented interpreter: no Python package there.
  [[ "$FERRY_SANITIZE" == *thread* ]] && args+=(-DFERRY_PYTHON=OFF)
fi
"$root/scripts/build.sh" "$build" "${args[@]}"
ctest --test-dir "$build" --output-on-failure -j 2 "$@"

# The pytest suite, on Debian's interpreter (the one with numpy, torch and pytest), against the
# build tree's package. An AddressSanitizer build's extension needs the ASan runtime loaded
# first, and libstdc++ with it (else ASan's __cxa_throw interceptor finds nothing to forward to
# and the first C++ exception aborts); leak checking is off: CPython keeps memory until exit by
# design, and the suite counts DLPack exports itself.
if [[ -f "$build/python/ferry/__init__.py" ]]; then
  if [[ $# -gt 0 ]]; then
    echo "ferry: ctest arguments given; skipping the pytest suite" >&2
    exit 0
  fi
  pyenv=(PYTHONPATH="$build/python" FERRY_TOOL="$build/ferry")
  if [[ "${FERRY_SANITIZE:-}" == *address* ]]; then
    preload="$(c++ -print-file-name=libasan.so) $(c++ -print-file-name=libstdc++.so)"
    pyenv+=(LD_PRELOAD="$preload" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
  fi
  read -r -a pytest_args <<<"${FERRY_PYTEST_ARGS:-}"
  env "${pyenv[@]}" /usr/bin/python3 -m pytest -q -p no:cacheprovider "$root/python/tests" \
    "${pytest_args[@]}"
else
  echo "ferry: no Python package in $build (FERRY_PYTHON=OFF, as in the TSan build, or no" \
       "Python 3 / pybind11); pytest skipped" >&2
fi
