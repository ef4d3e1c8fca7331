#!/bin/bash
# The scheduler through parled (docs/architecture.md, "Scheduling"), as root:
# 1. preemption: a higher-priority job stops a running one at its next step
#    (a checkpoint mid-epoch), which shows "preempted" (by whom, when) while
#    the other runs (until cancelled here), resumes once the devices free and
#    ends bit for bit as the same job run without the stop (its exported
#    master and its evaluations); a watcher follows it to its real end;
# 2. priorities and why a job waits: the higher priority starts first, and
#    each queued job's status says what it waits for;
# 3. hold and release, of a queued job and of a running one;
# 4. kill -9 of parled while a job is being preempted: every job ends done.
. "$(dirname "$0")/lib.sh"
if [ "$(nproc)" -gt 2 ] && command -v taskset >/dev/null; then
    PARLED_WRAP="taskset -c 0,1"
fi
cat >"$TMP/low.json" <<JOB
{"name": "it-low", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 1024, "test_limit": 256},
 "algorithm": {"name": "parle", "replicas": 2, "L": 2, "gamma": 0.01, "rho": 1.0},
 "optim": {"lr": 0.02, "momentum": 0.9, "nesterov": true, "batch": 32},
 "epochs": 6, "seed": 11, "devices": "cpu", "log_every": 8}
JOB
mlp_job "$TMP/short.json" 2
mlp_job "$TMP/medium.json" 40
mlp_job "$TMP/long.json" 1000
evals() {
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
print(json.dumps([(r["step"], r["epoch"], r["test_error"], r["test_loss"])
                  for r in rows if r["event"] == "eval"]))' "$1"
}

# ---- 1. preemption, against the same job never stopped ----
STATE=$TMP/state-ref
start_daemon
ref=$(ctl submit -q "$TMP/low.json") || fail "submit the reference"
ctl wait "$ref" || fail "the reference job did not end done"
ctl export "$ref" "$TMP/ref.safetensors" >/dev/null || fail "export the reference"
stop_daemon

STATE=$TMP/state
start_daemon
low=$(ctl submit -q "$TMP/low.json") || fail "submit low"
[ "$low" = "$ref" ] || fail "ids differ: $low and $ref"
wait_log "$low" "epoch 1/6: test error" 60
ctl wait "$low" & # a watcher across the preemption: it ends when the job does
waiter=$!
high=$(ctl submit -q --priority 5 "$TMP/long.json") || fail "submit high as root"
wait_state "$low" preempted 60
kill -0 "$waiter" 2>/dev/null || fail "'wait $low' ended at the preemption"
ctl status "$low" --json >"$TMP/low.st"
[ "$(field "$TMP/low.st" preempted_by)" = "$high" ] ||
    fail "$low does not name $high as its preemptor: $(cat "$TMP/low.st")"
[ "$(field "$TMP/low.st" preempted_at)" != null ] || fail "$low does not say when"
grep -q "preempted by $high (root, priority 5 over 0)" "$STATE/jobs/$low/log.txt" ||
    fail "no preemption line in $low's log"
grep -q "done:" "$STATE/jobs/$low/log.txt" && fail "$low ended before the preemption"
ctl status "$low" | grep -q "last preempted by $high" || fail "parlectl status does not show it"
ctl list | grep -q "^$low  *preempted " || fail "parlectl list does not show $low preempted"
ctl list --state preempted | grep -q "^$low " || fail "parlectl list --state preempted lacks $low"
ctl cancel "$high" >/dev/null || fail "cancel $high"
wait "$waiter" || fail "'wait $low' across the preemption did not end done"
step=$(resume_step "$low")
[ -n "$step" ] && [ "$step" -gt 0 ] || fail "$low did not resume from a checkpoint"
grep -q "checkpoint at outer iteration [0-9]* (step $step) written" "$STATE/jobs/$low/log.txt" ||
    fail "the resume at step $step is not from the checkpoint the preemption took"
[ "$(evals "$STATE/jobs/$low/metrics.jsonl")" = "$(evals "$TMP/state-ref/jobs/$ref/metrics.jsonl")" ] ||
    fail "the preempted job evaluated otherwise than the uninterrupted one"
ctl export "$low" "$TMP/low.safetensors" >/dev/null || fail "export the preempted job"
cmp "$TMP/ref.safetensors" "$TMP/low.safetensors" ||
    fail "the preempted job's master differs from the uninterrupted one's"

