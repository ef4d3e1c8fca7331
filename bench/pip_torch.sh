#!/bin/sh
# PyTorch as users install it (pip: MKL, oneDNN at AVX-512), in a virtual
# environment under build-bench/, for the benchmarks' reference. Never a build
# or test need. Idempotent: an environment that already imports torch is kept.
#
#   bench/pip_torch.sh [DIR]     (default build-bench/torch-pip)
#
# Prints the environment's python, torch's version and the first lines of
# torch.__config__.show() (its BLAS, oneDNN, MKL and CPU capability).
set -eu
cd "$(dirname "$0")/.."
VENV=${1:-build-bench/torch-pip}
PY="$VENV/bin/python"

if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
    echo "pip_torch.sh: installing torch and numpy into $VENV (a few GB, minutes)..." >&2
    [ -x "$PY" ] || python3 -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet torch numpy
fi
echo "python: $(cd "$(dirname "$PY")" && pwd)/python"
"$PY" - <<'EOF'
import torch
print(f"torch {torch.__version__}")
for line in torch.__config__.show().splitlines()[:10]:
    if line.strip() and "Build settings" not in line:
        print(line)
EOF
