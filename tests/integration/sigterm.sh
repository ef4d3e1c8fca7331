#!/bin/bash
# SIGTERM mid-job: the replicas checkpoint at a step boundary, stop, and
# parled exits cleanly; the next parled resumes the job from that checkpoint.
# Also: ids stay unique across restarts, a stale socket is replaced, a live
# one is refused.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/long.json" 500
id=$(ctl submit "$TMP/long.json" -q) || fail "submit"
wait_steps "$id" 60
ctl watch "$id" >/dev/null 2>&1 &
watcher=$!
sleep 0.3
stop_daemon
wait "$watcher"; [ $? != 0 ] || fail "a watch cut by a shutdown must not exit 0"
grep -q "stopped by the daemon's shutdown" "$STATE/jobs/$id/log.txt" || fail "no shutdown note in the log"
grep -q "checkpoint at outer iteration [0-9]* (step [0-9]*) written" "$STATE/jobs/$id/log.txt" ||
    fail "the shutdown wrote no checkpoint"
grep -q '"state":[[:space:]]*"running"' "$STATE/jobs/$id/status.json" ||
    fail "status.json of the stopped job does not say running"

# A second daemon on the same socket (another state dir) is refused while the first lives.
start_daemon
first=$DAEMON_PID
wait_log "$id" "resuming from checkpoint at outer iteration" 30
step=$(resume_step "$id")
grep -q "checkpoint at outer iteration [0-9]* (step $step) written" "$STATE/jobs/$id/log.txt" ||
    fail "the resume at step $step is not from the shutdown's checkpoint"
wait_state "$id" running 30
ctl cancel "$id" >/dev/null || fail "cancel the resumed job"
"$PARLED" --socket "$SOCK" --state-dir "$TMP/state2" 2>"$TMP/second.err" && fail "a second parled started"
grep -q "another parled is running on $SOCK" "$TMP/second.err" || fail "second: $(cat "$TMP/second.err")"
next=$(ctl submit "$TMP/long.json" -q) || fail "submit after restart"
[ "$next" \> "$id" ] || fail "id $next after a restart is not above $id"
ctl cancel "$next" >/dev/null

# A socket left by a dead daemon is replaced.
kill -KILL "$first"; wait "$first" 2>/dev/null; DAEMON_PID=
[ -S "$SOCK" ] || fail "the killed daemon's socket should still be there"
start_daemon
grep -q "replaced the stale socket" "$TMP/parled.err" || fail "no stale-socket note"
check_alive "restart over a stale socket"
stop_daemon
echo PASS
