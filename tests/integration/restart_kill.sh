#!/bin/bash
# kill -9 of parled mid-job: at the next start the job resumes from its newest
# complete checkpoint and completes, its metrics history intact (the lines up
# to the checkpoint as they were, none after it twice).
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/job.json" 4
# 1,024 steps an epoch: long enough that the kill lands between two
# checkpoints even on a fast, quiet machine.
sed -i 's/"train_limit": 1024/"train_limit": 32768/' "$TMP/job.json"
id=$(ctl submit "$TMP/job.json" -q) || fail "submit"
wait_log "$id" "checkpoint at outer iteration 1024 \(step 1024\) written" 60
# Killed with metrics written past the checkpoint: those lines must go.
for _ in $(seq 600); do
    grep -q '"step":10[4-9][0-9],' "$STATE/jobs/$id/metrics.jsonl" && break
    sleep 0.02
done
kill_daemon
grep -q '"state":[[:space:]]*"running"' "$STATE/jobs/$id/status.json" ||
    fail "status.json of the killed job does not say running"
cp "$STATE/jobs/$id/metrics.jsonl" "$TMP/metrics.before"

start_daemon
grep -q "reloaded 1 job(s): 1 queued (1 of them interrupted" "$TMP/parled.err" ||
    fail "the daemon log does not report the reload"
ctl wait "$id" || fail "the resumed job did not end done"
grep -q "parled restarted while the job ran" "$STATE/jobs/$id/log.txt" || fail "no restart note"
step=$(resume_step "$id")
[ -n "$step" ] && [ "$step" -ge 1024 ] || fail "the job did not resume from a checkpoint (step '$step')"
grep -q "metrics.jsonl: dropped [0-9]* line(s) after step $step" "$STATE/jobs/$id/log.txt" ||
    fail "no metrics lines past the checkpoint were dropped"
check_metrics "$STATE/jobs/$id/metrics.jsonl" 4 "$TMP/metrics.before" "$step"
ctl status "$id" --json >"$TMP/st.json"
[ "$(field "$TMP/st.json" epoch)" = 4 ] || fail "epoch is not 4"
[ "$(field "$TMP/st.json" step)" = 4096 ] || fail "step is not 4096 (4 epochs of 1024)"
stop_daemon
echo PASS
