#!/bin/bash
# parlectl wait's exit statuses (0 done, 1 failed, 2 usage, 3 cancelled,
# 4 parled gone), the same from submit --wait, their documentation, and
# ls --state.
. "$(dirname "$0")/lib.sh"

for h in "$("$PARLECTL" --help)" "$(ctl wait --help)"; do
    for code in "0 " "1 " "2 " "3 " "4 "; do
        echo "$h" | grep -q "$code" || fail "help lacks exit status $code: $h"
    done
    echo "$h" | grep -q "cancelled" || fail "help does not say 3 is cancelled"
done
grep -q "^| 4 |" "$PARLE_SOURCE_ROOT/docs/protocol.md" || fail "docs/protocol.md lacks exit status 4"
ctl submit --help | grep -q -- "--wait" || fail "submit --help lacks --wait"
ctl ls --help | grep -q -- "--state" || fail "ls --help lacks --state"

ctl wait j0001 2>/dev/null; [ $? = 4 ] || fail "wait with no daemon must exit 4"
ctl wait 2>/dev/null; [ $? = 2 ] || fail "wait without an id must exit 2"

start_daemon
mlp_job "$TMP/quick.json" 1
mlp_job "$TMP/long.json" 500

ctl wait nope 2>/dev/null; [ $? = 1 ] || fail "wait on an unknown job must exit 1"

# done: submit --wait prints the id line and exits 0 once the job is done.
out=$(ctl submit "$TMP/quick.json" --wait) || fail "submit --wait of a good job exited $?"
done_id=$(echo "$out" | sed -n 's/^submitted \(j[0-9]*\) .*/\1/p')
[ -n "$done_id" ] || fail "submit --wait printed no id: $out"
[ "$(ctl status "$done_id" --json | sed -n 's/.*"state":[[:space:]]*"\(.*\)".*/\1/p')" = done ] ||
    fail "submit --wait returned before the job was done"
ctl wait "$done_id" || fail "wait on a done job exited $?"
ctl submit "$TMP/quick.json" -q --wait >"$TMP/q.txt" || fail "submit -q --wait exited $?"
[[ "$(cat "$TMP/q.txt")" =~ ^j[0-9]{4,}$ ]] || fail "submit -q --wait printed '$(cat "$TMP/q.txt")'"
ctl submit "$TMP/quick.json" --wait --watch 2>/dev/null; [ $? = 2 ] ||
    fail "--wait with --watch must be a usage error"

# failed: a dataset that is not there.
ctl submit "$TMP/quick.json" -q --wait --set data.dataset=fashion-mnist \
    --set data.root=/nonexistent/fmnist >"$TMP/f.txt" 2>"$TMP/err"
[ $? = 1 ] || fail "submit --wait of a failing job must exit 1"
failed_id=$(cat "$TMP/f.txt")
ctl wait "$failed_id" 2>/dev/null; [ $? = 1 ] || fail "wait on a failed job must exit 1"

# cancelled: wait in the background, cancel, expect 3.
a=$(ctl submit "$TMP/long.json" -q) || fail "submit long"
wait_state "$a" running 30
ctl wait "$a" 2>/dev/null &
waiter=$!
ctl cancel "$a" >/dev/null || fail "cancel $a"
wait "$waiter"; [ $? = 3 ] || fail "wait on a job cancelled while waiting must exit 3"
ctl wait "$a" 2>/dev/null; [ $? = 3 ] || fail "wait on a cancelled job must exit 3"

# ls --state keeps the jobs in that state only.
ctl ls --state done | grep -q "^$done_id .*done" || fail "ls --state done lacks $done_id"
ctl ls --state done | grep -q "^$failed_id " && fail "ls --state done shows the failed job"
ctl ls --state failed | grep -q "^$failed_id .*failed" || fail "ls --state failed"
ctl ls --state=cancelled --json | grep -q "\"$a\"" || fail "ls --state=cancelled --json"
ctl ls --state cancelled --json | grep -q "\"$done_id\"" && fail "ls --state cancelled shows a done job"
[ "$(ctl ls --state queued | wc -l)" = 1 ] || fail "ls --state queued is not just the header"
ctl ls --state bogus 2>/dev/null; [ $? = 2 ] || fail "ls --state bogus must exit 2"

# parled gone: the connection is lost while waiting, and submit --wait likewise.
b=$(ctl submit "$TMP/long.json" -q) || fail "submit b"
wait_state "$b" running 30
ctl wait "$b" 2>"$TMP/gone.err" &
waiter=$!
sleep 0.5
kill_daemon
wait "$waiter"; [ $? = 4 ] || fail "wait when parled dies must exit 4"
grep -q "lost the connection" "$TMP/gone.err" || fail "wait's message: $(cat "$TMP/gone.err")"
ctl submit "$TMP/quick.json" --wait 2>/dev/null; [ $? = 1 ] ||
    fail "submit --wait with no daemon fails at submit (1)"
echo PASS
