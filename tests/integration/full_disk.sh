#!/bin/bash
# A real full disk: the state dir on a small tmpfs. A job whose disk fills
# while it runs shows its failing checkpoints and master in its status, does
# not end done without its final master (it keeps it in memory and retries,
# still running), and a job submitted meanwhile waits for the disk; once
# another job is removed the first saves and ends done, the waiting one runs
# to done, both export weights that evaluate to their status, and a restart
# on the same directory loads every job. A job waiting for the disk keeps no
# cores from a later job that fits and preempts no job of a lower priority.
# Needs root (mount).
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: full_disk needs root to mount a tmpfs as the state dir"
    exit 77
fi
mkdir -p "$STATE"
if ! mount -t tmpfs -o size=6m tmpfs "$STATE" 2>"$TMP/mount.err"; then
    echo "SKIP: full_disk could not mount a tmpfs: $(cat "$TMP/mount.err")"
    exit 77
fi
# Stop parled before the tmpfs goes, then lib.sh's cleanup.
trap 'rc=$?; [ -n "$DAEMON_PID" ] && kill -KILL "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID";
      DAEMON_PID=; umount "$STATE"; (exit $rc); cleanup' EXIT

# The second job this parled runs parks after its step 4, before its first
# checkpoint, until the test has filled the disk.
PARLE_FAULT_REPLICA=0:park:2:4 PARLE_FAULT_RELEASE=$TMP/release start_daemon --save-retry 120
ctl status | grep -q "^state dir: .* MiB free of [56]\.[0-9] MiB$" ||
    fail "parlectl status does not show the state dir's free space: $(ctl status | head -3)"
# One core each (cpu:1): a job waits for the disk, not for the CPU.
mlp_job "$TMP/job.json" 3
sed -i 's/"devices": "cpu"/"devices": "cpu:1"/' "$TMP/job.json"
# One that keeps more checkpoints than the whole disk holds never could run.
sed 's/"epochs"/"checkpoint": {"keep": 50}, "epochs"/' "$TMP/job.json" >"$TMP/huge.json"
out=$(ctl submit "$TMP/huge.json" 2>&1) && fail "a job larger than the disk was accepted"
echo "$out" | grep -q "disk: the job writes up to .* more than the .* the state dir's file system ($STATE/jobs) holds" ||
    fail "the refusal of a job larger than the disk: $out"
a=$(ctl submit "$TMP/job.json" -q) && ctl wait "$a" >/dev/null || fail "$a did not end done"
b=$(ctl submit "$TMP/job.json" -q) || fail "submit b"
wait_log "$b" "parked after step" 30
# The disk fills up (with a file in a's folder, which removing a frees) but
# for 128 KiB: room for a job's status and log, none for a master.
dd if=/dev/zero of="$STATE/jobs/$a/ballast" bs=64k 2>/dev/null
[ "$(df --output=avail "$STATE" | tail -n 1)" -eq 0 ] || fail "the tmpfs did not fill up"
truncate -s -128K "$STATE/jobs/$a/ballast"
touch "$TMP/release"

# b trains to its end without a checkpoint or master on disk: it does not end
# done, it says why, and keeps trying.
for _ in $(seq 300); do
    ctl status "$b" --json >"$TMP/b.json" || fail "status $b"
    grep -q '"save_error":.*final master.*retried' "$TMP/b.json" && break
    sleep 0.1
done
[ "$(field "$TMP/b.json" state)" = running ] || fail "$b is not running while it retries: $(cat "$TMP/b.json")"
grep -q '"save_error":.*checkpoint at outer iteration 64 failed (there is no earlier one to resume from): .*No space left on device' \
    "$TMP/b.json" || fail "$b's status does not show its failed checkpoint: $(grep save_error "$TMP/b.json")"
grep -q '"save_error":.*the final master (epoch 3) could not be written: .*No space left on device' \
    "$TMP/b.json" || fail "$b's status does not show its final master's failure: $(grep save_error "$TMP/b.json")"
