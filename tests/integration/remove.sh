#!/bin/bash
# Removing what has ended (parlectl rm, sweep rm, parled --keep-ended, and
# the half-made folder of a job parled died queueing;
# docs/architecture.md "Scheduling", docs/protocol.md): an ended job's folder
# goes with the space it took (status shows it first), a queued or running job
# and a sweep's job alone are refused, a sweep goes whole once its jobs have
# ended, a removed id is never issued again (restarts included), a removal a
# crash cut short is finished at the next start, --keep-ended N keeps the
# checkpoints of the N newest failed jobs only, and --remove-ended AGE removes
# the jobs that ended longer ago than AGE (as a later job ends).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sweep_lib.sh"
mlp_job "$TMP/short.json" 2
mlp_job "$TMP/long.json" 1000

start_daemon
a=$(ctl submit -q "$TMP/short.json") || fail "submit a"
ctl wait "$a" || fail "$a did not end done"
ctl status "$a" --json >"$TMP/a.st"
bytes=$(field "$TMP/a.st" disk_bytes)
[ -n "$bytes" ] && [ "$bytes" -gt 0 ] || fail "status gives no disk use: $(cat "$TMP/a.st")"
run=$(ctl submit -q "$TMP/long.json") || fail "submit run"
queued=$(ctl submit -q "$TMP/short.json") || fail "submit queued"
for id in "$run" "$queued"; do
    out=$(ctl rm "$id" 2>&1) && fail "a job not ended was removed: $out"
    echo "$out" | grep -q "only an ended job can be removed (cancel it first)" ||
        fail "no clear refusal for $id: $out"
done
ctl rm "$a" --json >"$TMP/rm.json" || fail "rm $a"
grep -q '"freed_bytes":[[:space:]]*[1-9]' "$TMP/rm.json" || fail "rm does not say what it freed: $(cat "$TMP/rm.json")"
[ ! -e "$STATE/jobs/$a" ] || fail "$a's folder is still there"
ctl list | grep -q "^$a " && fail "$a is still listed"
out=$(ctl status "$a" 2>&1) && fail "status of a removed job: $out"
ctl cancel "$run" >/dev/null && ctl cancel "$queued" >/dev/null || fail "cancel"
wait_state "$run" cancelled 30
ctl rm "$run" "$queued" | grep -c "removed" | grep -q 2 || fail "rm of two ids"
last=$queued

# A sweep: its job alone is refused; the sweep goes once its jobs have ended.
sweep_base "$TMP/base.json" 1000
cat >"$TMP/sweep.json" <<EOF
{"base": "base.json", "grid": {"optim.lr": [0.003, 0.01]}}
EOF
s=$(ctl sweep "$TMP/sweep.json" -q) || fail "sweep"
member=$(ctl list --json | python3 -c "import json,sys; print([j['id'] for j in json.load(sys.stdin) if j.get('sweep') == '$s'][0])")
out=$(ctl sweep rm "$s" 2>&1) && fail "a sweep with running jobs was removed: $out"
echo "$out" | grep -q "has jobs that have not ended" || fail "no clear refusal: $out"
ctl sweep cancel "$s" >/dev/null || fail "sweep cancel"
wait_sweep "$s" cancelled 60
for _ in $(seq 100); do
    ctl list --json | grep -q '"state":[[:space:]]*"running"' || break
    sleep 0.1
done
out=$(ctl rm "$member" 2>&1) && fail "a sweep's job was removed alone: $out"
echo "$out" | grep -q "belongs to sweep $s: remove the sweep" || fail "no clear refusal: $out"
ctl sweep rm "$s" | grep -q "$s removed: 2 job(s)" || fail "sweep rm"
[ ! -e "$STATE/sweeps/$s" ] && [ ! -e "$STATE/jobs/$member" ] || fail "the sweep's files stay"
ctl sweep ls | grep -q "^$s " && fail "the sweep is still listed"

