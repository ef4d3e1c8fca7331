#!/bin/bash
# An upgrade (docs/running.md): the new parled on the state dir of the
# release before it, which wrote no <state-dir>/format (format 1 implied): a
# done job keeps its result, the job running at the shutdown resumes from its
# checkpoint, the one queued behind it stays queued, and the file is written.
# A state dir of a later format (a downgrade) or a damaged format file is
# refused at start, saying which and what to do, and left as it was.
. "$(dirname "$0")/lib.sh"
mlp_job "$TMP/short.json" 1
mlp_job "$TMP/long.json" 500
start_daemon
done_id=$(ctl submit "$TMP/short.json" -q) || fail "submit"
ctl wait "$done_id" >/dev/null || fail "$done_id did not end done"
running=$(ctl submit "$TMP/long.json" -q) || fail "submit long"
wait_steps "$running" 60
queued=$(ctl submit "$TMP/short.json" -q) || fail "submit queued"
ctl status "$done_id" --json >"$TMP/done.before"
stop_daemon
# As the release before the format file left it.
rm "$STATE/format" || fail "parled wrote no $STATE/format"
before=$(grep -c '"event":"progress"' "$STATE/jobs/$running/metrics.jsonl")

start_daemon
[ "$(cat "$STATE/format")" = "parle-state 1" ] || fail "$STATE/format: $(cat "$STATE/format")"
ctl status "$done_id" --json >"$TMP/done.after"
for f in state test_error; do
    [ "$(field "$TMP/done.after" $f)" = "$(field "$TMP/done.before" $f)" ] ||
        fail "$done_id's $f changed across the upgrade: $(field "$TMP/done.after" $f)"
done
ctl status "$running" --json >"$TMP/st.json"
[ "$(field "$TMP/st.json" state)" = running ] || fail "$running is $(field "$TMP/st.json" state) after the upgrade"
grep -q "resum" "$STATE/jobs/$running/log.txt" || fail "$running's log says no resume: $(tail -n 3 "$STATE/jobs/$running/log.txt")"
ctl status "$queued" --json >"$TMP/q.json"
[ "$(field "$TMP/q.json" state)" = queued ] || fail "$queued is $(field "$TMP/q.json" state), not queued behind $running"
for _ in $(seq 600); do
    [ "$(grep -c '"event":"progress"' "$STATE/jobs/$running/metrics.jsonl")" -gt "$before" ] && break
    sleep 0.1
done
[ "$(grep -c '"event":"progress"' "$STATE/jobs/$running/metrics.jsonl")" -gt "$before" ] ||
    fail "$running made no progress after the upgrade"
ctl cancel "$running" >/dev/null
stop_daemon

refused() { # refused TEXT: parled does not start on $STATE, says TEXT, and changes nothing
    cp "$STATE/format" "$TMP/format.before"
    "$PARLED" --socket "$SOCK" --state-dir "$STATE" >"$TMP/refused.out" 2>&1 && fail "parled started"
    grep -qF -- "$1" "$TMP/refused.out" || fail "parled's refusal: $(cat "$TMP/refused.out")"
    cmp -s "$STATE/format" "$TMP/format.before" || fail "the refused start rewrote $STATE/format"
    [ ! -S "$SOCK" ] || fail "the refused start left a socket"
}
echo "parle-state 2" >"$STATE/format"
refused "state dir $STATE was written by a newer parled (state format 2; parled "
grep -q "run that release's parled on it, or start this one with another --state-dir" "$TMP/refused.out" ||
    fail "the refusal says not what to do: $(cat "$TMP/refused.out")"
printf 'garbage' >"$STATE/format"
refused "holds \"garbage\", not \"parle-state N\""
echo "upgrade_state: a state dir with no format file loads and resumes; format 2 and garbage refused: OK"
