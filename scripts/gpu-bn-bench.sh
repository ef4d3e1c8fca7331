#!/bin/bash
# The batch norm and convolution-algorithm round on a GPU, in one command
# (docs/gpu.md, "The split batch norm and the algorithm default"):
#   scripts/gpu-bn-bench.sh [--out DIR] [--build DIR] [--deps DIR] [--budget SECONDS]
#                           [--reps N]
# In this order, each step bounded by what the budget has left:
# 1. the build (scripts/gpu-check.sh --steps build, its packages unpacked in
#    a temporary folder, never under DIR);
# 2. the batch norm's gpu tests: gpu_bn_split (the split kernels bit for bit
#    against the host replay of their reduction) and gpu_ops (every op
#    against the CPU backend);
# 3. the rows that decide: WRN-28-10 at bf16, cuDNN's heuristics, classic
#    and split batch norm (bench/gpu_step);
# 4. the rest of the gpu suite (its result recorded, the bench runs anyway);
# 5. the other rows: WRN-28-10 bf16 timed (auto's pick against the other
#    choice), tf32 both ways, WRN-16-4 likewise, each with both batch norms.
# Every line gpu_step prints goes into DIR/summary.txt as it comes, beside
# each step's result and time; bench/gpu_bn_compare.py adds split against
# classic (step, BN kernel time, achieved GB/s against a device copy) and
# auto's pick against both explicit choices. Logs and figures go into one
# archive, DIR/gpu-bn.tgz. DIR defaults to $OUT when set (the device
# machine's folder that comes back), else ./gpu-bn-out; --budget (default
# 480) bounds the whole run; --deps (default .gpu-carry/debs where it
# exists): scripts/gpu-carry.sh's packages. Exit 0 when everything that ran
# passed (without a GPU: the build passed, the rest is skipped), else 1.
set -u
cd "$(dirname "$0")/.." || exit 2
start=$(date +%s)
out=${OUT:-gpu-bn-out}
build="build-gpu"
budget=480
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
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bn-bench: unknown argument $1" >&2; exit 2 ;;
    esac
done
for v in "$budget" "$reps"; do
    case $v in '' | *[!0-9]*) echo "gpu-bn-bench: --budget and --reps are whole numbers" >&2
        exit 2 ;; esac
