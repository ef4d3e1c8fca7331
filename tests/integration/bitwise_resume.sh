#!/bin/bash
# Bit-for-bit resume at the daemon level: a 2-replica Parle job stopped by
# SIGTERM (a checkpoint mid-epoch) and resumed by the next parled ends with an
# exported master identical to the same job run without a stop, and with the
# same evaluations (four an epoch of L = 2 passes, eval.every_passes 0.5, so
# that some fall mid-epoch after the resume: steps, epochs, test errors and
# losses).
# Each replica gets one core (parled is held to 2 cores where the machine has
# more).
. "$(dirname "$0")/lib.sh"
if [ "$(nproc)" -gt 2 ] && command -v taskset >/dev/null; then
    PARLED_WRAP="taskset -c 0,1"
fi
cat >"$TMP/job.json" <<JOB
{"name": "it-bitwise", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 1024, "test_limit": 256},
 "algorithm": {"name": "parle", "replicas": 2, "L": 2, "gamma": 0.01, "rho": 1.0},
 "optim": {"lr": 0.02, "momentum": 0.9, "nesterov": true, "batch": 32},
 "epochs": 20, "seed": 11, "devices": "cpu", "log_every": 8, "eval": {"every_passes": 0.5}}
JOB

# Never interrupted, in its own state dir (so the job id, in the file's
# metadata, is the same).
STATE=$TMP/state-ref
start_daemon
ref=$(ctl submit "$TMP/job.json" -q) || fail "submit the reference"
ctl wait "$ref" || fail "the reference job did not end done"
ctl export "$ref" "$TMP/ref.safetensors" >/dev/null || fail "export the reference"
stop_daemon

STATE=$TMP/state
start_daemon
id=$(ctl submit "$TMP/job.json" -q) || fail "submit"
[ "$id" = "$ref" ] || fail "ids differ: $id and $ref"
wait_log "$id" "epoch 1/20: test error" 60

stop_daemon
grep -q "daemon shutdown: checkpointing" "$STATE/jobs/$id/log.txt" || fail "no shutdown note in the log"
grep -q "stopped by the daemon's shutdown" "$STATE/jobs/$id/log.txt" || fail "the job did not stop"
grep -q "done:" "$STATE/jobs/$id/log.txt" && fail "the job ended before the SIGTERM: nothing to test"
cp "$STATE/jobs/$id/metrics.jsonl" "$TMP/metrics.before"

start_daemon
ctl wait "$id" || fail "the resumed job did not end done"
step=$(resume_step "$id")
[ -n "$step" ] && [ "$step" -gt 0 ] || fail "the log does not say the job resumed"
grep -q "checkpoint at outer iteration [0-9]* (step $step) written" "$STATE/jobs/$id/log.txt" ||
    fail "the resume at step $step is not from the checkpoint the shutdown wrote"
check_metrics "$STATE/jobs/$id/metrics.jsonl" 20 "$TMP/metrics.before" "$step"
python3 -c '
import json, sys
def evals(path):
    return [(r["step"], r["epoch"], r["test_error"], r["test_loss"])
            for r in map(json.loads, open(path).read().splitlines()) if r["event"] == "eval"]
ref, resumed = evals(sys.argv[1]), evals(sys.argv[2])
assert len(ref) == 80 and resumed == ref, f"{len(ref)} evaluations; resumed {resumed[:6]}..."
' "$TMP/state-ref/jobs/$ref/metrics.jsonl" "$STATE/jobs/$id/metrics.jsonl" ||
    fail "the resumed job evaluated elsewhere or otherwise than the uninterrupted one"
ctl export "$id" "$TMP/resumed.safetensors" >/dev/null || fail "export the resumed job"
cmp "$TMP/ref.safetensors" "$TMP/resumed.safetensors" ||
    fail "the resumed job's master differs from the uninterrupted one's"
stop_daemon
echo PASS
