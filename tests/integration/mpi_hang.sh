#!/bin/bash
# mpi_hang.sh: under `mpirun -n 2 parled --mpi`, rank 1's only replica hangs
# (PARLE_FAULT_REPLICA set on rank 1 alone) without its process dying:
#   1. the running job fails within comm.timeout_s, its error naming rank 1
#      and its replica;
#   2. the next job's hand-off to rank 1 (still stuck) fails within
#      comm.timeout_s naming rank 1, which is then left out;
#   3. jobs go on on rank 0: one whose devices names rank 0 alone, and one
#      with "auto"; one that names rank 1 fails at once saying why;
#   4. SIGTERM ends every rank (rank 0 aborts the MPI job: MPI_Finalize would
#      wait for the stuck rank forever);
#   5. mpirun itself killed (Open MPI 4.1's can crash while it ends a job):
#      the ranks it launched end too (Open MPI's runtime sees to it), so no
#      orphaned rank 0 keeps the socket.
# Skipped without mpirun or an MPI build.
. "$(dirname "$0")/lib.sh"
mpi_setup
. "$(dirname "$0")/mpi_lib.sh"
T=3 # comm.timeout_s

# The fault on rank 1 only: its local replica 0 (replica 1 of the job)
# stops at inner step 1 of outer iteration 3.
cat >"$TMP/rank1-hangs.sh" <<'WRAP'
#!/bin/sh
[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export PARLE_FAULT_REPLICA=0:hang:3:1
exec "$@"
WRAP
chmod +x "$TMP/rank1-hangs.sh"
PARLED_WRAP=$(mpi_loopback 2 "$TMP/rank1-hangs.sh")

job() { # FILE DEVICES
    cat >"$1" <<JOB
{"name": "mpi-hang", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 512, "test_limit": 128},
 "algorithm": {"name": "parle", "replicas": 2, "L": 3}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": 1, "seed": 3, "devices": "$2", "log_every": 4, "comm": {"timeout_s": $T}}
JOB
}
PARLED_WRAP=$PARLED_WRAP start_daemon --mpi

# 1. The hung replica: the job fails within comm.timeout_s, naming rank 1.
job "$TMP/a.json" auto
a=$(ctl submit "$TMP/a.json" -q) || fail "submit a"
wait_steps "$a" 60
timed_wait "$a" 60
[ "$WAIT_RC" = 1 ] || fail "job a did not fail (parlectl wait: $WAIT_RC)"
echo "job a failed after $WAIT_S s: $(error_of "$a")"
error_of "$a" | grep -q "within comm.timeout_s = $T s: rank 1 (replica 1) never began it" ||
    fail "job a's error does not name rank 1 and its replica: $(error_of "$a")"

# 2. Rank 1 is still stuck: the next job's hand-off fails within the deadline.
job "$TMP/b.json" auto
b=$(ctl submit "$TMP/b.json" -q) || fail "submit b"
timed_wait "$b" 60
[ "$WAIT_RC" = 1 ] || fail "job b did not fail (parlectl wait: $WAIT_RC)"
echo "job b failed after $WAIT_S s: $(error_of "$b")"
error_of "$b" | grep -q "MPI: rank 1 did not take the job within $T s" ||
    fail "job b's error does not name rank 1: $(error_of "$b")"
within "$WAIT_S" $((T + 10)) || fail "job b took $WAIT_S s to fail"

# 3. Rank 0 goes on: named alone, then "auto" (every rank not left out).
job "$TMP/c.json" rank0:cpu
c=$(ctl submit "$TMP/c.json" -q) || fail "submit c"
ctl wait "$c" >/dev/null || fail "job c (rank0:cpu) did not end done: $(error_of "$c")"
d=$(ctl submit "$TMP/a.json" -q) || fail "submit d"
ctl wait "$d" >/dev/null || fail "job d (auto, rank 1 left out) did not end done: $(error_of "$d")"
ctl devices | grep -q "^rank 1  pid [0-9]*, [0-9]* cores, [0-9]* GPUs, lost" ||
    fail "devices does not say rank 1 is lost: $(ctl devices)"
[ "$(grep -c "parled\[rank 0\]: job [0-9]*: on 1 of the 2 ranks" "$TMP/parled.err")" = 2 ] ||
    fail "jobs c and d did not run on rank 0 alone"
job "$TMP/e.json" rank0:cpu,rank1:cpu
e=$(ctl submit "$TMP/e.json" -q) || fail "submit e"
timed_wait "$e" 30
[ "$WAIT_RC" = 1 ] || fail "job e (naming the stuck rank) did not fail"
error_of "$e" | grep -q "devices: rank1 did not take an earlier job in time" ||
    fail "job e's error does not say why: $(error_of "$e")"

# 4. SIGTERM: rank 0 cannot finalize with a stuck rank; every rank ends.
kill -TERM "$DAEMON_PID"
wait_exit 60 || fail "the MPI job did not end within 60 s of SIGTERM"
grep -q "a rank is stuck or gone: ending every rank with MPI_Abort" "$TMP/parled.err" ||
    fail "rank 0 did not say why it aborted"
# The runtime kills the stuck rank as mpirun ends; give it a moment under load.
for _ in $(seq 100); do
    pgrep -f "parled --socket $SOCK" >/dev/null || break
    sleep 0.2
done
pgrep -af "parled --socket $SOCK" && fail "a rank outlived the MPI job by 20 s"

# 5. The launcher gone: no orphaned rank keeps the socket.
rm -rf "$STATE"
PARLED_WRAP=$PARLED_WRAP start_daemon --mpi
kill -KILL "$DAEMON_PID"
wait_exit 10 || fail "mpirun did not die of SIGKILL"
for _ in $(seq 50); do
    pgrep -f "parled --socket $SOCK" >/dev/null || break
    sleep 0.2
done
pgrep -af "parled --socket $SOCK" && fail "a rank outlived its killed mpirun by 10 s"
echo PASS
