#!/usr/bin/env bash
# Installs the Debian packages ferry needs to build and test, skipping those already present.
# Usage: scripts/install-deps.sh [--torch]   (--torch adds libtorch-dev for side-by-side benchmarks)
# nlohmann-json3-dev: the tests' safetensors reader (tests/support/safetensors.h).
set -euo pipefail

packages=(cmake g++ make libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev libcli11-dev
          clang-format nlohmann-json3-dev)
if [[ "${1:-}" == "--torch" ]]; then
  packages+=(libtorch-dev)
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
