#!/bin/sh
# Installs everything parle needs to build and test, from Debian 12 packages
# (g++ too: nvcc, the CUDA compiler, needs it as its host compiler),
# and TensorBoard from PyPI in a venv at build-venv/ (ignored by git): the
# reader tests/integration/tensorboard.sh checks parlectl's event files with.
# prometheus-node-exporter and prometheus (for promtool) read parled's
# metrics file in tests/integration/metrics.sh; tmux drives `parlectl top`
# in tests/integration/top.sh.
#   scripts/install-deps.sh           build + test dependencies, Fashion-MNIST
#   scripts/install-deps.sh --bench   also Debian's PyTorch (python3-torch), measured beside
#                                     the benchmarks' reference, pip's (bench/pip_torch.sh)
set -eu
pkgs="meson ninja-build pkg-config gcc g++ clang libclang-rt-14-dev python3
      libuv1-dev libcjson-dev zlib1g-dev libdnnl-dev dataset-fashion-mnist
      librsvg2-bin openmpi-bin libopenmpi-dev man-db python3-venv faketime
      prometheus-node-exporter prometheus tmux"
[ "${1:-}" = "--bench" ] && pkgs="$pkgs python3-torch"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
echo "install-deps: installed $(echo $pkgs | wc -w) packages"
venv="$(cd "$(dirname "$0")/.." && pwd)/build-venv"
if ! "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
    { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q tensorboard==2.21.0; } || {
        echo "install-deps: could not install tensorboard from PyPI into $venv" >&2
        exit 1
    }
fi
echo "install-deps: $("$venv/bin/python" -c 'import tensorboard; print("tensorboard", tensorboard.__version__)') in $venv"
