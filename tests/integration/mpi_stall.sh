#!/bin/bash
# mpi_stall.sh: under `mpirun -n 2 parled --mpi` (loopback), rank 1 is
# stopped with SIGSTOP mid-job, past comm.timeout_s, then continued, as after
# any long stall (issue #28). Once for Parle (its all-reduces and agreements
# left pending), once for AD-PSGD (peer requests and agreements):
#   1. the job fails within comm.timeout_s plus a margin, naming rank 1 and
#      its replicas;
#   2. continued, rank 1 learns the job failed and waits for the next;
#   3. the next job runs on both ranks to done: the collectives the failed
#      job left pending complete later into buffers that are still the
#      net's (docs/mpi.md, "Operations a failed job leaves pending"), not
#      into freed memory;
#   4. SIGTERM ends the MPI job cleanly (every rank stops, no signal), and
#      nothing in any rank's stderr says heap corruption or a sanitizer
#      report.
# Skipped without mpirun or an MPI build.
. "$(dirname "$0")/lib.sh"
mpi_setup
. "$(dirname "$0")/mpi_lib.sh"
T=3      # comm.timeout_s
MARGIN=5 # for a loaded 2-core machine: polls, the notice's round trip

adpsgd_job() { # FILE EPOCHS
    cat >"$1" <<JOB
{"name": "mpi-adpsgd", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 1024, "test_limit": 256},
 "algorithm": {"name": "adpsgd", "replicas": 4}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": $2, "seed": 5, "devices": "cpu", "log_every": 4, "comm": {"timeout_s": $T}}
JOB
}

PARLED_WRAP=$(mpi_loopback 2) start_daemon --mpi
r1=$(rank_pid 1)
[ -n "$r1" ] || fail "no pid logged for rank 1"

# stall JOB_FILE: the job stopped on rank 1 past the deadline, then continued.
stall() {
    id=$(ctl submit "$1" -q) || fail "submit $1"
    wait_steps "$id" 60
    failed_before=$(grep -c "parled\[rank 1\]: job failed" "$TMP/parled.err")
    kill -STOP "$r1"
    timed_wait "$id" $((T + 60))
    kill -CONT "$r1"
    [ "$WAIT_RC" = 1 ] || fail "job $id did not fail with rank 1 stopped (parlectl wait: $WAIT_RC)"
    echo "job $id failed after $WAIT_S s: $(error_of "$id")"
    within "$WAIT_S" $((T + MARGIN)) || fail "job $id took $WAIT_S s to fail (comm.timeout_s = $T)"
    # A sum names the rank and its replicas; a peer request the replica
    # asked, or the one whose request did not arrive.
    error_of "$id" | grep -Eq "rank 1 \(replicas 2\.\.3\)|replica [23]'s rank 1 |rank 1's replica [23] " ||
        fail "job $id's error does not name rank 1 and its replicas: $(error_of "$id")"
    for _ in $(seq 300); do
        [ "$(grep -c "parled\[rank 1\]: job failed" "$TMP/parled.err")" -gt "$failed_before" ] &&
            break
        sleep 0.1
    done
    [ "$(grep -c "parled\[rank 1\]: job failed" "$TMP/parled.err")" -gt "$failed_before" ] ||
        fail "continued, rank 1 did not end its part of job $id within 30 s"
}

# next_job JOB_FILE: runs on both ranks to done.
next_job() {
    on_before=$(grep -c "parled\[rank 0\]: job [0-9]*: on 2 of the 2 ranks" "$TMP/parled.err")
    id=$(ctl submit "$1" -q) || fail "submit $1"
    timed_wait "$id" 120
    [ "$WAIT_RC" = 0 ] || fail "job $id after the stall did not end done: $(error_of "$id")"
    [ "$(grep -c "parled\[rank 0\]: job [0-9]*: on 2 of the 2 ranks" "$TMP/parled.err")" -gt \
      "$on_before" ] || fail "job $id did not run on both ranks"
    echo "job $id after the stall: done in $WAIT_S s"
    sanitizer_clean
}

# Parle: replicas 0..1 on rank 0, 2..3 on rank 1; long enough to be stopped.
parle_job "$TMP/long.json" 50 1024 4 $T
parle_job "$TMP/short.json" 1 512 4 $T
stall "$TMP/long.json"
next_job "$TMP/short.json"

adpsgd_job "$TMP/adpsgd-long.json" 50
adpsgd_job "$TMP/adpsgd-short.json" 1
stall "$TMP/adpsgd-long.json"
next_job "$TMP/adpsgd-short.json"

kill -TERM "$DAEMON_PID"
wait_exit 60 || fail "the MPI job did not end within 60 s of SIGTERM"
# mpirun reports the forwarded SIGTERM as status 1; a signal would be 128 + N.
[ "$EXIT_STATUS" -le 1 ] || fail "mpirun exited with $EXIT_STATUS after SIGTERM"
grep -q "parled\[rank 1\]: stopping" "$TMP/parled.err" || fail "rank 1 did not stop"
grep -q "parled: info: stopped" "$TMP/parled.err" || fail "rank 0 did not stop"
sanitizer_clean
echo PASS
