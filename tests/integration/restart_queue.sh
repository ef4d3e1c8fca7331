#!/bin/bash
# Across a crash (kill -9): ended jobs stay listed with their results, queued
# jobs stay queued in their order behind the interrupted one, which goes
# first; unreadable job dirs are reported and skipped; ids are never reused.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/short.json" 1
mlp_job "$TMP/long.json" 500
done_id=$(ctl submit "$TMP/short.json" -q) || fail "submit done"
ctl wait "$done_id" || fail "$done_id did not end done"
failed_id=$(ctl submit "$TMP/short.json" -q --set data.dataset=fashion-mnist \
    --set data.root=/nonexistent/fmnist) || fail "submit failed"
ctl wait "$failed_id" 2>/dev/null && fail "$failed_id should fail"
running=$(ctl submit "$TMP/long.json" -q) || fail "submit long"
wait_steps "$running" 60
q1=$(ctl submit "$TMP/short.json" -q) || fail "submit q1"
cancelled=$(ctl submit "$TMP/short.json" -q) || fail "submit cancelled"
q2=$(ctl submit "$TMP/short.json" -q) || fail "submit q2"
ctl cancel "$cancelled" >/dev/null || fail "cancel"
ctl list --json >"$TMP/before.json"
kill_daemon

# Two job dirs that cannot be read: a torn status.json, a job.json that is not a job.
mkdir "$STATE/jobs/j0090" "$STATE/jobs/j0091"
cp "$STATE/jobs/$q1/job.json" "$STATE/jobs/j0090/job.json"
printf '{"id": "j0090", "state": "runn' >"$STATE/jobs/j0090/status.json"
echo '{"model": 7}' >"$STATE/jobs/j0091/job.json"
cp "$STATE/jobs/$q1/status.json" "$STATE/jobs/j0091/status.json"

start_daemon
grep -q "skipping job j0090: status.json: not valid JSON" "$TMP/parled.err" ||
    fail "the torn status.json was not reported"
grep -q "skipping job j0091: job.json: model" "$TMP/parled.err" || fail "the bad job.json was not reported"
ctl list --json >"$TMP/after.json"
python3 -c '
import json, sys
before = {j["id"]: j for j in json.load(open(sys.argv[1]))}
after = json.load(open(sys.argv[2]))
ids = [j["id"] for j in after]
assert ids == list(before), f"jobs after the restart: {ids}, before: {list(before)}"
for j in after:
    b = before[j["id"]]
    if b["state"] in ("done", "failed", "cancelled"):
        for k in ("state", "error", "test_error", "test_loss", "epoch", "step", "started_at",
                  "ended_at", "elapsed_s"):
            assert j[k] == b[k], (j["id"], k, j[k], b[k])
states = {j["id"]: j["state"] for j in after}
assert states[sys.argv[3]] == "done" and states[sys.argv[4]] == "failed", states
assert states[sys.argv[5]] == "cancelled", states
assert after[0]["test_error"] is not None
' "$TMP/before.json" "$TMP/after.json" "$done_id" "$failed_id" "$cancelled" ||
    fail "the jobs after the restart differ: $(cat "$TMP/after.json")"
wait_state "$running" running 30
for id in "$q1" "$q2"; do
    [ "$(ctl status "$id" --json | sed -n 's/.*"state":[[:space:]]*"\(.*\)".*/\1/p')" = queued ] ||
        fail "$id is not queued behind the resumed job"
done
ctl cancel "$running" >/dev/null || fail "cancel the resumed job"
ctl wait "$q2" || fail "$q2 did not end done"
ctl status "$q1" --json >"$TMP/q1.json"
ctl status "$q2" --json >"$TMP/q2.json"
[ "$(field "$TMP/q1.json" state)" = done ] || fail "$q1 is not done"
awk -v a="$(field "$TMP/q1.json" started_at)" -v b="$(field "$TMP/q2.json" started_at)" \
    'BEGIN { exit !(a < b) }' || fail "$q2 started before $q1"
next=$(ctl submit "$TMP/short.json" -q) || fail "submit after the restart"
[ "$next" = j0092 ] || fail "the id after j0091 is $next"
ctl cancel "$next" >/dev/null
stop_daemon
echo PASS
