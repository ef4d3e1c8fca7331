#!/bin/sh
# Builds the benchmarks (release, build-bench/) and runs them all, each against
# its reference measured in the same run; writes every output to
# bench/results/*.txt and ends with a summary table (bench/README.md says what
# each number means).
#
#   bench/run.sh                   everything (about 15-20 minutes on 2 idle cores)
#   bench/run.sh --quick           fewer repetitions (about 6-8 minutes; noisier)
#   bench/run.sh --fetch-openblas  first unpack Debian's OpenBLAS (OpenMP build) into
#                                  build-bench/openblas (apt-get download + dpkg -x, nothing
#                                  installed) so that PyTorch is also measured with it
#   bench/run.sh --gpu             only the GPU step, ours vs PyTorch on GPU 0 (builds
#                                  build-gpu/ with CUDA; a few minutes)
set -eu
cd "$(dirname "$0")/.."
BUILD=build-bench
RESULTS=bench/results
PY=/usr/bin/python3
quick=0
fetch=0
gpu=0
for a in "$@"; do
    case "$a" in
    --quick) quick=1 ;;
    --fetch-openblas) fetch=1 ;;
    --gpu) gpu=1 ;;
    *) echo "usage: bench/run.sh [--quick] [--fetch-openblas] [--gpu]" >&2; exit 2 ;;
    esac
done

if [ "$gpu" = 1 ]; then
    [ -f build-gpu/build.ninja ] || meson setup build-gpu -Dcuda=enabled >/dev/null
    ninja -C build-gpu bench/gpu_step >/dev/null
    mkdir -p "$RESULTS"
    # PyTorch with CUDA is whatever python3 is on PATH (the one that has it).
    python3 bench/torch_gpu_step.py --ours build-gpu/bench/gpu_step | tee "$RESULTS/gpu_step.txt"
    exit 0
fi

[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" -Dcuda=disabled >/dev/null
ninja -C "$BUILD" bench/lenet_step bench/sync_cost daemon/parle-train >/dev/null

OPENBLAS_DIR="$BUILD/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp"
if [ "$fetch" = 1 ] && [ ! -f "$OPENBLAS_DIR/libblas.so.3" ]; then
    mkdir -p "$BUILD/openblas"
    (cd "$BUILD/openblas" && apt-get download -q libopenblas0-openmp >/dev/null 2>&1 &&
        dpkg -x libopenblas0-openmp_*.deb .)
fi
openblas=""
[ -f "$OPENBLAS_DIR/libblas.so.3" ] && openblas=$(cd "$OPENBLAS_DIR" && pwd)

if [ "$quick" = 1 ]; then
    step_reps=3 layer_reps=3 sync_reps=3 job_budget=2 job_reps=1 cifar_reps=1
else
    step_reps=9 layer_reps=5 sync_reps=7 job_budget=4 job_reps=2 cifar_reps=3
fi
mkdir -p "$RESULTS"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RESULTS/machine.txt"

echo "bench: LeNet step, ours vs PyTorch (interleaved)..." >&2
$PY bench/lenet_step.py --reps "$step_reps" --openblas "$openblas" | tee "$RESULTS/lenet_step.txt"

# A CIFAR step is seconds: blocks of one step. PyTorch with the netlib BLAS
# would take minutes a step, so only the OpenBLAS reference (if fetched).
for arch in allcnn wrn; do
    echo "bench: $arch step, ours vs PyTorch+OpenBLAS, and the sgemm peak..." >&2
    $PY bench/lenet_step.py --arch "$arch" --reps "$cifar_reps" --steps 1 --warmup 1 \
        --no-plain-torch --openblas "$openblas" | tee "$RESULTS/${arch}_step.txt"
done

echo "bench: LeNet step, per-layer breakdown of ours..." >&2
"$BUILD/bench/lenet_step" --layers --reps "$layer_reps" | tee "$RESULTS/lenet_layers.txt"

echo "bench: Parle sync cost vs memcpy..." >&2
"$BUILD/bench/sync_cost" --reps "$sync_reps" | tee "$RESULTS/sync_cost.txt"

echo "bench: Parle job, ours vs PyTorch (extrapolated)..." >&2
# The stronger reference: PyTorch with OpenBLAS when we have it.
lib_path=${LD_LIBRARY_PATH:-}
[ -n "$openblas" ] && lib_path="$openblas${lib_path:+:$lib_path}"
LD_LIBRARY_PATH="$lib_path" $PY bench/parle_job.py --budget "$job_budget" --reps "$job_reps" --threads 1,2 |
    tee "$RESULTS/parle_job.txt"

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS/machine.txt"
{
    echo
    echo "==== summary (bench/results/) ===="
    cat "$RESULTS/machine.txt"
    grep -h '^SUMMARY' "$RESULTS/lenet_step.txt" "$RESULTS/allcnn_step.txt" \
        "$RESULTS/wrn_step.txt" "$RESULTS/sync_cost.txt" "$RESULTS/parle_job.txt" |
        cut -f2- | column -t -s "$(printf '\t')"
    echo "ours per layer (1 thread, largest kinds):"
    sed -n '/^per-layer breakdown at 1 thread/,/^$/p' "$RESULTS/lenet_layers.txt" |
        sed -n '/^by kind:/,$p' | sed -n '2,7p'
} | tee "$RESULTS/summary.txt"