ctl status "$b" | grep -q "^  saving: .*No space left on device" || fail "human status: $(ctl status "$b")"
ctl list | grep "^$b " | grep -q "saving: " || fail "list does not show $b saving: $(ctl list)"
ctl export "$b" "$TMP/none.safetensors" 2>/dev/null && fail "$b exported a master it could not write"

# A job submitted now waits for the disk, naming it.
c=$(ctl submit "$TMP/job.json" -q) || fail "submit c"
sleep 1
ctl status "$c" --json >"$TMP/c.json"
[ "$(field "$TMP/c.json" state)" = queued ] || fail "$c started on a full disk"
grep -q "\"waiting\":[[:space:]]*\"disk: the job writes up to .* to $STATE/jobs, which has [0-9]* KiB free" \
    "$TMP/c.json" || fail "$c's waiting: $(grep waiting "$TMP/c.json")"

# Room again: b saves and ends done, c runs; every done job exports weights
# that evaluate to what its status says.
ctl rm "$a" >/dev/null || fail "rm $a"
ctl wait "$b" >/dev/null || fail "$b did not end done once there was room: $(ctl status "$b")"
ctl wait "$c" >/dev/null || fail "$c did not end done"
grep -q "the final master written after" "$STATE/jobs/$b/log.txt" || fail "$b's log does not say it saved"
ctl status "$b" --json | grep -q '"save_error":[[:space:]]*null' || fail "$b still shows a save error"
for id in $(ctl list --state done --json | sed -n 's/^[[:space:]]*"id":[[:space:]]*"\(j[0-9]*\)",$/\1/p'); do
    ctl status "$id" --json >"$TMP/st.json"
    ctl export "$id" "$TMP/$id.safetensors" >/dev/null || fail "done job $id has no master to export"
    "$PARLE_TRAIN" --eval "$TMP/$id.safetensors" "$TMP/job.json" >"$TMP/eval.txt" ||
        fail "parle-train --eval $id"
    python3 -c '
import sys, re
err = float(sys.argv[1])
m = re.match(r"test error: ([0-9.]+)% test loss", open(sys.argv[2]).read().strip())
assert abs(float(m.group(1)) / 100 - err) <= 1e-4, (err, m.group(1))
' "$(field "$TMP/st.json" test_error)" "$TMP/eval.txt" || fail "$id's export does not evaluate as its status says"
    seen="${seen:-} $id"
done
[ "$seen" = " $b $c" ] || fail "done jobs exported:$seen (expected $b $c)"

# A restart on the same directory loads every job.
stop_daemon
start_daemon
for id in "$b" "$c"; do
    [ "$(ctl status "$id" --json | sed -n 's/^[[:space:]]*"state":[[:space:]]*"\(.*\)",$/\1/p')" = done ] ||
        fail "$id is not done after the restart"
done

# A job waiting for the disk keeps no cores and preempts no job: with 10 MiB
# free, l runs on one core at priority -1; big (the whole CPU, priority 0,
# 31 checkpoints: more than the free space even with what l is yet to write)
# would preempt l for its cores but waits for the disk instead; s (one
# core), submitted after it, runs meanwhile.
ctl rm "$b" "$c" >/dev/null || fail "rm $b $c"
mount -o remount,size=32m "$STATE" || fail "remount the tmpfs at 32 MiB"
dd if=/dev/zero of="$STATE/ballast" bs=64k 2>/dev/null
truncate -s -10M "$STATE/ballast"
sed 's/"epochs": 3/"epochs": 300/' "$TMP/job.json" >"$TMP/long.json"
sed 's/"epochs"/"checkpoint": {"keep": 30}, "epochs"/; s/"cpu:1"/"cpu"/' "$TMP/job.json" >"$TMP/big.json"
waits_keeping_nothing "$TMP/long.json" "$TMP/big.json" "$TMP/job.json" "the disk" \
    "^disk: the job writes up to "
stop_daemon
echo PASS
