#!/bin/bash
# export: the master's weights and BN statistics as safetensors with metadata;
# `parle-train --eval FILE JOB` measures the test error and loss status gave.
# Also before the first evaluation (an error) and after a restart.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/job.json" 1
# A low lr, so the error is not 0 and a wrong weight would show.
sed -i 's/"lr": 0.05/"lr": 0.001/' "$TMP/job.json"
sed 's/"devices"/"eval": {"bn": "replica0"}, "devices"/' "$TMP/job.json" >"$TMP/job-replica0.json"

a=$(ctl submit "$TMP/job.json" -q) || fail "submit a"
b=$(ctl submit "$TMP/job-replica0.json" -q) || fail "submit b"
out=$(ctl export "$b" "$TMP/early.safetensors" 2>&1) && fail "export of a queued job succeeded"
echo "$out" | grep -q "has no evaluated master yet .*(bad_state)$" || fail "early export: $out"
[ ! -e "$TMP/early.safetensors" ] || fail "a failed export left a file"

# evaluate ID JOBFILE: export, re-evaluate, compare with the status.
evaluate() {
    ctl wait "$1" || fail "$1 did not end done"
    ctl status "$1" --json >"$TMP/st.json"
    ctl export "$1" "$TMP/$1.safetensors" >/dev/null || fail "export $1"
    "$PARLE_TRAIN" --eval "$TMP/$1.safetensors" "$2" >"$TMP/eval.txt" || fail "parle-train --eval $1"
    python3 -c '
import sys, re
err, loss = float(sys.argv[1]), float(sys.argv[2])
m = re.match(r"test error: ([0-9.]+)% test loss: ([0-9.]+)$", open(sys.argv[3]).read().strip())
e2, l2 = float(m.group(1)) / 100, float(m.group(2))
assert 0 < err < 0.9, f"status test_error {err}: the job should neither be perfect nor chance"
assert abs(e2 - err) <= 1e-4 and abs(l2 - loss) <= 1e-4 * max(1, loss), (err, e2, loss, l2)
' "$(field "$TMP/st.json" test_error)" "$(field "$TMP/st.json" test_loss)" "$TMP/eval.txt" ||
        fail "$1: --eval gives $(cat "$TMP/eval.txt"), status $(field "$TMP/st.json" test_error) / $(field "$TMP/st.json" test_loss)"
}
evaluate "$a" "$TMP/job.json"
evaluate "$b" "$TMP/job-replica0.json"

# The metadata names the job and its result.
python3 -c '
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
m = header["__metadata__"]
want = {"job_id": sys.argv[2], "job_name": "it-mlp", "arch": "mlp", "algorithm": "sgd",
        "epoch": "1", "epochs": "1", "final": "true", "format": "pt", "eval_bn": "replica0"}
assert all(m.get(k) == v for k, v in want.items()), m
assert abs(float(m["test_error"]) - float(sys.argv[3])) < 1e-12, m
' "$TMP/$b.safetensors" "$b" "$(field "$TMP/st.json" test_error)" || fail "metadata of $b"

# After a restart an ended job still exports, the same file.
stop_daemon
start_daemon
ctl export "$a" "$TMP/again.safetensors" >/dev/null || fail "export after a restart"
cmp -s "$TMP/$a.safetensors" "$TMP/again.safetensors" || fail "the export changed across a restart"
stop_daemon
echo PASS
