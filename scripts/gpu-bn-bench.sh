#!/bin/sh
# The batch norm and convolution-algorithm round on a GPU, in one command
# (docs/gpu.md, "The split batch norm and the algorithm default"):
#   scripts/gpu-bn-bench.sh [--out DIR] [--build DIR] [--deps DIR] [--budget SECONDS]
#                           [--reps N] [-- EXTRA torch_gpu_step.py ARGS]
# 1. scripts/gpu-check.sh --steps build,test: the build and the whole gpu
#    suite (gpu_ops, gpu_bf16 and gpu_model check the split batch norm against the CPU
#    and its bits run to run);
# 2. bench/torch_gpu_step.py for WRN-28-10 and WRN-16-4 at bf16 and tf32,
#    ours with both batch norms (classic, split) and both algorithm choices
#    (timed, heuristic; the "job" column marks the default), PyTorch beside
#    where it imports;
# then everything, logs and figures, into one archive DIR/gpu-bn.tgz and the
# summary beside it (DIR/summary.txt). DIR defaults to $OUT when set (the
# device machine's folder that comes back), else ./gpu-bn-out. --budget
# (default 500) bounds the whole run; the bench gets what the check left.
# --deps: scripts/gpu-carry.sh's packages for the build (default
# .gpu-carry/debs where it exists). Without a GPU: the build runs, the rest
# is skipped, exit 0.
set -u
cd "$(dirname "$0")/.." || exit 2
start=$(date +%s)
out=${OUT:-gpu-bn-out}
build="build-gpu"
budget=500
reps=3
deps=""
[ -d .gpu-carry/debs ] && deps=.gpu-carry/debs
while [ $# -gt 0 ]; do
    case $1 in
    --out | --build | --deps | --budget | --reps)
        [ $# -ge 2 ] || { echo "gpu-bn-bench: $1 needs a value" >&2; exit 2; }
        case $1 in
        --out) out=$2 ;; --build) build=$2 ;; --deps) deps=$2 ;; --budget) budget=$2 ;;
        --reps) reps=$2 ;;
        esac
        shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bn-bench: unknown argument $1" >&2; exit 2 ;;
    esac
done
for v in "$budget" "$reps"; do
    case $v in '' | *[!0-9]*) echo "gpu-bn-bench: --budget and --reps are whole numbers" >&2
        exit 2 ;; esac
done
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
work=$out/gpu-bn
rm -rf "$work"
mkdir -p "$work"

left() { echo $((budget - ($(date +%s) - start) - 15)); }

# 1. build and gpu suite (gpu-check.sh keeps its own summary and env.sh).
check_budget=$(($(left) * 3 / 5))
./scripts/gpu-check.sh --steps build,test --out "$work/check" --build "$build" \
    ${deps:+--deps "$deps"} --budget "$check_budget" 2>&1 | tee "$work/check.log"
fails=$(grep -c 'FAIL' "$work/check/summary.txt" 2>/dev/null)
[ -n "$fails" ] || fails=1 # no summary: the check itself broke

# 2. the bench, in the environment the build saw.
bench_rc=skip
if [ "$fails" != 0 ]; then
    echo "the check failed: the bench is not run"
    bench_rc=not-run
elif grep -q '^gpu *skip' "$work/check/summary.txt" 2>/dev/null; then
    echo "SKIP: no GPU: the bench is not run"
elif [ "$(left)" -le 30 ]; then
    echo "bench: no budget left"
    bench_rc=no-time
else
    # shellcheck disable=SC1091
    [ -f "$work/check/env.sh" ] && . "$work/check/env.sh"
    PYTHONUNBUFFERED=1 timeout -k 5 "$(left)" python3 bench/torch_gpu_step.py \
        --ours "$build/bench/gpu_step" --arch wrn28,wrn16 --precision bf16,tf32 \
        --conv-algorithms timed,heuristic --batchnorm classic,split --reps "$reps" "$@" \
        >"$work/bench.txt" 2>&1
    bench_rc=$?
    sed -n '/^GPU step/,$p' "$work/bench.txt"
    grep '^BREAKDOWN' "$work/bench.txt" >"$work/breakdown.txt"
fi

{
    echo "gpu-bn-bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(($(date +%s) - start)) s"
    cat "$work/check/summary.txt" 2>/dev/null || echo "check: no summary"
    case $bench_rc in
    [0-9]*) echo "bench      exit $bench_rc (bench.txt, breakdown.txt)" ;;
    *) echo "bench      $bench_rc" ;;
    esac
} >"$out/summary.txt"
cp "$out/summary.txt" "$work/summary.txt"
tar -czf "$out/gpu-bn.tgz" -C "$out" --exclude deps gpu-bn && rm -rf "$work"
cat "$out/summary.txt"
echo "archive: $out/gpu-bn.tgz"
[ "$fails" = 0 ] && { [ "$bench_rc" = 0 ] || [ "$bench_rc" = skip ]; }