done
[ "$reps" -ge 1 ] || { echo "gpu-bn-bench: --reps is at least 1" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
# Everything but the summary and the archive lives outside $out, so that a
# run cut short leaves no unpacked packages there, only what came in time.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bn.XXXXXX") || exit 2
work=$tmp/gpu-bn
mkdir -p "$work"
summary=$out/summary.txt
failed=0

left() { echo $((budget - ($(date +%s) - start) - 20)); }
elapsed() { echo $(($(date +%s) - start)); }

# note LINE: into the summary now (and on the terminal).
note() { printf '%s\n' "$1" | tee -a "$summary"; }

# record STEP RESULT DETAIL: a step's line, with the time it ended.
record() {
    note "$(printf '%-10s %-5s %s (at %d s)' "$1" "$2" "$3" "$(elapsed)")"
    [ "$2" = FAIL ] && failed=1
}

finish() {
    python3 bench/gpu_bn_compare.py "$work/bench.txt" >"$work/compare.txt" 2>&1
    tee -a "$summary" <"$work/compare.txt"
    note "gpu-bn-bench: $(elapsed) s of $budget, $([ "$failed" = 0 ] && echo passed || echo FAILED)"
    cp "$summary" "$work/summary.txt"
    tar -czf "$out/gpu-bn.tgz" -C "$tmp" gpu-bn && echo "archive: $out/gpu-bn.tgz"
    rm -rf "$tmp"
    exit "$failed"
}
trap 'record run FAIL "stopped by a signal"; finish' INT TERM

: >"$summary"
: >"$work/bench.txt"
note "gpu-bn-bench: $(date -u '+%Y-%m-%d %H:%M UTC'), budget $budget s, reps $reps"

# within SECONDS CMD...: CMD, killed after SECONDS or at the budget's end,
# whichever comes first (124 then, as timeout says).
within() {
    secs=$(($1 < $(left) ? $1 : $(left)))
    shift
    if [ "$secs" -le 0 ]; then return 124; fi
    timeout -k 5 "$secs" "$@"
}

# ---- 1. the build, in the check's environment ----
within 330 ./scripts/gpu-check.sh --steps build --out "$tmp/check" --build "$build" \
    ${deps:+--deps "$deps"} --budget "$(left)" >"$work/check.log" 2>&1
for f in env.log setup.log build.log summary.txt env.sh; do
    [ -f "$tmp/check/$f" ] && cp "$tmp/check/$f" "$work/check-$f"
done
if [ ! -f "$tmp/check/summary.txt" ]; then
    tail -20 "$work/check.log"
    record build FAIL "gpu-check.sh left no summary: check.log"
    finish
fi
tee -a "$summary" <"$tmp/check/summary.txt"
grep -q '^build *pass' "$tmp/check/summary.txt" || { failed=1; finish; }
if grep -q '^gpu *skip' "$tmp/check/summary.txt"; then
    record tests skip "no GPU"
    record bench skip "no GPU"
    finish
fi
# shellcheck disable=SC1091
. "$tmp/check/env.sh"
if command -v meson >/dev/null; then meson=(meson); else meson=(python3 -m mesonbuild.mesonmain); fi
nvidia-smi -L 2>/dev/null | head -1 | tee -a "$summary"

# tests NAME SECONDS TEST...: meson's gpu tests by name; one summary line
# from meson's own counts.
tests() {
    name=$1 secs=$2
    shift 2
    if [ "$secs" -le 0 ]; then
        record "$name" skip "no time left: $*"
        return
    fi
    within "$secs" "${meson[@]}" test -C "$build" --print-errorlogs --num-processes 4 \
        --timeout-multiplier 0.3 "$@" >"$work/$name.log" 2>&1
    rc=$?
    grep -E '^ *[0-9]+/[0-9]+ ' "$work/$name.log" | tee -a "$summary"
    counts=$(sed -n 's/^\(Ok\|Fail\|Skipped\|Timeout\): *\([0-9][0-9]*\).*/\2 \1/p' \
        "$work/$name.log" | paste -sd, - | sed 's/,/, /g')
    case $rc in
    0) record "$name" pass "${counts:-no counts}" ;;
    124 | 137) record "$name" FAIL "out of time (${counts:-no counts}): $name.log" ;;
    *) record "$name" FAIL "${counts:-exit $rc}: $name.log" ;;
    esac
}

# bench NAME ARGS...: gpu_step with these rows, each line into bench.txt
# and the summary as it is printed.
bench() {
    name=$1
    shift
    if [ "$(left)" -le 10 ]; then
        record "$name" skip "no time left: $*"
        return
    fi
    note "---- bench $name: gpu_step $*"
    set -o pipefail
    within 600 "$build/bench/gpu_step" --reps "$reps" "$@" 2>&1 |
        while IFS= read -r line; do
            printf '%s\n' "$line" >>"$work/bench.txt"
            note "$line"
        done
    rc=$?
    set +o pipefail
    case $rc in
    0) record "$name" pass "bench.txt" ;;
    77) record "$name" skip "gpu_step sees no CUDA device" ;;
    124 | 137) record "$name" FAIL "out of time" ;;
    *) record "$name" FAIL "gpu_step exit $rc" ;;
    esac
}

# ---- 2-5 ----
tests bn-tests 120 gpu_bn_split gpu_ops
bench decide --arch wrn28 --precision bf16 --conv-algorithms heuristic --batchnorm classic,split
# The suite gets what is left but 100 s, kept for the other rows.
tests suite $(($(left) - 100)) gpu_vecops gpu_errors gpu_model gpu_job gpu_comm gpu_bf16 gpu_parled
bench bf16-timed --arch wrn28 --precision bf16 --conv-algorithms timed --batchnorm classic,split
bench wrn16-bf16 --arch wrn16 --precision bf16 --conv-algorithms heuristic --batchnorm classic,split
bench tf32 --arch wrn28,wrn16 --precision tf32 --conv-algorithms timed --batchnorm classic,split
bench tf32-heur --arch wrn28 --precision tf32 --conv-algorithms heuristic --batchnorm classic,split
finish
