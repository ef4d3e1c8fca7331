#!/bin/bash
# Cancel and SIGTERM while a job loads its data (PARLE_FAULT_REPLICA's load
# phase holds the first job's load until its stop flag is set, as a huge set
# or a slow file system would): a cancel ends it cancelled within seconds and
# the next job runs; SIGTERM stops parled within seconds, nothing written,
# and the next parled runs the job, queued first, to done.
. "$(dirname "$0")/lib.sh"

# loading ID: the job runs and has not logged its data yet; give the load
# time to be held.
loading() {
    wait_state "$1" running 30
    sleep 0.5
    grep -q "data: " "$STATE/jobs/$1/log.txt" && fail "job $1 is past its data load"
    grep -q "stopped while loading" "$STATE/jobs/$1/log.txt" && fail "job $1 stopped by itself"
}

# nothing_written ID: no checkpoint, no master (the job never trained).
nothing_written() {
    [ ! -e "$STATE/jobs/$1/ckpt" ] || [ -z "$(ls -A "$STATE/jobs/$1/ckpt")" ] ||
        fail "job $1 wrote a checkpoint while loading"
    [ ! -e "$STATE/jobs/$1/master.safetensors" ] || fail "job $1 wrote a master while loading"
}

PARLE_FAULT_REPLICA=0:load:1 start_daemon
mlp_job "$TMP/job.json" 2
a=$(ctl submit "$TMP/job.json" -q) || fail "submit a"
loading "$a"
ctl cancel "$a" | grep -q "cancelling" || fail "cancel of loading $a"
wait_state "$a" cancelled 5
grep -q "stopped while loading the data" "$STATE/jobs/$a/log.txt" ||
    fail "$a's log does not say it stopped while loading"
nothing_written "$a"
b=$(ctl submit "$TMP/job.json" -q) || fail "submit b"
ctl wait "$b" || fail "$b did not end done after a cancelled load"
check_alive "a cancel while loading"
stop_daemon

PARLE_FAULT_REPLICA=0:load:1 start_daemon
c=$(ctl submit "$TMP/job.json" -q) || fail "submit c"
loading "$c"
kill -TERM "$DAEMON_PID"
wait_exit 5 || fail "parled did not exit within 5 s of SIGTERM while $c loaded"
[ "$EXIT_STATUS" -eq 0 ] || fail "parled exited with $EXIT_STATUS after SIGTERM while $c loaded"
grep -q "stopped while loading the data" "$STATE/jobs/$c/log.txt" ||
    fail "$c's log does not say it stopped while loading"
grep -q "stopped by the daemon's shutdown" "$STATE/jobs/$c/log.txt" || fail "no shutdown note"
grep -q '"state":[[:space:]]*"running"' "$STATE/jobs/$c/status.json" ||
    fail "status.json of $c, stopped while loading, does not say running"
nothing_written "$c"

start_daemon
grep -q "1 queued (1 of them interrupted" "$TMP/parled.err" ||
    fail "the restarted parled did not reload $c as interrupted: $(grep reloaded "$TMP/parled.err")"
ctl wait "$c" || fail "$c did not end done after the restart"
check_metrics "$STATE/jobs/$c/metrics.jsonl" 2
stop_daemon
echo PASS