# ---- 2. priorities, and why a job waits ----
top=$(ctl submit -q --priority 10 "$TMP/long.json") || fail "submit top"
wait_state "$top" running 30
p0=$(ctl submit -q "$TMP/short.json") || fail "submit p0"
p3=$(ctl submit -q --priority 3 "$TMP/short.json") || fail "submit p3"
ctl status "$p3" --json >"$TMP/p3.st"
case "$(field "$TMP/p3.st" waiting)" in
"devices: cpu held by $top (root)") ;;
*) fail "$p3 does not say it waits for $top: $(field "$TMP/p3.st" waiting)" ;;
esac
ctl status "$p0" --json >"$TMP/p0.st"
case "$(field "$TMP/p0.st" waiting)" in
"queue: cpu kept for $p3 (root), ahead by a higher priority") ;;
*) fail "$p0 does not say it waits behind $p3: $(field "$TMP/p0.st" waiting)" ;;
esac
ctl list | grep "^$p0 " | grep -q "queue: cpu kept for $p3" || fail "list does not say why $p0 waits"
ctl cancel "$top" >/dev/null || fail "cancel top"
ctl wait "$p0" || fail "$p0 did not end done"
ctl status "$p3" --json >"$TMP/p3.st"
ctl status "$p0" --json >"$TMP/p0.st"
awk -v a="$(field "$TMP/p3.st" started_at)" -v b="$(field "$TMP/p0.st" started_at)" \
    'BEGIN { exit !(a < b) }' || fail "$p0 (priority 0) started before $p3 (priority 3)"
out=$(ctl priority "$p0" 2 2>&1) && fail "a done job's priority changed: $out"
echo "$out" | grep -q "has ended" || fail "no clear refusal for an ended job: $out"

# ---- 3. hold and release ----
run=$(ctl submit -q "$TMP/long.json") || fail "submit run"
wait_log "$run" "checkpoint at outer iteration" 30 # a checkpoint to resume from after its hold
queued=$(ctl submit -q "$TMP/short.json") || fail "submit queued"
ctl hold "$queued" | grep -q "held" || fail "hold a queued job"
ctl status "$queued" --json >"$TMP/q.st"
[ "$(field "$TMP/q.st" state)" = held ] || fail "$queued is not shown held"
case "$(field "$TMP/q.st" waiting)" in held:*) ;; *) fail "no hold reason: $(cat "$TMP/q.st")" ;; esac
ctl list --state held | grep -q "^$queued " || fail "parlectl list --state held lacks $queued"
ctl list --state queued | grep -q "^$queued " && fail "list --state queued shows the held $queued"
out=$(ctl hold "$queued" 2>&1) && fail "held twice: $out"
ctl hold "$run" | grep -q "checkpointing, then back in the queue, held" || fail "hold a running job"
wait_state "$run" held 60
grep -q "held at epoch" "$STATE/jobs/$run/log.txt" || fail "$run's log does not say it was held"
sleep 1 # nothing runs now: both are held
ctl status "$queued" --json >"$TMP/q.st"
[ "$(field "$TMP/q.st" state)" = held ] || fail "$queued started while held: $(field "$TMP/q.st" state)"
ctl release "$queued" >/dev/null || fail "release queued"
ctl wait "$queued" || fail "$queued did not run once released"
ctl status "$run" --json >"$TMP/run.st"
[ "$(field "$TMP/run.st" state)" = held ] || fail "$run left its hold: $(field "$TMP/run.st" state)"
ctl release "$run" >/dev/null || fail "release run"
wait_state "$run" running 30
wait_log "$run" "resuming from checkpoint at outer iteration" 30
ctl cancel "$run" >/dev/null || fail "cancel run"
wait_state "$run" cancelled 30

# ---- 4. kill -9 while a job is being preempted ----
victim=$(ctl submit -q "$TMP/low.json") || fail "submit the victim"
wait_log "$victim" "epoch 1/6: test error" 60
urgent=$(ctl submit -q --priority 7 "$TMP/medium.json") || fail "submit urgent"
wait_log "$victim" "preempted by $urgent" 10
kill_daemon
start_daemon
ctl wait "$urgent" || fail "$urgent did not end done after the kill"
ctl wait "$victim" || fail "$victim did not end done after the kill"
check_alive "the kill during a preemption"
stop_daemon
echo PASS
