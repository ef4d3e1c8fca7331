#!/bin/bash
# kill -9 of parled mid-job, for a synchronous rule (Parle) and an
# asynchronous one (GoSGD): at the next start each job resumes from its newest
# complete checkpoint and completes. For GoSGD, the weights a_i in the
# checkpoint it resumed from, in one the resumed run wrote and in the final
# status sum to 1 (no message is in flight at a pass end: they are drained).
. "$(dirname "$0")/lib.sh"

# rule_job FILE ALGORITHM_FIELDS EPOCHS: an MLP on synthetic data, 512 batches
# a pass: long enough that the kill lands between two checkpoints.
rule_job() {
    cat >"$1" <<JOB
{"name": "it-rules", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 16384, "test_limit": 256},
 "algorithm": {$2}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": $3, "seed": 5, "devices": "cpu", "log_every": 64}
JOB
}

# sum_a CHECKPOINT_DIR: the sum of rule.a over its replica files.
sum_a() {
    python3 -c '
import glob, json, struct, sys
total, files = 0.0, sorted(glob.glob(sys.argv[1] + "/replica*.safetensors"))
for f in files:
    with open(f, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        total += float(json.loads(fh.read(n))["__metadata__"]["rule.a"])
assert len(files) == 4, f"{len(files)} replica files in {sys.argv[1]}"
print(f"{total:.15f}")
' "$1"
}

check_sum_a() {
    s=$(sum_a "$1") || fail "no rule.a in the checkpoint $1"
    python3 -c "import sys; sys.exit(abs(float('$s') - 1) > 1e-12)" ||
        fail "GoSGD's weights in $1 sum to $s, not 1"
}

# newest complete checkpoint of job ID (its manifest is written last).
newest_checkpoint() {
    ls -d "$STATE/jobs/$1"/ckpt/k*/manifest.json 2>/dev/null | tail -n 1 | xargs -r dirname
}

# run_case ALGORITHM_FIELDS EPOCHS OUTER_PER_EPOCH
run_case() {
    start_daemon
    rule_job "$TMP/job.json" "$1" "$2"
    id=$(ctl submit "$TMP/job.json" -q) || fail "submit $1"
    wait_log "$id" "checkpoint at outer iteration $3 \(step [0-9]+\) written" 120
    kill_daemon
    grep -q '"state":[[:space:]]*"running"' "$STATE/jobs/$id/status.json" ||
        fail "$1: status.json of the killed job does not say running"
    ckpt=$(newest_checkpoint "$id")
    [ -n "$ckpt" ] || fail "$1: no complete checkpoint after the kill"
    case "$1" in *gosgd*) check_sum_a "$ckpt" ;; esac

    start_daemon
    wait_log "$id" "resuming from checkpoint at outer iteration" 60
    k=$(sed -n 's/.*resuming from checkpoint at outer iteration \([0-9]*\) .*/\1/p' \
        "$STATE/jobs/$id/log.txt" | tail -n 1)
    if [[ "$1" == *gosgd* ]] && [ "$((k + 1))" -lt "$2" ]; then
        # The resumed run's first checkpoint, copied before the job's end removes it.
        wait_log "$id" "checkpoint at outer iteration $((k + 1)) \(step [0-9]+\) written" 120
        ckpt=$(newest_checkpoint "$id")
        cp -r "$ckpt" "$TMP/resumed" 2>/dev/null || fail "$1: the resumed checkpoint went away"
        check_sum_a "$TMP/resumed"
        rm -rf "$TMP/resumed"
    fi
    ctl wait "$id" || fail "$1: the resumed job did not end done"
    step=$(resume_step "$id")
    [ -n "$step" ] && [ "$step" -ge 512 ] || fail "$1: the job did not resume from a checkpoint"
    check_metrics "$STATE/jobs/$id/metrics.jsonl" "$2"
    ctl status "$id" --json >"$TMP/st.json"
    [ "$(field "$TMP/st.json" epoch)" = "$2" ] || fail "$1: epoch is not $2"
    if [[ "$1" == *gosgd* ]]; then
        python3 -c '
import json, sys
rule = json.load(open(sys.argv[1]))["rule"]
assert abs(sum(rule["a"]) - 1) < 1e-12 and abs(rule["sum_a"] - 1) < 1e-12, rule
' "$TMP/st.json" || fail "$1: the final status does not show weights summing to 1"
    fi
    stop_daemon
    rm -rf "$STATE"
}

# Parle (L = 2): an epoch is 512 outer iterations of 2 steps.
run_case '"name": "parle", "replicas": 2, "L": 2' 3 512
# GoSGD: an outer iteration is a pass (512 steps); p high enough to push often.
run_case '"name": "gosgd", "replicas": 4, "p": 0.2' 4 1
echo PASS
