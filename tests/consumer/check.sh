#!/usr/bin/env bash
# Installs ferry from a build directory into a temporary prefix, builds and runs the consumer
# project against it with find_package(ferry), and runs the installed `ferry` tool and (when it
# was built) `import ferry` from the prefix and again after moving the prefix elsewhere, all
# without LD_LIBRARY_PATH: installed binaries find libferry through $ORIGIN-relative run paths.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: check.sh <ferry-build-dir>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$root/tests/consumer" -B "$tmp/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/consumer-build" >/dev/null
unset LD_LIBRARY_PATH
"$tmp/consumer-build/consumer"

check_prefix() {
  "$1/bin/ferry" --version
  "$1/bin/ferry" devices >/dev/null
  local package
  package=$(find "$1" -path '*/dist-packages/ferry/__init__.py' -print -quit)
  if [[ -n "$package" ]]; then
    PYTHONPATH=$(dirname "$(dirname "$package")") /usr/bin/python3 -c \
      'import ferry; t = ferry.arange(4, device="sim:0"); print("import ferry", ferry.__version__, "from", ferry.__file__, t.cpu().tolist())'
  fi
}
check_prefix "$prefix"
mv "$prefix" "$tmp/moved"
check_prefix "$tmp/moved"
