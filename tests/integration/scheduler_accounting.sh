#!/bin/bash
# Who used what, between real users (docs/architecture.md, "Scheduling"):
# 1. fair share charges what a job held: a cpu:1 job on parled's two cores
#    half the CPU per second, in `usage` and in `history`, which keeps the
#    run after `rm`;
# 2. a preemption is withdrawn when its preemptor vanishes first: alice
#    submits at priority 0 and cancels at once until three cancels came
#    after the preemption was asked (a cancel read before the scheduling
#    pass asked it preempts nothing), and bob's priority -1 job runs on,
#    never requeued, while alice is charged;
# 3. an admin's hold is released by an admin only, and status says who holds;
# 4. a kill -9 loses at most --usage-save-interval of use, and the run it cut
#    is in the history as "interrupted"; damaged lines of the record are
#    skipped, counted and named;
# 5. --preempt-grace 0 is refused, saying why;
# 6. a preemption withdrawn once its victim's replicas began to stop (held
#    there by PARLE_FAULT_REPLICA's stopping): it checkpoints and is queued
#    again to resume first, ahead of a lighter user's job.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
[ "$(nproc)" -ge 2 ] || { echo "SKIP: needs 2 cores"; exit 77; }
if [ "$(nproc)" -gt 2 ] && command -v taskset >/dev/null; then
    PARLED_WRAP="taskset -c 0,1"
fi
make_users sa
flags=(--group "$grp" --admin-group "$adm" --usage-save-interval 0.5)
start_daemon "${flags[@]}"
mlp_job "$TMP/short.json" 6
# Steps of a second or more (LeNet at batch 4096 on two cores): a stop asked
# of this job is still pending when the cancel right after the ask arrives,
# even when the submit's files take a while to sync.
cat >"$TMP/slow.json" <<JOB
{"name": "it-slow", "model": {"arch": "lenet"},
 "data": {"dataset": "synthetic", "train_limit": 8192, "test_limit": 64},
 "algorithm": {"name": "sgd"}, "optim": {"lr": 0.05, "batch": 4096},
 "epochs": 1000, "seed": 3, "devices": "cpu", "log_every": 1}
JOB
chmod 644 "$TMP/short.json" "$TMP/slow.json"
py() { python3 -c "$@"; }

# ---- 1. a cpu:1 job is charged half the CPU ----
s1=$(ctl_as "$bob" submit -q --set devices=cpu:1 "$TMP/short.json") || fail "bob submits s1"
ctl_as "$bob" wait "$s1" || fail "s1 did not end done"
ctl status "$s1" --json >"$TMP/s1.st"
ran=$(py 'import json,sys; j=json.load(open(sys.argv[1])); print(j["ended_at"]-j["started_at"])' \
    "$TMP/s1.st")
