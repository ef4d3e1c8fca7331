#!/bin/bash
# Admission by memory (docs/architecture.md): with a fake meminfo (the
# PARLE_MEMINFO hook) of 1 GiB, a job that needs more is refused at submit,
# naming both figures; of two jobs that fit one at a time, the second waits
# in the queue for memory, saying so in its status, and runs once the
# memory is there. A job waiting for memory keeps no cores from a later job
# that fits now, and preempts no job of a lower priority for its cores.
. "$(dirname "$0")/lib.sh"
MEMINFO=$TMP/meminfo
meminfo() { # TOTAL_KB AVAILABLE_KB, replaced whole as the daemon may read it any time
    printf 'MemTotal:       %s kB\nMemFree:        %s kB\nMemAvailable:   %s kB\n' "$1" "$2" "$2" \
        >"$MEMINFO.new"
    mv "$MEMINFO.new" "$MEMINFO"
}
meminfo 1048576 1048576
# The first job to run parks after its step 4 until the test makes the
# release file, so it is running for sure while the memory runs short.
PARLE_MEMINFO=$MEMINFO PARLE_FAULT_REPLICA=0:park:1:4 PARLE_FAULT_RELEASE=$TMP/release start_daemon

# WRN-28-10, 8 replicas: some 3 GB each, against 1 GiB.
cat >"$TMP/big.json" <<JOB
{"model": {"arch": "wrn", "depth": 28, "width": 10},
 "data": {"dataset": "synthetic", "train_limit": 256, "test_limit": 64},
 "algorithm": {"name": "parle", "replicas": 8, "L": 5}, "optim": {"lr": 0.1, "batch": 128},
 "epochs": 1, "devices": "cpu"}
JOB
if ctl submit "$TMP/big.json" >"$TMP/big.out" 2>&1; then
    fail "a job needing more than MemTotal was accepted: $(cat "$TMP/big.out")"
fi
grep -q "invalid_job\|invalid job" "$TMP/big.out" || fail "not an invalid-job refusal: $(cat "$TMP/big.out")"
grep -Eq "memory: needs [0-9.]+ GiB on cpu \(model [0-9.]+ GiB x 8 replicas, .*\) but the machine has 1.00 GiB \(MemTotal\)" \
    "$TMP/big.out" || fail "the refusal does not name both figures: $(cat "$TMP/big.out")"
[ -z "$(ls "$STATE/jobs")" ] || fail "a refused job left a job dir: $(ls "$STATE/jobs")"

# Two small jobs; while the first runs, the machine's memory runs short.
mlp_job "$TMP/job.json" 6
a=$(ctl submit "$TMP/job.json" -q) || fail "submit a"
wait_log "$a" "parked after step" 30
meminfo 1048576 1024
b=$(ctl submit "$TMP/job.json" -q) || fail "submit b (it fits MemTotal)"
ctl status "$a" --json >"$TMP/a.json"
[ "$(field "$TMP/a.json" state)" = running ] && [ "$(field "$TMP/a.json" waiting)" = null ] ||
    fail "a running job waits: $(cat "$TMP/a.json")"
: >"$TMP/release"
# At a's end b's devices are free, its memory is not.
for _ in $(seq 300); do
    ctl status "$b" --json >"$TMP/b.json"
    case "$(field "$TMP/b.json" waiting)" in memory:*) break ;; esac
    [ "$(field "$TMP/b.json" state)" = queued ] || fail "$b left the queue without memory: $(cat "$TMP/b.json")"
    sleep 0.1
done
waiting=$(field "$TMP/b.json" waiting)
case "$waiting" in
"memory: needs "*" on cpu ("*") but 1.0 MiB are available now (MemAvailable); it preempts no job"*) ;;
*) fail "$b does not wait for memory: $(cat "$TMP/b.json")" ;;
esac
[ "$(field "$TMP/b.json" state)" = queued ] || fail "$b is not queued"
ctl status "$a" --json >"$TMP/a.json"
[ "$(field "$TMP/a.json" state)" = done ] || fail "$a is not done while $b waits"
ctl status "$b" | grep -q "^  waiting: memory: needs " || fail "parlectl status shows no reason: $(ctl status "$b")"
wait_log "$b" "waiting for memory: needs" 5
# The memory frees outside parled: the periodic retry starts b.
meminfo 1048576 1048576
wait_state "$b" running 10
ctl wait "$b" || fail "$b did not end done"
ctl status "$b" --json >"$TMP/b.json"
[ "$(field "$TMP/b.json" waiting)" = null ] || fail "$b still waits: $(cat "$TMP/b.json")"

# A job waiting for memory keeps no devices and preempts no job: l runs on
# one core at priority -1; big (the whole CPU, priority 0, 150 MiB of data
# against 64 MiB available) would preempt l for its cores, but waits for
# memory instead; s (one core), submitted after it, runs meanwhile.
if [ "$(nproc)" -lt 2 ]; then
    echo "SKIP (memory waits beside a running job): two CPU cores are needed"
    stop_daemon
    echo PASS
    exit 0
fi
meminfo 1048576 65536
sed 's/"devices": "cpu"/"devices": "cpu:1"/' "$TMP/job.json" >"$TMP/small.json"
sed 's/"epochs": 6/"epochs": 1000/' "$TMP/small.json" >"$TMP/long.json"
sed 's/"train_limit": 1024/"train_limit": 50000/' "$TMP/job.json" >"$TMP/bigdata.json"
waits_keeping_nothing "$TMP/long.json" "$TMP/bigdata.json" "$TMP/small.json" memory \
    "^memory: needs .* but .*; it preempts no job .*keeps no devices from jobs that fit now$"
stop_daemon
echo PASS
