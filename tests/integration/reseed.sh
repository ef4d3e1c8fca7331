#!/bin/bash
# algorithm.on_replica_failure "reseed" through parled (docs/architecture.md
# "Failure model"), with PARLE_FAULT_REPLICA=1:nan:3:1 in parled's
# environment: replica 1's weights turn NaN at the first step of every job's
# outer iteration 3.
#   - the job is re-seeded once and ends done; reseeds is 1 in status --json,
#     in parlectl status, in metrics.jsonl's progress lines from the failure
#     on (0 before it), and the log names the replica, the step and the cause;
#   - max_reseeds 0: the job fails with the cause;
#   - a job re-seeded before its first checkpoint, parled killed with -9 after
#     that checkpoint and restarted: the resumed job keeps the count, ends done.
. "$(dirname "$0")/lib.sh"

# parle_job FILE TRAIN_LIMIT EPOCHS MAX_RESEEDS: 3 Parle replicas of the MLP
# on the synthetic set, L 2, batch 32 (TRAIN_LIMIT / 32 outer iterations an
# epoch), a checkpoint every epoch.
parle_job() {
    cat >"$1" <<JOB
{"name": "it-reseed", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": $2, "test_limit": 128},
 "algorithm": {"name": "parle", "replicas": 3, "L": 2, "on_replica_failure": "reseed",
               "max_reseeds": $4},
 "optim": {"lr": 0.05, "batch": 32}, "eval": {"every_passes": 1000},
 "epochs": $3, "seed": 3, "devices": "cpu", "log_every": 1}
JOB
}
parle_job "$TMP/short.json" 256 1 3
parle_job "$TMP/limit.json" 256 1 0
# 256 outer iterations an epoch: parled is killed well before the job ends.
parle_job "$TMP/long.json" 8192 3 3

# reseeds JOB: the count in status --json.
reseeds() {
    ctl status "$1" --json >"$TMP/st.json" && field "$TMP/st.json" reseeds
}

# check_metrics_reseeds JOB: progress lines carry 0 up to step 4 (outer
# iteration 2, before the failure) and 1 from step 6 (outer iteration 3) on.
check_metrics_reseeds() {
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
prog = [(r["step"], r["reseeds"]) for r in rows if r["event"] == "progress"]
assert prog, "no progress lines"
bad = [(s, n) for s, n in prog if n != (0 if s <= 4 else 1)]
assert not bad, f"(step, reseeds) against 0 to step 4, 1 after: {bad[:5]}"
assert prog[0][0] <= 4 and prog[-1][1] == 1, f"progress lines {prog[:3]}...{prog[-1:]}"
' "$STATE/jobs/$1/metrics.jsonl" || fail "$1: reseeds in metrics.jsonl"
}

PARLE_FAULT_REPLICA=1:nan:3:1 start_daemon
a=$(ctl submit "$TMP/short.json" -q) || fail "submit the short job"
b=$(ctl submit "$TMP/limit.json" -q) || fail "submit the job with max_reseeds 0"
c=$(ctl submit "$TMP/long.json" -q) || fail "submit the long job"

wait_state "$a" done 60
[ "$(reseeds "$a")" = 1 ] || fail "$a: reseeds in status --json is '$(reseeds "$a")'"
ctl status "$a" | grep -qx "  replicas re-seeded: 1" || fail "$a: parlectl status: $(ctl status "$a")"
check_metrics_reseeds "$a"
line="replica 1 re-seeded from parle's consensus at step [0-9]+ \(outer iteration 3; the job's "
line+="re-seeds: 1 of at most 3\): replica 1: loss is NaN at step 5 "
grep -Eq "$line" "$STATE/jobs/$a/log.txt" || fail "$a: no re-seed line in the log: $(cat "$STATE/jobs/$a/log.txt")"

wait_state "$b" failed 60
ctl status "$b" --json >"$TMP/st.json"
err=$(field "$TMP/st.json" error)
case $err in
    *"replica 1: loss is NaN at step 5"*"past algorithm.max_reseeds = 0"*) ;;
    *) fail "$b: error is '$err'" ;;
esac

# The long job: re-seeded at outer iteration 3, its first checkpoint at 256.
wait_log "$c" "checkpoint at outer iteration 256 \(step 512\) written" 120
kill_daemon
grep -q "re-seeded" "$STATE/jobs/$c/log.txt" || fail "$c: not re-seeded before the kill"
start_daemon
ctl wait "$c" || fail "the resumed job did not end done"
step=$(resume_step "$c")
[ -n "$step" ] && [ "$step" -ge 512 ] || fail "$c did not resume from its checkpoint (step '$step')"
[ "$(reseeds "$c")" = 1 ] || fail "$c: reseeds after the resume is '$(reseeds "$c")'"
[ "$(grep -c "re-seeded" "$STATE/jobs/$c/log.txt")" = 1 ] || fail "$c: re-seeded again"
check_metrics_reseeds "$c"
stop_daemon
echo PASS