ctl usage --json >"$TMP/usage.json" || fail "usage"
used=$(py 'import json,sys
print([o["device_seconds"] for o in json.load(open(sys.argv[1]))["owners"] if o["user"] == sys.argv[2]][0])' \
    "$TMP/usage.json" "$bob") || fail "bob is not in usage: $(cat "$TMP/usage.json")"
py 'import sys; r=float(sys.argv[1])/float(sys.argv[2]); sys.exit(not 0.35 < r < 0.65)' "$used" "$ran" ||
    fail "a cpu:1 job of $ran s on 2 cores was charged $used device-seconds (want about half)"
ctl usage | grep -q "^$bob .* 100.0%" || fail "parlectl usage does not show bob's share: $(ctl usage)"
ctl_as "$bob" rm "$s1" >/dev/null || fail "bob removes s1"
ctl_as "$alice" history --user "$bob" --json >"$TMP/hist.json" || fail "history --user"
py 'import json,sys
h=json.load(open(sys.argv[1])); o=h["owners"]
assert len(o) == 1 and o[0]["user"] == sys.argv[2] and o[0]["runs"] == 1, h
assert abs(o[0]["device_hours"] * 3600 - float(sys.argv[3])) < 0.2, (h, sys.argv[3])' \
    "$TMP/hist.json" "$bob" "$used" || fail "history after rm: $(cat "$TMP/hist.json")"
ctl history --since 1h | grep -q "^$bob " || fail "parlectl history --since 1h misses bob"
[ "$(ctl history --since "$(date -d '+1 hour' +%Y-%m-%dT%H:%M)" --json | grep -c '"uid"')" = 0 ] ||
    fail "history --since a later time lists runs"

# ---- 2. a preemption withdrawn ----
low=$(ctl_as "$bob" submit -q --priority -1 "$TMP/slow.json") || fail "bob submits low"
wait_steps "$low" 60
withdrawn=0
for k in $(seq 20); do
    id=$(printf 'j%04d' $((10#${low#j} + k)))
    printf '{"op":"submit","job":%s}\n{"op":"cancel","id":"%s"}\n' \
        "$(tr -d '\n' <"$TMP/short.json")" "$id" |
        "$RAWCLIENT" --user "$alice" --lines 2 "$SOCK" >"$TMP/raw.out" ||
        fail "alice's submit and cancel: $(cat "$TMP/raw.out")"
    grep -q "\"id\":\"$id\"" "$TMP/raw.out" || fail "alice's job is not $id: $(cat "$TMP/raw.out")"
    grep -q '"ok":false' "$TMP/raw.out" && fail "alice's submit or cancel failed: $(cat "$TMP/raw.out")"
    # The preemption, if asked, is in low's log before the cancel's answer.
    grep -q "preempted by $id " "$STATE/jobs/$low/log.txt" || continue
    wait_log "$low" "preemption withdrawn: $id was cancelled|preemption withdrawn: $id ended" 10
    withdrawn=$((withdrawn + 1))
    [ "$withdrawn" = 3 ] && break
done
[ "$withdrawn" = 3 ] || fail "only $withdrawn of 20 cancels came after their preemption was asked"
sleep 0.5 # a requeue would show by now
ctl status "$low" --json >"$TMP/low.st"
[ "$(field "$TMP/low.st" state)" = running ] || fail "$low was requeued: $(cat "$TMP/low.st")"
grep -q ": back in the queue; it resumes" "$STATE/jobs/$low/log.txt" &&
    fail "$low went back into the queue: $(grep -E 'preempt|queue' "$STATE/jobs/$low/log.txt")"
[ "$(grep -c "it runs on" "$STATE/jobs/$low/log.txt")" = 3 ] ||
    fail "$low's stop was not called off thrice: $(grep preempt "$STATE/jobs/$low/log.txt")"
ctl usage --json >"$TMP/usage.json"
py 'import json,sys
o=[o for o in json.load(open(sys.argv[1]))["owners"] if o["user"] == sys.argv[2]]
sys.exit(not (o and o[0]["device_seconds"] > 0))' "$TMP/usage.json" "$alice" ||
    fail "alice was not charged for the withdrawn preemptions: $(cat "$TMP/usage.json")"

# ---- 3. an admin hold ----
q=$(ctl_as "$alice" submit -q --priority -2 "$TMP/short.json") || fail "alice submits q"
ctl_as "$alice" status "$q" | grep -q "place: priority -2, starts afresh, owner's recent use [0-9.]* device-hours, submitted 20" ||
    fail "status does not say what places q: $(ctl status "$q")"
ctl_as "$carol" hold "$q" --json >"$TMP/hold.json" || fail "carol (admin) holds q"
grep -q '"admin_hold":[[:space:]]*true' "$TMP/hold.json" || fail "not an admin hold: $(cat "$TMP/hold.json")"
out=$(ctl_as "$alice" release "$q" 2>&1) && fail "alice released an admin hold: $out"
echo "$out" | grep -q "job $q is held by an admin ($carol): only root, parled's user and its --admin-group may release it" ||
    fail "no clear refusal of alice's release: $out"
ctl_as "$alice" status "$q" | grep -q "held by $carol (an admin hold" ||
    fail "status does not say who holds: $(ctl status "$q")"
ctl_as "$carol" release "$q" >/dev/null || fail "carol cannot release her hold"
ctl_as "$alice" hold "$q" >/dev/null || fail "alice holds q"
ctl_as "$alice" release "$q" >/dev/null || fail "alice cannot release her own hold"
ctl_as "$alice" cancel "$q" >/dev/null || fail "alice cancels q"

# ---- 4. kill -9 keeps the use up to the last save ----
sleep 1.5 # low runs on: more use than the last job end saved
ctl usage --json >"$TMP/before.json"
kill_daemon
# A damaged record: a line that is not JSON, then a torn one (an append cut
# short). Both are skipped and named; the torn end is cut before the next.
printf '{"id": garbage\n{"id":"j9' >>"$STATE/accounting.jsonl"
start_daemon "${flags[@]}"
grep -q "the accounting record: 2 bad line(s) skipped (the first: $STATE/accounting.jsonl: line 2: not JSON)" \
    "$TMP/parled.err" || fail "the damaged record is not named in the log: $(grep accounting "$TMP/parled.err")"
ctl usage --json >"$TMP/after.json"
py 'import json,sys
def of(p): return [o["device_seconds"] for o in json.load(open(p))["owners"] if o["user"] == sys.argv[3]][0]
b, a = of(sys.argv[1]), of(sys.argv[2])
sys.exit(not a >= b - 1.0)' "$TMP/before.json" "$TMP/after.json" "$bob" ||
    fail "bob's use before the kill: $(cat "$TMP/before.json"); after: $(cat "$TMP/after.json")"
ctl history --user "$bob" --json >"$TMP/hist.json"
py 'import json,sys
o=json.load(open(sys.argv[1]))["owners"][0]
sys.exit(not (o["runs"] == 2 and o["device_hours"] * 3600 > float(sys.argv[2]) + 2))' \
    "$TMP/hist.json" "$used" || fail "the run cut by the kill is not in the history: $(cat "$TMP/hist.json")"
grep -q '"skipped_lines":[[:space:]]*2' "$TMP/hist.json" || fail "history does not count the damaged lines"
ctl cancel "$low" >/dev/null || fail "cancel low"
check_alive "the accounting requests"
stop_daemon

# ---- 5. no grace is refused ----
out=$(timeout 5 "$PARLED" --socket "$SOCK" --state-dir "$STATE" --preempt-grace 0 2>&1) &&
    fail "parled took --preempt-grace 0"
echo "$out" | grep -q "preempt-grace: must be at least 1 second" || fail "no clear refusal: $out"

# ---- 6. a preemption withdrawn once its victim is stopping ----
# The first job this parled runs holds its stop before the checkpoint (the
# fault hook) until the test makes the release file.
PARLE_FAULT_REPLICA=0:stopping:1 PARLE_FAULT_RELEASE=$TMP/release start_daemon "${flags[@]}"
mlp_job "$TMP/victim.json" 1000
chmod 644 "$TMP/victim.json"
v=$(ctl_as "$bob" submit -q --priority -1 "$TMP/victim.json") || fail "bob submits v"
wait_steps "$v" 8
p=$(ctl_as "$alice" submit -q "$TMP/short.json") || fail "alice submits p"
wait_log "$v" "holds its stop before the checkpoint" 10
w=$(ctl_as "$carol" submit -q --priority -1 "$TMP/short.json") || fail "carol submits w"
ctl_as "$alice" cancel "$p" >/dev/null || fail "alice cancels p"
wait_log "$v" "preemption withdrawn: $p was cancelled before this job stopped; it was stopping already, and resumes first" 10
: >"$TMP/release"
wait_log "$v" "resuming from checkpoint at outer iteration" 20
# v resumes ahead of carol's w, though carol used less device time.
ctl status "$w" --json >"$TMP/w.st"
[ "$(field "$TMP/w.st" state)" = queued ] || fail "$w started before the resuming $v: $(cat "$TMP/w.st")"
ctl status "$v" --json | grep -q '"state":[[:space:]]*"running"' || fail "$v does not run: $(ctl status "$v")"
ctl cancel "$w" >/dev/null && ctl cancel "$v" >/dev/null || fail "cancel w and v"
wait_state "$v" cancelled 20
stop_daemon
echo PASS
