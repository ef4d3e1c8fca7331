#!/bin/bash
# The instructions parled's loop spends queueing jobs, counted by valgrind's
# callgrind (not a test: figures printed, nothing asserted). Where
# bench/queue_scale.sh times the loop thread, whose figures move by half on
# a small shared machine, this counts: the same build gives the same figures
# to a fraction of a percent, so two trees can be compared at one size.
#
# A release build's parled with --devices cpu runs under callgrind,
# collecting only inside jobs_submit and jobs_schedule (a submission and a
# scheduling pass, what they call included). One job is submitted and held,
# then N jobs that run after it are submitted pipelined on one connection:
# nothing runs, each submit is followed by a pass over the queue so far.
# Printed: the passes and submits, the instructions of each on average, and
# their total.
#
#   bench/queue_instructions.sh [BUILD] [N]   (default build-bench, 500)
#
# Needs valgrind (apt-get install valgrind). BUILD is set up as a release
# build (without CUDA) if it is not there yet.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-bench}
N=${2:-500}
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" --buildtype=release -Dcuda=disabled >/dev/null
fi
ninja -C "$BUILD" daemon/parled client/parlectl tests/integration/rawclient >/dev/null
PARLED=$BUILD/daemon/parled PARLECTL=$BUILD/client/parlectl RAW=$BUILD/tests/integration/rawclient
TMP=$(mktemp -d "${TMPDIR:-/tmp}/parle-bench.XXXXXX")
SOCK=$TMP/parled.sock PID=
trap '[ -z "$PID" ] || kill -KILL "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT

valgrind --tool=callgrind --callgrind-out-file="$TMP/callgrind.out" \
    --toggle-collect=jobs_submit --toggle-collect=jobs_schedule \
    "$PARLED" --socket "$SOCK" --state-dir "$TMP/state" --devices cpu \
    --max-jobs-per-user 1000000 --log-level warn >"$TMP/parled.out" 2>"$TMP/parled.err" &
PID=$!
for _ in $(seq 300); do
    grep -q "^parled ready" "$TMP/parled.out" && break
    sleep 0.2
done
grep -q "^parled ready" "$TMP/parled.out" || { echo "parled did not start" >&2; exit 1; }
ctl() { "$PARLECTL" --socket "$SOCK" "$@"; }
job='{"name":"bench","model":{"arch":"mlp"},"data":{"dataset":"synthetic","train_limit":256,"test_limit":64},"algorithm":{"name":"sgd"},"optim":{"lr":0.05,"batch":32},"epochs":100000,"seed":3,"devices":"cpu","log_every":1000}'
echo "$job" >"$TMP/first.json"
first=$(ctl submit -q "$TMP/first.json")
ctl hold "$first" >/dev/null
for _ in $(seq 120); do
    ctl status "$first" --json | grep -q '"held"' && break
    sleep 0.5
done
ctl status "$first" --json | grep -q '"held"' || { echo "job $first was not held" >&2; exit 1; }
line="{\"op\":\"submit\",\"job\":${job%\}},\"after\":\"$first\"}}"
bad=$(yes "$line" | head -n "$N" | "$RAW" --lines "$N" "$SOCK" | grep -vc '"ok":true' || true)
[ "$bad" = 0 ] || { echo "$bad submits failed" >&2; exit 1; }
kill -TERM "$PID"
wait "$PID" || true
PID=
src=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
    "$BUILD/meson-info/meson-info.json")
echo "parle queue_instructions: $(git -C "$src" rev-parse --short HEAD 2>/dev/null), $BUILD, N=$N"
# Each function's calls and inclusive cost, from the calls= lines of the
# callgrind file (the cost line after each is what the call took).
python3 - "$TMP/callgrind.out" <<'EOF'
import re
import sys

names, calls, cost, callee, total = {}, {}, {}, None, 0
for line in open(sys.argv[1]):
    m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
    if m:
        kind, idx, name = m.groups()
        names[idx] = name or names[idx]
        callee = names[idx] if kind == "cfn" else None
        continue
    m = re.match(r"^calls=(\d+)", line)
    if m and callee:
        calls[callee] = calls.get(callee, 0) + int(m.group(1))
        continue
    if callee and re.match(r"^[+-]?\d", line) and callee in calls:
        cost[callee] = cost.get(callee, 0) + int(line.split()[1])
        callee = None
    elif line.startswith("totals:"):
        total = int(line.split()[1])
for f, what in (("jobs_schedule", "scheduling passes"), ("jobs_submit", "submits")):
    n = calls.get(f, 0)
    print(f"{what}: {n}, {cost.get(f, 0) / max(n, 1) / 1e3:.1f} thousand instructions each")
print(f"all: {total / 1e6:.1f} million instructions")
EOF
