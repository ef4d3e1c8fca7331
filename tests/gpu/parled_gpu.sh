#!/bin/bash
# parled with jobs on a GPU: a bf16 job checkpoints, parled is killed with -9
# and restarted, the job resumes from its checkpoint and ends done (its test
# error evaluated at bf16); status reports the job's device memory while it
# runs; a tf32 job submitted meanwhile waits for the busy GPU, then runs,
# checkpoints, is killed with parled, resumes and is cancelled; the job after
# the cancel runs to done; parled stops cleanly.
# With two GPUs or more, two jobs on disjoint GPUs run at once. Skips (77)
# when parled sees no GPU.
. "$(dirname "$0")/../integration/lib.sh"
start_daemon
ctl devices --json >"$TMP/devices.json" || fail "parlectl devices"
ngpus=$(python3 -c 'import json,sys; print(sum(d.get("kind") == "gpu" for d in json.load(open(sys.argv[1]))))' \
    "$TMP/devices.json") || fail "devices --json: $(cat "$TMP/devices.json")"
if [ "$ngpus" = 0 ]; then
    echo "SKIP: parled sees no GPU"
    exit 77
fi

# gpu_job FILE PRECISION EPOCHS DEVICES: LeNet-shaped synthetic data would do
# as well; an MLP keeps each epoch short.
gpu_job() {
    cat >"$1" <<JOB
{"name": "it-gpu-$2", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 65536, "test_limit": 1024},
 "algorithm": {"name": "parle", "replicas": 2, "L": 4, "gamma": 0.01, "rho": 1.0},
 "optim": {"lr": 0.05, "momentum": 0.9, "nesterov": true, "batch": 64},
 "epochs": $3, "seed": 5, "devices": "$4", "precision": "$2", "log_every": 16,
 "checkpoint": {"every_epochs": 1, "keep": 2}}
JOB
}

gpu_job "$TMP/bf16.json" bf16 3 cuda:0
a=$(ctl submit "$TMP/bf16.json" -q) || fail "submit the bf16 job"
wait_steps "$a" 60
ctl status "$a" --json >"$TMP/a.json"
python3 - "$TMP/a.json" <<'PY' || fail "status of the running GPU job: $(cat "$TMP/a.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["replica_devices"] == ["cuda:0", "cuda:0"], s["replica_devices"]
mem = s["memory_bytes"]
assert isinstance(mem, dict) and mem.get("cuda:0", 0) > 0, mem
PY

# A second job on the same GPU waits.
gpu_job "$TMP/tf32.json" tf32 50 cuda:0
b=$(ctl submit "$TMP/tf32.json" -q) || fail "submit the tf32 job"
sleep 1
ctl status "$b" --json >"$TMP/b.json"
[ "$(field "$TMP/b.json" state)" = queued ] || fail "job $b did not wait for the busy GPU"

wait_log "$a" "checkpoint at outer iteration [0-9]+ \(step [0-9]+\) written" 120
kill_daemon
start_daemon
ctl wait "$a" || fail "the resumed bf16 job did not end done: $(ctl status "$a")"
step=$(resume_step "$a")
[ -n "$step" ] && [ "$step" -gt 0 ] || fail "the bf16 job did not resume from a checkpoint"
ctl status "$a" --json >"$TMP/a.json"
python3 - "$TMP/a.json" <<'PY' || fail "the bf16 job's result: $(cat "$TMP/a.json")"
import json, sys
s = json.load(open(sys.argv[1]))
err = s["test_error"]
assert s["state"] == "done" and err is not None and 0 <= err < 0.9, (s["state"], err)
PY

# The waiting job runs once the GPU is free, checkpoints, is killed with
# parled and resumed, and is cancelled mid-run.
wait_log "$b" "checkpoint at outer iteration [0-9]+ \(step [0-9]+\) written" 120
kill_daemon
start_daemon
wait_state "$b" running 60
wait_log "$b" "resuming from checkpoint" 60
step=$(resume_step "$b")
[ -n "$step" ] && [ "$step" -gt 0 ] || fail "the tf32 job did not resume from a checkpoint"
ctl cancel "$b" >/dev/null || fail "cancel the running tf32 job"
ctl wait "$b" 2>/dev/null
[ $? = 3 ] || fail "the tf32 job was not cancelled"

# The next job after the kill and the cancel runs to done.
gpu_job "$TMP/after.json" fp32 1 cuda:0
c=$(ctl submit "$TMP/after.json" -q) || fail "submit the job after the cancel"
ctl wait "$c" || fail "the job after the cancel did not end done"

if [ "$ngpus" -ge 2 ]; then
    gpu_job "$TMP/g0.json" tf32 1 cuda:0
    gpu_job "$TMP/g1.json" tf32 1 cuda:1
    d0=$(ctl submit "$TMP/g0.json" -q) && d1=$(ctl submit "$TMP/g1.json" -q) ||
        fail "submit the two one-GPU jobs"
    wait_state "$d1" running 30
    ctl status "$d0" --json >"$TMP/d0.json"
    [ "$(field "$TMP/d0.json" state)" = running ] || fail "jobs on disjoint GPUs did not run at once"
    ctl wait "$d0" && ctl wait "$d1" || fail "the jobs on disjoint GPUs did not end done"
else
    echo "one GPU: two jobs on disjoint GPUs not run"
fi
stop_daemon
echo PASS
