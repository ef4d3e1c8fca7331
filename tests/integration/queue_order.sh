#!/bin/bash
# Two CPU jobs run one after the other, in submission order.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/job.json" 4

a=$(ctl submit "$TMP/job.json" -q) || fail "submit a"
b=$(ctl submit "$TMP/job.json" -q) || fail "submit b"
[ "$a" \< "$b" ] || fail "ids are not increasing: $a then $b"
ctl status "$b" --json >"$TMP/b.json"
[ "$(field "$TMP/b.json" state)" = queued ] || fail "$b should wait while $a runs"
ctl wait "$b" || fail "$b did not end done"
ctl status "$a" --json >"$TMP/a.json"
ctl status "$b" --json >"$TMP/b.json"
[ "$(field "$TMP/a.json" state)" = done ] || fail "$a is not done"
a_end=$(field "$TMP/a.json" ended_at)
b_start=$(field "$TMP/b.json" started_at)
awk -v e="$a_end" -v s="$b_start" 'BEGIN { exit !(s >= e) }' ||
    fail "$b started ($b_start) before $a ended ($a_end)"
stop_daemon
echo PASS
