#!/bin/bash
# A failing or stuck replica never outlives its job (PARLE_FAULT_REPLICA in
# parled's environment picks one replica and one point of one outer
# iteration): the job ends failed within seconds with the replica and step in
# its error and log, and the next queued job runs; a cancel ends a job whose
# replica is stuck; SIGTERM during a stuck job exits within --stop-timeout and
# the job resumes at the next start.
. "$(dirname "$0")/lib.sh"

# parle_job FILE EPOCHS: 3 replicas of Parle on the synthetic set, 32 outer
# iterations (96 steps) an epoch.
parle_job() {
    cat >"$1" <<JOB
{"name": "it-parle", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 1024, "test_limit": 256},
 "algorithm": {"name": "parle", "replicas": 3, "L": 3}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": $2, "seed": 3, "devices": "cpu", "log_every": 4}
JOB
}
parle_job "$TMP/parle.json" 3
# The next job: one replica, 16 outer iterations, so no fault above reaches it.
cat >"$TMP/next.json" <<JOB
{"name": "it-next", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 512, "test_limit": 256},
 "algorithm": {"name": "sgd"}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": 1, "seed": 3, "devices": "cpu"}
JOB

# status_error ID: the error field of the job's status.
status_error() {
    ctl status "$1" --json >"$TMP/st.json" && field "$TMP/st.json" error
}

for fault in 1:step:5:2 2:sync:7 0:eval:32 2:eval:32 1:checkpoint:32; do
    case $fault in
        1:step:5:2) want="replica 1: injected failure at step 14" ;;
        2:sync:7) want="replica 2: injected failure in the sync of outer iteration 7" ;;
        0:eval:32) want="replica 0: injected failure in the evaluation after outer iteration 32" ;;
        2:eval:32) want="replica 2: injected failure in the evaluation after outer iteration 32 (step 96)" ;;
        1:checkpoint:32) want="replica 1: injected failure in the checkpoint after outer iteration 32" ;;
    esac
    PARLE_FAULT_REPLICA=$fault start_daemon
    a=$(ctl submit "$TMP/parle.json" -q) || fail "$fault: submit"
    b=$(ctl submit "$TMP/next.json" -q) || fail "$fault: submit the next job"
    wait_state "$a" failed 60
    status_error "$a" | grep -qF "$want" || fail "$fault: error is '$(status_error "$a")'"
    grep -qF "failed: $want" "$STATE/jobs/$a/log.txt" || fail "$fault: the log lacks the error"
    wait_state "$b" done 60
    check_alive "$fault"
    stop_daemon
done

# A stuck replica, then a cancel: the job ends cancelled at once.
PARLE_FAULT_REPLICA=1:hang:3:1 start_daemon --stop-timeout 2
a=$(ctl submit "$TMP/parle.json" -q) || fail "submit the stuck job"
wait_steps "$a" 60
sleep 1
ctl cancel "$a" | grep -q cancelling || fail "cancel the stuck job"
wait_state "$a" cancelled 5
grep -q "cancelled at epoch" "$STATE/jobs/$a/log.txt" || fail "the log does not record the cancel"

# A stuck replica, then SIGTERM: the checkpoint cannot happen, the grace runs
# out, parled exits, and the job is kept to resume.
b=$(ctl submit "$TMP/parle.json" -q) || fail "submit the second stuck job"
wait_steps "$b" 60
sleep 1
kill -TERM "$DAEMON_PID"
wait_exit 30 || fail "parled did not exit within 30 s of SIGTERM with a stuck replica"
[ "$EXIT_STATUS" -eq 0 ] || fail "parled exited with $EXIT_STATUS"
grep -q "the stop timeout passed" "$STATE/jobs/$b/log.txt" || fail "no stop-timeout note in $b's log"
grep -q '"state":[[:space:]]*"running"' "$STATE/jobs/$b/status.json" ||
    fail "the stopped job is not kept to resume"
start_daemon
wait_state "$b" done 120
stop_daemon
echo PASS
