#!/bin/bash
# A failed job keeps its checkpoints and `parlectl resume` runs it on from the
# newest one (docs/protocol.md, "resume"): a Parle job made to fail by fault
# injection (PARLE_FAULT_REPLICA) after its first checkpoint, parled killed
# with -9 while it lies failed, then resumed by the restarted daemon to done,
# its log saying where it resumed and its metrics whole up to there. Refused:
# a done job, a failed job with no checkpoint (unless --from-scratch, which
# then runs to done), a resume past --max-jobs-per-user. Another user's
# resume is refused in multiuser.sh.
. "$(dirname "$0")/lib.sh"

# parle_job FILE TRAIN_LIMIT: 3 replicas of Parle, 2 epochs of TRAIN_LIMIT/32
# outer iterations, a checkpoint after the first.
parle_job() {
    cat >"$1" <<JOB
{"name": "it-resume", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": $2, "test_limit": 256},
 "algorithm": {"name": "parle", "replicas": 3, "L": 3}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": 2, "seed": 3, "devices": "cpu", "log_every": 4}
JOB
}
parle_job "$TMP/ckpt.json" 1024    # 32 outer iterations an epoch: fails after k = 32
parle_job "$TMP/nockpt.json" 2048  # 64 an epoch: fails before its first checkpoint
mlp_job "$TMP/done.json" 1         # one replica: the fault never reaches it

# resume_refused ID CODE_TEXT: parlectl resume fails, saying CODE_TEXT.
resume_refused() {
    out=$(ctl resume "$1" 2>&1) && fail "resume of $1 was accepted: $out"
    echo "$out" | grep -qF -- "$2" || fail "resume of $1: no clear refusal: $out"
}

# Replica 1 fails at inner step 2 of outer iteration 40 in every job of this
# daemon with 3 replicas.
want="replica 1: injected failure at step 119"
PARLE_FAULT_REPLICA=1:step:40:2 start_daemon
a=$(ctl submit "$TMP/ckpt.json" -q) || fail "submit"
b=$(ctl submit "$TMP/nockpt.json" -q) || fail "submit the job that fails before a checkpoint"
d=$(ctl submit "$TMP/done.json" -q) || fail "submit the job that ends done"
wait_state "$a" failed 120
wait_state "$b" failed 120
wait_state "$d" done 120
grep -qF "$want" "$STATE/jobs/$a/status.json" || fail "$a's error: $(field "$STATE/jobs/$a/status.json" error)"
ls "$STATE/jobs/$a/ckpt/"k*/manifest.json >/dev/null 2>&1 ||
    fail "the failed job $a kept no complete checkpoint"
[ ! -e "$STATE/jobs/$d/ckpt" ] || fail "the done job $d kept its checkpoints"
resume_refused "$d" "job $d is done: only a failed or timed-out job can be resumed"
resume_refused "$b" "job $b has no complete checkpoint to resume from"
resume_refused j9999 "no job j9999"
cp "$STATE/jobs/$a/metrics.jsonl" "$TMP/before.jsonl"

# kill -9 while the job lies failed: the next daemon still resumes it.
kill_daemon
start_daemon --max-jobs-per-user 1
wait_state "$a" failed 10
long=$(ctl submit "$TMP/nockpt.json" -q) || fail "submit the job that fills the user's bound"
out=$(ctl resume "$a" 2>&1) && fail "resume past --max-jobs-per-user was accepted: $out"
echo "$out" | grep -q -- "--max-jobs-per-user" || fail "resume past the bound: $out"
ctl cancel "$long" >/dev/null || fail "cancel $long"
wait_state "$long" cancelled 60
ctl resume "$a" --json >"$TMP/resume.json" || fail "resume $a"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
assert r["id"] == sys.argv[2] and r["state"] in ("queued", "running") and r["from_step"] == 96, r' \
    "$TMP/resume.json" "$a" || fail "resume --json: $(cat "$TMP/resume.json")"
resume_refused "$a" "only a failed or timed-out job can be resumed"
ctl wait "$a" >/dev/null || fail "the resumed job did not end done: $(field "$STATE/jobs/$a/status.json" error)"
[ "$(resume_step "$a")" = 96 ] || fail "the job did not resume from step 96: $(tail -n 20 "$STATE/jobs/$a/log.txt")"
grep -qF "failed: $want" "$STATE/jobs/$a/log.txt" || fail "the log lost the job's failure"
grep -q "resume asked by .*: queued to resume from its checkpoint at outer iteration 32 (step 96)" \
    "$STATE/jobs/$a/log.txt" || fail "the log does not record the resume"
[ "$(field "$STATE/jobs/$a/status.json" error)" = null ] || fail "the done job still has an error"
[ ! -e "$STATE/jobs/$a/ckpt" ] || fail "the job, done, kept its checkpoints"
check_metrics "$STATE/jobs/$a/metrics.jsonl" 2 "$TMP/before.jsonl" 96

# --from-scratch: the job without a checkpoint runs again from step 0.
ctl resume "$b" --from-scratch | grep -q "from scratch" || fail "resume $b --from-scratch"
ctl wait "$b" >/dev/null || fail "$b, run again from scratch, did not end done"
grep -q "starting over from scratch" "$STATE/jobs/$b/log.txt" || fail "$b: no start from scratch in its log"
check_metrics "$STATE/jobs/$b/metrics.jsonl" 2
check_alive "the resumes"
stop_daemon
echo PASS
