#!/bin/bash
# Job files with bad fields are refused whole, naming each field by its
# dotted path; a job whose data cannot be loaded ends failed; others go on.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/good.json" 1

# expect_invalid WHAT TEXT --set ...: submitting must fail with TEXT in the message.
expect_invalid() {
    what=$1 text=$2
    shift 2
    ctl submit "$TMP/good.json" "$@" 2>"$TMP/err" && fail "$what: the job was accepted"
    grep -qF -- "$text" "$TMP/err" || fail "$what: expected '$text' in: $(cat "$TMP/err")"
    check_alive "$what"
}

expect_invalid "lr <= 0" "optim.lr:" --set optim.lr=-1
expect_invalid "lr of the wrong type" "optim.lr:" --set optim.lr=fast
expect_invalid "unknown algorithm" "algorithm.name:" --set algorithm.name=adam9
expect_invalid "unknown arch" "model.arch:" --set model.arch=transformer
expect_invalid "arch of the wrong type" "model.arch:" --set model.arch=5
expect_invalid "unknown dataset" "data.dataset:" --set data.dataset=imagenet
expect_invalid "epochs 0" "epochs:" --set epochs=0
expect_invalid "replicas 0" "algorithm.replicas:" --set algorithm.replicas=0
expect_invalid "batch of the wrong type" "optim.batch:" --set optim.batch='[1]'
expect_invalid "unknown field" "optim.learning_rate" --set optim.learning_rate=0.1
expect_invalid "unknown section" "extra" --set extra.x=1
expect_invalid "bad devices" "devices:" --set devices=gpu-please
expect_invalid "a GPU outside --devices" "devices:" --set devices=3
# Ranks other than rank0 exist only under parled --mpi (docs/mpi.md): refused,
# not run on this process's CPU.
expect_invalid "MPI ranks without --mpi" 'devices: "rank0:cpu,rank2:cpu" names rank2' \
    --set devices=rank0:cpu,rank2:cpu
grep -qF "not running under MPI" "$TMP/err" || fail "MPI ranks without --mpi: $(cat "$TMP/err")"
# Every bad field is reported, not only the first.
ctl submit "$TMP/good.json" --set optim.lr=-1 --set epochs=0 --set model.arch=x 2>"$TMP/err" &&
    fail "three bad fields were accepted"
for p in optim.lr: epochs: model.arch:; do
    grep -qF "$p" "$TMP/err" || fail "the message lacks $p: $(cat "$TMP/err")"
done
grep -q "invalid job" "$TMP/err" || fail "no 'invalid job' in: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/err")" = 1 ] || fail "the error is not one line"
# A file that is not JSON is refused by parlectl itself.
printf '{"model": ' >"$TMP/broken.json"
ctl submit "$TMP/broken.json" 2>&1 | grep -q "not valid JSON" || fail "a broken job file"
[ -z "$(ls "$STATE/jobs")" ] || fail "an invalid job left files in the state dir"

# A dataset path that does not exist: the job ends failed with a clear error.
bad=$(ctl submit "$TMP/good.json" -q --set data.dataset=fashion-mnist \
    --set data.root=/nonexistent/fmnist) || fail "submit of a job with a missing dataset"
ctl wait "$bad" 2>"$TMP/err"; [ $? = 1 ] || fail "wait on a failed job must exit 1"
grep -q "/nonexistent/fmnist" "$TMP/err" || fail "wait's message lacks the path: $(cat "$TMP/err")"
ctl status "$bad" --json >"$TMP/st.json"
[ "$(field "$TMP/st.json" state)" = failed ] || fail "the job is not failed"
field "$TMP/st.json" error | grep -q "/nonexistent/fmnist" || fail "status error lacks the path"
# ... and the daemon goes on with the next job.
good=$(ctl submit "$TMP/good.json" -q) || fail "submit after a failed job"
ctl wait "$good" || fail "a good job after a failed one did not end done"
# rank0 alone is this one process: accepted without --mpi, and runs.
r0=$(ctl submit "$TMP/good.json" -q --set devices=rank0:cpu) || fail "rank0:cpu was refused"
ctl wait "$r0" || fail "a rank0:cpu job did not end done"
stop_daemon
echo PASS
