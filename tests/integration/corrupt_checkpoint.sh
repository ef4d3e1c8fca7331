#!/bin/bash
# A byte flipped in the newest checkpoint on disk: the next start skips it
# (the log says why), resumes from the one before, and the job completes.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/job.json" 100
id=$(ctl submit "$TMP/job.json" -q) || fail "submit"
wait_log "$id" "checkpoint at outer iteration 64 \(step 64\) written" 60
stop_daemon
cp "$STATE/jobs/$id/metrics.jsonl" "$TMP/metrics.before"

ckpt=$STATE/jobs/$id/ckpt
complete=$(for d in "$ckpt"/k*; do [ -f "$d/manifest.json" ] && basename "$d"; done | sort)
[ "$(echo "$complete" | wc -l)" -ge 2 ] || fail "expected 2 complete checkpoints, have: $complete"
newest=$(echo "$complete" | tail -n 1)
previous=$(echo "$complete" | tail -n 2 | head -n 1)
file=$ckpt/$newest/replica0.safetensors
cp "$file" "$TMP/replica0.orig"
python3 -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-100, 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x5a]))
' "$file"
cmp -s "$file" "$TMP/replica0.orig" && fail "the byte was not flipped"

start_daemon
ctl wait "$id" || fail "the job did not complete after the corrupt checkpoint"
grep -q "skipping checkpoint .*/$newest: replica0.safetensors is corrupt" "$STATE/jobs/$id/log.txt" ||
    fail "the log does not say the corrupt checkpoint was skipped"
k=$((10#${previous#k}))
grep -q "resuming from checkpoint at outer iteration $k " "$STATE/jobs/$id/log.txt" ||
    fail "did not resume from the previous checkpoint $previous"
check_metrics "$STATE/jobs/$id/metrics.jsonl" 100 "$TMP/metrics.before" "$(resume_step "$id")"
stop_daemon
echo PASS
