#!/bin/sh
# Builds the benchmarks (release, build-bench/) and runs them all, each against
# its reference measured in the same run; writes every output to
# bench/results/*.txt and ends with a summary table (bench/README.md says what
# each number means). PyTorch is the one users install: pip's, in a venv that
# bench/pip_torch.sh makes under build-bench/torch-pip on first use.
#
#   bench/run.sh                   everything (about 25-30 minutes on 2 idle cores)
#   bench/run.sh --quick           fewer repetitions (about 10 minutes; noisier)
#   bench/run.sh --gpu             only the GPU step, ours vs PyTorch on GPU 0 (builds
#                                  build-gpu/ with CUDA; a few minutes)
set -eu
cd "$(dirname "$0")/.."
BUILD=build-bench
RESULTS=bench/results
PY=python3
quick=0
gpu=0
for a in "$@"; do
    case "$a" in
    --quick) quick=1 ;;
    --gpu) gpu=1 ;;
    *) echo "usage: bench/run.sh [--quick] [--gpu]" >&2; exit 2 ;;
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

[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" -Dcuda=disabled --buildtype=release >/dev/null
ninja -C "$BUILD" bench/lenet_step bench/sync_cost daemon/parle-train >/dev/null
mkdir -p "$RESULTS"
bench/pip_torch.sh | tee "$RESULTS/pip_torch.txt"
PIP_PY="$BUILD/torch-pip/bin/python"

if [ "$quick" = 1 ]; then
    table=--quick layer_reps=3 sync_reps=3 job_budget=2 job_reps=1 job_limit=6400
else
    table= layer_reps=5 sync_reps=7 job_budget=4 job_reps=2 job_limit=12800
fi
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RESULTS/machine.txt"

echo "bench: LeNet, All-CNN, WRN-16-4 steps, ours vs PyTorch (interleaved)..." >&2
$PY bench/cpu_table.py $table --ours "$BUILD/bench/lenet_step" --pip-python "$PIP_PY" |
    tee "$RESULTS/cpu_table.txt"

echo "bench: LeNet step, per-layer breakdown of ours..." >&2
"$BUILD/bench/lenet_step" --layers --threads 1,2 --reps "$layer_reps" |
    tee "$RESULTS/lenet_layers.txt"

echo "bench: Parle sync cost vs memcpy..." >&2
"$BUILD/bench/sync_cost" --reps "$sync_reps" | tee "$RESULTS/sync_cost.txt"

echo "bench: Parle job, ours vs PyTorch (extrapolated), and ours vs its ideal..." >&2
$PY bench/parle_job.py --python "$PIP_PY" --budget "$job_budget" --reps "$job_reps" \
    --threads 1,2 --ours "$BUILD/daemon/parle-train" | tee "$RESULTS/parle_job.txt"
$PY bench/parle_job.py --breakdown --train-limit "$job_limit" --ours "$BUILD/daemon/parle-train" \
    --lenet-step "$BUILD/bench/lenet_step" --python "$PIP_PY" | tee -a "$RESULTS/parle_job.txt"

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS/machine.txt"
{
    echo
    echo "==== summary (bench/results/) ===="
    cat "$RESULTS/machine.txt"
    sed -n '/^| network/,$p' "$RESULTS/cpu_table.txt"
    grep -h '^SUMMARY' "$RESULTS/sync_cost.txt" "$RESULTS/parle_job.txt" |
        cut -f2- | column -t -s "$(printf '\t')"
    echo "ours per layer (1 thread, largest kinds):"
    sed -n '/^per-layer breakdown at 1 thread/,/^$/p' "$RESULTS/lenet_layers.txt" |
        sed -n '/^by kind:/,$p' | sed -n '2,7p'
} | tee "$RESULTS/summary.txt"
