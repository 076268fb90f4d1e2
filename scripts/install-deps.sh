#!/usr/bin/env bash
# Installs the Debian packages ferry needs to build and test, skipping those already present.
# Usage: scripts/install-deps.sh [--torch]   (--torch adds libtorch-dev for side-by-side benchmarks)
# The tests compare every operator with PyTorch 1.13 (tests/reference): Debian's python3-torch
# and python3-numpy, run by /usr/bin/python3, and nlohmann-json3-dev for the files they share.
set -euo pipefail

packages=(cmake g++ make libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev libcli11-dev
          clang-format nlohmann-json3-dev python3 python3-numpy python3-torch)
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
