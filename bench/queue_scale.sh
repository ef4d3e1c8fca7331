#!/bin/bash
# parled's cost as its queue grows (not a test: figures printed, nothing
# asserted). A release build's parled with --devices cpu, one long job
# running and N tiny jobs queued behind it, all submitted by root (an admin):
#
# - submit: the median time of `parlectl submit` (a whole client: start,
#   connect, send, reply) with SMALL jobs queued and with N, and their ratio;
# - the CPU time parled's event-loop thread spent queueing the N jobs
#   (pipelined on one connection);
# - list: the median time of `parlectl list --json` (its default page) and
#   the bytes of its reply, at N queued;
# - latency: the median and the worst of `parlectl status ID` from a second
#   client while a first submits and cancels in a loop;
# - idle: a second parled with one held job and N jobs waiting on it (half
#   of them held too), nothing running: its event-loop thread's CPU over
#   IDLE_S seconds, as a share of one core.
#
#   bench/queue_scale.sh [BUILD] [N]   (default build-bench, 10000)
#
# BUILD is set up as a release build (without CUDA) if it is not there yet.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-bench}
N=${2:-10000}
SMALL=100 REPS=15 IDLE_S=${IDLE_S:-20}
if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" --buildtype=release -Dcuda=disabled >/dev/null
fi
ninja -C "$BUILD" daemon/parled client/parlectl tests/integration/rawclient >/dev/null
[ "$(meson introspect --buildoptions "$BUILD" | python3 -c 'import json, sys
print([o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"][0])')" = release ] ||
    echo "warning: $BUILD is not a release build: its figures are not comparable" >&2
PARLED=$BUILD/daemon/parled PARLECTL=$BUILD/client/parlectl RAW=$BUILD/tests/integration/rawclient
TMP=$(mktemp -d "${TMPDIR:-/tmp}/parle-bench.XXXXXX")
SOCK=$TMP/parled.sock PID=
stop() {
    [ -z "$PID" ] || { kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }
    PID=
}
trap 'stop; rm -rf "$TMP"' EXIT

start() { # STATE_DIR
    "$PARLED" --socket "$SOCK" --state-dir "$1" --devices cpu --max-jobs-per-user 1000000 \
        --log-level warn >"$TMP/parled.out" 2>>"$TMP/parled.err" &
    PID=$!
    for _ in $(seq 100); do
        grep -q "^parled ready" "$TMP/parled.out" && return 0
        sleep 0.1
    done
    echo "parled did not start: $(tail -5 "$TMP/parled.err")" >&2
    exit 1
}
ctl() { "$PARLECTL" --socket "$SOCK" "$@"; }
# jget PATH: a value of the JSON on stdin (PATH: Python subscripts, ["a"]["b"]).
jget() { python3 -c 'import json, sys; print(json.load(sys.stdin)'"$1"')'; }
# wait_shown ID STATE: until the job is shown so (a minute at most).
wait_shown() {
    for _ in $(seq 600); do
        [ "$(ctl status "$1" --json | jget '["state"]')" = "$2" ] && return 0
        sleep 0.1
    done
    echo "job $1 did not become $2" >&2
    exit 1
}
# The event loop's thread (parled's main thread): user + system seconds.
loop_cpu() { awk '{printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/$PID/task/$PID/stat"; }
# job EPOCHS [EXTRA]: a job object, on one line.
job() {
    printf '{"name":"bench","model":{"arch":"mlp"},"data":{"dataset":"synthetic","train_limit":256,"test_limit":64},"algorithm":{"name":"sgd"},"optim":{"lr":0.05,"batch":32},"epochs":%s,"seed":3,"devices":"cpu","log_every":1000%s}' "$1" "${2:-}"
}
# submit_many COUNT [EXTRA]: COUNT submits pipelined on one connection.
submit_many() {
    local line
    line="{\"op\":\"submit\",\"job\":$(job 1 "${2:-}")}"
    yes "$line" | head -n "$1" | "$RAW" --lines "$1" "$SOCK" | grep -vc '"ok":true' >"$TMP/bad" || true
    [ "$(cat "$TMP/bad")" = 0 ] || { echo "some submits failed" >&2; exit 1; }
}
# ms CMD...: milliseconds CMD takes, one run.
ms() {
    local s e
    s=$(date +%s%N)
    "$@" >/dev/null
    e=$(date +%s%N)
    echo $(((e - s) / 1000))
}
# stats: "median worst" in ms of microsecond lines on stdin.
stats() { sort -n | awk '{a[NR] = $1} END {printf "%.1f %.1f", a[int((NR + 1) / 2)] / 1000, a[NR] / 1000}'; echo; }
submit_times() {
    for _ in $(seq "$REPS"); do ms ctl submit -q "$TMP/tiny.json"; done | stats
}

job 1 >"$TMP/tiny.json"
job 100000 >"$TMP/long.json"
echo "parle queue_scale: $(git rev-parse --short HEAD 2>/dev/null), $BUILD, N=$N, load $(cut -d' ' -f1-3 /proc/loadavg)"

start "$TMP/state"
long=$(ctl submit -q "$TMP/long.json")
wait_shown "$long" running
submit_many "$SMALL"
read -r small_med _ < <(submit_times)
cpu0=$(loop_cpu) t0=$(date +%s%N)
submit_many "$((N - SMALL - REPS))"
cpu1=$(loop_cpu) t1=$(date +%s%N)
read -r big_med _ < <(submit_times)
total=$(ctl status --json | jget '["daemon"]["jobs"]["queued"]')
printf 'submit: median %s ms at %d queued, %s ms at %d queued: ratio %.2f\n' "$small_med" \
    "$((SMALL + 0))" "$big_med" "$total" "$(echo "$big_med / $small_med" | bc -l)"
printf 'queueing %d jobs: %.1f s of the loop thread'"'"'s CPU (%.2f ms a job), %.1f s wall\n' \
    "$((N - SMALL - REPS))" "$(echo "$cpu1 - $cpu0" | bc -l)" \
    "$(echo "($cpu1 - $cpu0) * 1000 / ($N - $SMALL - $REPS)" | bc -l)" \
    "$(echo "($t1 - $t0) / 1000000000" | bc -l)"
read -r list_med list_max < <(for _ in $(seq "$REPS"); do ms ctl list --json; done | stats)
bytes=$(echo '{"op":"list"}' | "$RAW" --lines 1 "$SOCK" | wc -c)
printf 'list --json (default page) at %d queued: median %s ms (worst %s), %d bytes\n' "$total" \
    "$list_med" "$list_max" "$bytes"
# One client submits and cancels in a loop; another asks a job's status.
( while [ ! -e "$TMP/stop" ]; do
      id=$(ctl submit -q "$TMP/tiny.json") && ctl cancel "$id" >/dev/null
  done ) &
churn=$!
sleep 1
read -r lat_med lat_max < <(for _ in $(seq 40); do ms ctl status "$long"; sleep 0.05; done | stats)
touch "$TMP/stop"
wait "$churn"
printf 'status from another client while one submits and cancels in a loop: median %s ms, worst %s ms\n' \
    "$lat_med" "$lat_max"
stop

# Idle: nothing runs, N jobs wait on a held one, half of them held too.
start "$TMP/idle"
first=$(ctl submit -q "$TMP/long.json")
ctl hold "$first" >/dev/null
wait_shown "$first" held
submit_many "$N" ",\"after\":\"$first\""
seq 2 2 "$N" | awk '{printf "{\"op\":\"hold\",\"id\":\"j%04d\"}\n", $1 + 1}' |
    "$RAW" --lines "$((N / 2))" "$SOCK" >/dev/null
sleep 2
c0=$(loop_cpu)
sleep "$IDLE_S"
c1=$(loop_cpu)
printf 'idle with %d jobs held or waiting on a held job: %.2f%% of a core over %d s\n' "$N" \
    "$(echo "($c1 - $c0) * 100 / $IDLE_S" | bc -l)" "$IDLE_S"
