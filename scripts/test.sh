#!/usr/bin/env bash
# Builds ferry and runs every test (the README's test command; CI runs it too).
# Usage: scripts/test.sh [ctest arguments...]      e.g. scripts/test.sh -R core
# Environment: FERRY_BUILD_DIR (default build/release), FERRY_SANITIZE (e.g. address,undefined).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"

build=${FERRY_BUILD_DIR:-$root/build/release}
args=()
if [[ -n "${FERRY_SANITIZE:-}" ]]; then
  # Sanitizer builds: baseline SIMD target only, no benchmarks, -O1 with line tables only
  # (enough for the sanitizers' stack traces), to keep CI fast.
  args+=(-DFERRY_SANITIZE="$FERRY_SANITIZE" -DFERRY_BUILD_BENCH=OFF -DFERRY_SIMD_TARGETS=STATIC
         -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1"
         "-DCMAKE_CUDA_FLAGS_RELWITHDEBINFO=-O1")
fi
"$root/scripts/build.sh" "$build" "${args[@]}"
ctest --test-dir "$build" --output-on-failure -j 2 "$@"
