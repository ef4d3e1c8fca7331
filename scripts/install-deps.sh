#!/bin/sh
# Installs everything parle needs to build and test, from Debian 12 packages.
#   scripts/install-deps.sh           build + test dependencies, Fashion-MNIST
#   scripts/install-deps.sh --bench   also PyTorch (python3-torch), the benchmarks' reference
set -eu
pkgs="meson ninja-build pkg-config gcc clang libclang-rt-14-dev python3
      libuv1-dev libcjson-dev zlib1g-dev libdnnl-dev dataset-fashion-mnist
      librsvg2-bin openmpi-bin libopenmpi-dev man-db"
[ "${1:-}" = "--bench" ] && pkgs="$pkgs python3-torch"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
echo "install-deps: installed $(echo $pkgs | wc -w) packages"
