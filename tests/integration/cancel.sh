#!/bin/bash
# Cancel a running job (it stops at a step boundary) and a queued one (at once).
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/long.json" 500

a=$(ctl submit "$TMP/long.json" -q) || fail "submit a"
b=$(ctl submit "$TMP/long.json" -q) || fail "submit b"
wait_state "$a" running 30
wait_steps "$a" 60
[ "$(ctl status "$b" --json | sed -n 's/.*"state":[[:space:]]*"\(.*\)".*/\1/p')" = queued ] ||
    fail "b is not queued behind a"

ctl cancel "$b" | grep -q "$b cancelled" || fail "cancel of queued $b"
wait_state "$b" cancelled 5
ctl wait "$b" 2>/dev/null; [ $? = 3 ] || fail "wait on a cancelled job must exit 3"

ctl cancel "$a" | grep -q "cancelling" || fail "cancel of running $a"
ctl wait "$a" 2>"$TMP/wait.err"; [ $? = 3 ] || fail "wait on a cancelled job must exit 3"
grep -q "cancelled" "$TMP/wait.err" || fail "wait did not say cancelled: $(cat "$TMP/wait.err")"
wait_state "$a" cancelled 5
ctl logs "$a" | grep -q "cancelled at epoch" || fail "the log does not record the cancel"
ctl cancel "$a" 2>/dev/null && fail "cancelling twice succeeded"
check_alive "cancel"
stop_daemon
echo PASS
