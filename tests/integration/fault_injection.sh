#!/bin/bash
# A full disk for checkpoints (PARLE_FAULT_WRITE_AFTER: any atomic write over
# 500000 bytes fails like ENOSPC; the MLP's checkpoint files are ~800 KB, its
# status and master files smaller): the job goes on and ends done, its log
# says each checkpoint failed, and a later restart never uses the torn ones.
. "$(dirname "$0")/lib.sh"
PARLE_FAULT_WRITE_AFTER=500000 start_daemon
mlp_job "$TMP/job.json" 3
a=$(ctl submit "$TMP/job.json" -q) || fail "submit a"
ctl wait "$a" || fail "$a did not end done with checkpoints failing"
grep -q "checkpoint at outer iteration 32 failed (the previous one stays): .*injected" \
    "$STATE/jobs/$a/log.txt" || fail "$a's log does not say the checkpoint failed"
grep -q "written" "$STATE/jobs/$a/log.txt" && fail "a checkpoint was written despite the fault"

# Killed after failed checkpoints, restarted with room on the disk: the torn
# checkpoints are skipped and the job starts over.
mlp_job "$TMP/long.json" 100
b=$(ctl submit "$TMP/long.json" -q) || fail "submit b"
wait_log "$b" "checkpoint at outer iteration 64 failed" 60
kill_daemon
ls "$STATE/jobs/$b/ckpt" | grep -q "^k" || fail "no torn checkpoint directory was left to test with"
start_daemon
ctl wait "$b" || fail "$b did not end done after the restart"
grep -q "resuming from checkpoint" "$STATE/jobs/$b/log.txt" && fail "$b resumed from a torn checkpoint"
grep -q "skipping checkpoint .*no manifest (incomplete)" "$STATE/jobs/$b/log.txt" ||
    fail "$b's log does not say the torn checkpoint was skipped"
grep -q "no complete checkpoint to resume from: starting over from scratch" "$STATE/jobs/$b/log.txt" ||
    fail "$b's log does not say it started over"
check_metrics "$STATE/jobs/$b/metrics.jsonl" 100
stop_daemon
echo PASS
