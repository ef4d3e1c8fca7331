#!/bin/bash
# Submit a LeNet job on 2000 Fashion-MNIST images, wait for it, and check its
# status, metrics and files.
. "$(dirname "$0")/lib.sh"

DATA=/usr/share/datasets/fashion-mnist
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] || {
    echo "SKIP: no Fashion-MNIST under $DATA"
    exit 77
}
start_daemon

id=$(ctl submit "$PARLE_SOURCE_ROOT/configs/lenet-fmnist-sgd.json" -q --set data.train_limit=2000 \
    --set data.test_limit=1000 --set epochs=2 --set name=it-lenet) || fail "submit failed"
[[ "$id" =~ ^j[0-9]{4,}$ ]] || fail "submit -q printed '$id', not a job id"

ctl wait "$id" || fail "wait $id exited $? (expected 0: done)"

ctl status "$id" --json >"$TMP/status.json" || fail "status --json failed"
for f in id name state error algorithm replicas epoch epochs step data_passes images_per_sec \
    test_error test_loss train_loss elapsed_s eta_s; do
    grep -q "^[[:space:]]*\"$f\":" "$TMP/status.json" || fail "status --json lacks $f"
done
[ "$(field "$TMP/status.json" id)" = "$id" ] || fail "status id"
[ "$(field "$TMP/status.json" name)" = "it-lenet" ] || fail "--set name was not applied"
[ "$(field "$TMP/status.json" state)" = done ] || fail "state is not done"
[ "$(field "$TMP/status.json" epoch)" = 2 ] || fail "epoch is not 2"
[ "$(field "$TMP/status.json" algorithm)" = sgd ] || fail "algorithm"
err=$(field "$TMP/status.json" test_error)
# Chance is 0.9; two epochs on 2000 images must do far better.
awk -v e="$err" 'BEGIN { exit !(e >= 0 && e < 0.5) }' || fail "test_error $err is not in [0, 0.5)"
step=$(field "$TMP/status.json" step)
[ "$step" -ge 16 ] || fail "step $step: 2 epochs of 2000 / 128 take 32 steps"

dir=$STATE/jobs/$id
for f in job.json status.json metrics.jsonl log.txt; do
    [ -s "$dir/$f" ] || fail "$dir/$f is missing or empty"
done
grep -q '"state":[[:space:]]*"done"' "$dir/status.json" || fail "status.json does not say done"
grep -q '"event":"progress"' "$dir/metrics.jsonl" || fail "no progress line in metrics.jsonl"
# One evaluation an epoch: eval.every_passes' default spaces them ten
# evaluations' cost apart, (2000 + 1000) / (2 x 128) steps x 10, more than a
# one-pass epoch of 16 steps. Each line says the seconds evaluating so far.
[ "$(grep -c '"event":"eval"' "$dir/metrics.jsonl")" = 2 ] || fail "expected 2 eval lines"
[ "$(grep '"event":"eval"' "$dir/metrics.jsonl" | grep -c '"eval_s":[0-9]')" = 2 ] ||
    fail "eval lines without eval_s"
# No training error is computed: none is written (it read 0 for every job).
! grep -q train_error "$dir/metrics.jsonl" || fail "metrics.jsonl has a train_error"
ctl logs "$id" | grep -q "done: 2 epochs" || fail "logs lack the end"

# wait and watch on a job that has already ended answer at once.
ctl watch "$id" >"$TMP/watch.txt" || fail "watch of a done job exited non-zero"
grep -q "$id done" "$TMP/watch.txt" || fail "watch did not print the end"
stop_daemon
echo PASS