# Restart: nothing removed comes back, no id is issued twice, and a removal
# a crash cut short is finished.
kill_daemon
mkdir -p "$STATE/jobs/.removing-j0099/ckpt/k1" && echo x >"$STATE/jobs/.removing-j0099/ckpt/k1/f"
# A job folder parled died making (no status.json yet: job_commit writes it
# last, before anyone is told of the job), as a kill -9 while a sweep was
# being queued leaves it.
mkdir -p "$STATE/jobs/j0097" && cp "$TMP/short.json" "$STATE/jobs/j0097/job.json" &&
    : >"$STATE/jobs/j0097/log.txt" && : >"$STATE/jobs/j0097/status.json.tmp-4242"
start_daemon
[ ! -e "$STATE/jobs/.removing-j0099" ] || fail "the cut-short removal was not finished"
[ ! -e "$STATE/jobs/j0097" ] || fail "the half-made job folder stays"
grep -q "removed $STATE/jobs/j0097: parled stopped while it queued that job" "$TMP/parled.err" ||
    fail "the half-made folder's removal is not logged"
grep -q "skipping job j0097" "$TMP/parled.err" && fail "the half-made folder was warned about"
ctl list | grep -Eq "^($a|$member) " && fail "a removed job came back"
ctl sweep ls | grep -q "^$s " && fail "the removed sweep came back"
next=$(ctl submit -q "$TMP/short.json") || fail "submit after the restart"
[ "$next" \> "$last" ] && [ "$next" \> "$member" ] || fail "an id was issued again: $next (removed: $last, $member)"
ctl wait "$next" >/dev/null || fail "$next did not end done"
stop_daemon

# --keep-ended 1: of two failed jobs with checkpoints, the older loses them.
mlp_job "$TMP/fails.json" 4
PARLE_FAULT_REPLICA=0:step:40:1 start_daemon --keep-ended 1
f1=$(ctl submit -q "$TMP/fails.json") || fail "submit f1"
wait_state "$f1" failed 60
ls "$STATE/jobs/$f1/ckpt/"k*/manifest.json >/dev/null 2>&1 || fail "$f1 kept no checkpoint to begin with"
f2=$(ctl submit -q "$TMP/fails.json") || fail "submit f2"
wait_state "$f2" failed 60
[ ! -e "$STATE/jobs/$f1/ckpt" ] || fail "--keep-ended 1 left the older failed job's checkpoints"
ls "$STATE/jobs/$f2/ckpt/"k*/manifest.json >/dev/null 2>&1 || fail "the newest failed job lost its checkpoints"
grep -q "keep-ended: its checkpoints removed" "$STATE/jobs/$f1/log.txt" || fail "no log line"
out=$(ctl resume "$f1" 2>&1) && fail "resumed without a checkpoint: $out"
stop_daemon
out=$("$PARLED" --socket "$SOCK" --state-dir "$STATE" --keep-ended 3x 2>&1) && fail "--keep-ended 3x taken"
echo "$out" | grep -q "keep-ended: expected a count" || fail "no clear flag error: $out"

# --remove-ended 2s: a job that ended more than 2 s ago goes as a later one
# ends (which stays); so do the older failed jobs, checkpoints and all.
start_daemon --remove-ended 2s
old=$(ctl submit -q "$TMP/short.json") || fail "submit old"
ctl wait "$old" >/dev/null || fail "$old did not end done"
sleep 3 # (its age passes 2 s: nothing else is waited for)
new=$(ctl submit -q "$TMP/short.json") || fail "submit new"
ctl wait "$new" >/dev/null || fail "$new did not end done"
for _ in $(seq 100); do
    ctl status "$old" >/dev/null 2>&1 || break
    sleep 0.1
done
out=$(ctl status "$old" 2>&1) && fail "--remove-ended 2s left $old: $out"
[ ! -e "$STATE/jobs/$old" ] && [ ! -e "$STATE/jobs/$f1" ] || fail "a removed job's folder stays"
ctl status "$new" >/dev/null || fail "--remove-ended removed $new, which ended just now"
grep -q "remove-ended: .* job(s) that ended more than 2 s ago removed" "$TMP/parled.err" ||
    fail "the removal is not logged"
stop_daemon
out=$("$PARLED" --socket "$SOCK" --state-dir "$STATE" --remove-ended 5 2>&1) && fail "--remove-ended 5 taken"
echo "$out" | grep -q "remove-ended: expected an age" || fail "no clear flag error: $out"
echo PASS
