#!/usr/bin/env bash
# Builds the ferry tool (once) and runs it: scripts/ferry.sh bench | devices | ops | explain ...
# The build is quiet: nothing on stdout, one line on stderr when something was rebuilt, and the
# whole log on stderr only when it fails, so `scripts/ferry.sh bench --json - | jq` works.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
build=${FERRY_BUILD_DIR:-$root/build/release}
[[ -x "$build/ferry" ]] || echo "ferry: building the tool in $build (the first build takes minutes)" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! FERRY_BUILD_TARGET=ferry_cli "$root/scripts/build.sh" "$build" >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
grep -q "Building\|Linking" "$log" && echo "ferry: rebuilt the tool in $build" >&2
rm -f "$log"
trap - EXIT
exec "$build/ferry" "$@"
