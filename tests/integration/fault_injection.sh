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
grep -q "checkpoint at outer iteration 32 failed (there is no earlier one to resume from): .*injected" \
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

# A final master that cannot be written (PARLE_FAULT_WRITE_AFTER below its
# 400 KB, above status.json's size): the job retries for --save-retry
# seconds, then fails with the write's error and keeps its checkpoints'
# place for a resume; a job cancelled while it retries says its weights
# are lost.
PARLE_FAULT_WRITE_AFTER=100000 start_daemon --save-retry 2
mlp_job "$TMP/short.json" 1
e=$(ctl submit "$TMP/short.json" -q) || fail "submit e"
ctl wait "$e" 2>/dev/null && fail "$e ended done without its final master"
ctl status "$e" --json >"$TMP/e.json"
[ "$(field "$TMP/e.json" state)" = failed ] || fail "$e: $(field "$TMP/e.json" state)"
grep -q '"error":.*the final master could not be written in 2 s of retries (--save-retry): .*injected' \
    "$TMP/e.json" || fail "$e's error: $(grep '"error"' "$TMP/e.json")"
stop_daemon
PARLE_FAULT_WRITE_AFTER=100000 start_daemon --save-retry 60
f=$(ctl submit "$TMP/short.json" -q) || fail "submit f"
wait_log "$f" "the final master \(epoch 1\) could not be written" 30
ctl cancel "$f" >/dev/null || fail "cancel $f"
wait_state "$f" cancelled 10
grep -q "cancelled while the final master could not be written (.*injected.*): its weights are lost" \
    "$STATE/jobs/$f/log.txt" || fail "$f's log does not say its weights are lost"
stop_daemon

# Out of memory in the middle of a job (replica 0 asks its backend for 1 PiB
# at outer iteration 40; under ASan that must fail as malloc does): that job
# fails naming the device and the bytes, the device is not faulted, the next
# job (32 outer iterations) runs to done, parled stops cleanly.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
PARLE_FAULT_REPLICA=0:oom:40:1 start_daemon
mlp_job "$TMP/two.json" 2
c=$(ctl submit "$TMP/two.json" -q) || fail "submit c"
ctl wait "$c" 2>/dev/null && fail "$c survived its out-of-memory"
ctl status "$c" --json | grep -q "replica 0: step 40: cpu: out of memory allocating 1125899906842624 bytes" ||
    fail "$c's error: $(ctl status "$c")"
ctl devices --json | grep -q '"faulted":[[:space:]]*null' || fail "out of memory marked the device faulted"
mlp_job "$TMP/one.json" 1
d=$(ctl submit "$TMP/one.json" -q) && ctl wait "$d" || fail "the job after the out-of-memory"
stop_daemon
echo PASS
