#!/usr/bin/env bash
# Configures and builds ferry into a build directory.
# Usage: scripts/build.sh <build-dir> [extra cmake arguments...]
# Environment: FERRY_BUILD_TARGET builds only those targets (space-separated, e.g. "ferry_cli
#   ferry_device_tests") instead of everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: scripts/build.sh <build-dir> [cmake args...]}
shift
jobs=$(nproc 2>/dev/null || echo 2)
# Ninja for a new build directory when it is installed: it schedules every target's compiles as
# one graph (a test suite's files compile while the library's last batch does; Make waits for
# the whole library), which shortens a two-core build's tail. A directory configured earlier
# keeps its generator (CMake cannot switch one).
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
target=()
if [[ -n "${FERRY_BUILD_TARGET:-}" ]]; then
  read -r -a names <<<"$FERRY_BUILD_TARGET"
  target=(--target "${names[@]}")
fi
cmake --build "$build" -j "$jobs" "${target[@]}"
