#!/usr/bin/env bash
# Builds the ferry tool (once) and runs it: scripts/ferry.sh bench | devices | ops | explain ...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
build=${FERRY_BUILD_DIR:-$root/build/release}
FERRY_BUILD_TARGET=ferry_cli "$root/scripts/build.sh" "$build" >&2
exec "$build/ferry" "$@"
