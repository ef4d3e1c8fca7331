#!/bin/bash
# What writing --metrics-file costs parled's event loop with 1,000 jobs kept
# (docs/monitoring.md): a parled with one job running and a sweep of 999 queued
# behind it, its metrics file written every 0.5 s; each file reports the
# loop's time for the write before it (the queue's overview and the text;
# the disk is a worker's): parle_metrics_render_seconds on the monotonic
# clock and parle_metrics_render_cpu_seconds, the loop thread's CPU time
# (the wall time of a loaded machine counts its preemptions too). Prints
# the median and the largest of N such figures and the file's size. Not a
# test.
#   bench/metrics_cost.sh [BUILD_DIR] [N]      (default build, 40)
set -eu
build=${1:-build}
n=${2:-40}
root=$(cd "$(dirname "$0")/.." && pwd)
parled=$root/$build/daemon/parled parlectl=$root/$build/client/parlectl
tmp=$(mktemp -d /tmp/parle-metrics-cost.XXXXXX)
pid=
trap '[ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
ctl() { "$parlectl" --socket "$tmp/sock" "$@"; }

"$parled" --socket "$tmp/sock" --state-dir "$tmp/state" --devices cpu --max-jobs-per-user 0 \
    --metrics-file "$tmp/parle.prom" --metrics-interval 0.5 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do grep -q "^parled ready" "$tmp/out" && break; sleep 0.1; done
cat >"$tmp/job.json" <<'JOB'
{"name": "cost", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 1024, "test_limit": 256},
 "algorithm": {"name": "sgd"}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": 100000, "seed": 3, "devices": "cpu", "log_every": 4}
JOB
ctl submit -q "$tmp/job.json" >/dev/null
python3 - "$tmp/job.json" >"$tmp/sweep.json" <<'PY'
import json, sys
base = json.load(open(sys.argv[1]))
print(json.dumps({"name": "cost", "base": base,
                  "grid": {"optim.lr": [round(0.001 * (i + 1), 6) for i in range(999)]}}))
PY
ctl sweep -q "$tmp/sweep.json" >/dev/null
kept() { sed -n 's/^parle_jobs{state="[a-z]*"} \([0-9]*\)$/\1/p' "$tmp/parle.prom" | paste -sd+ | bc; }
for _ in $(seq 600); do [ "$(kept 2>/dev/null || echo 0)" = 1000 ] && break; sleep 0.5; done
[ "$(kept)" = 1000 ] || { echo "metrics_cost: the file does not count 1000 jobs" >&2; exit 1; }
: >"$tmp/figures"
last=
while [ "$(wc -l <"$tmp/figures")" -lt "$n" ]; do
    w=$(sed -n 's/^parle_metrics_writes_total \(.*\)$/\1/p' "$tmp/parle.prom")
    if [ -n "$w" ] && [ "$w" != "$last" ]; then
        last=$w
        echo "$(sed -n 's/^parle_metrics_render_seconds \(.*\)$/\1/p' "$tmp/parle.prom") $(sed -n 's/^parle_metrics_render_cpu_seconds \(.*\)$/\1/p' "$tmp/parle.prom")" >>"$tmp/figures"
    fi
    sleep 0.2
done
python3 - "$tmp/figures" "$(stat -c %s "$tmp/parle.prom")" <<'PY'
import statistics, sys
rows = [tuple(float(x) for x in l.split()) for l in open(sys.argv[1])]
for i, what in ((0, "wall (monotonic)"), (1, "loop thread CPU")):
    v = sorted(r[i] for r in rows)
    print(f"1000 jobs kept, the loop's part of a metrics write, {what}: median "
          f"{statistics.median(v) * 1e3:.3f} ms, largest {v[-1] * 1e3:.3f} ms over {len(v)} writes")
print(f"the file: {int(sys.argv[2])} bytes; load average {open('/proc/loadavg').read().split()[0]}")
PY
ctl sweep cancel s0001 >/dev/null 2>&1 || true
