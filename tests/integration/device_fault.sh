#!/bin/bash
# A device fault that leaves the device unusable for the process (a CUDA
# illegal address; injected on the CPU backend: PARLE_FAULT_REPLICA's
# `device` phase, docs/gpu.md "Sticky device faults"): the job fails naming
# it, its device is marked faulted and nothing more starts there, parled
# re-executes itself (same PID, same arguments), and the job queued behind
# runs to done in the new process; the device is healthy again.
. "$(dirname "$0")/lib.sh"
# Replica 1 at outer iteration 40: the second epoch of a 2-replica job. The
# new process inherits the variable, so the job after has one replica only
# and never meets the fault.
PARLE_FAULT_REPLICA=1:device:40:1 start_daemon
pid=$DAEMON_PID
mlp_job "$TMP/a.json" 3
sed -i 's/"name": "sgd"/"name": "allreduce", "replicas": 2/' "$TMP/a.json"
mlp_job "$TMP/b.json" 2
a=$(ctl submit "$TMP/a.json" -q) || fail "submit a"
b=$(ctl submit "$TMP/b.json" -q) || fail "submit b"
ctl status "$b" --json >"$TMP/b.st" && [ "$(field "$TMP/b.st" state)" = queued ] ||
    fail "$b is not queued behind $a"
ctl devices --json >"$TMP/dev0.json" || fail "devices"
grep -q '"faulted":[[:space:]]*null' "$TMP/dev0.json" || fail "no \"faulted\": null before the fault"

ctl wait "$a" >/dev/null 2>&1 && fail "$a ended done despite the device fault"
wait_state "$a" failed 60
ctl status "$a" --json >"$TMP/a.st"
grep -Eq '"error":[[:space:]]*"replica 1: step [0-9]+: .*runner\.c:[0-9]+: injected device fault' \
    "$TMP/a.st" || fail "$a's error does not name the device fault: $(field "$TMP/a.st" error)"
grep -q "device fault on cpu: cpu: .*injected device fault" "$STATE/jobs/$a/log.txt" ||
    fail "$a's log does not say its device is faulted"
grep -q "a device fault (parlectl devices): parled re-executes itself" "$TMP/parled.err" ||
    fail "the daemon log does not announce the re-exec"

# b waits for the re-exec: it never starts in the process whose device broke.
ctl wait "$b" >/dev/null || fail "$b did not end done after the re-exec"
grep -q "re-executing /proc/self/exe as pid $pid" "$TMP/parled.err" || fail "no re-exec logged"
[ "$(grep -c "^parled ready on $SOCK" "$TMP/parled.out")" = 2 ] ||
    fail "parled did not come up a second time"
kill -0 "$pid" 2>/dev/null && [ "$DAEMON_PID" = "$pid" ] || fail "the daemon's pid changed"
grep -q "reloaded 2 job(s): 1 queued" "$TMP/parled.err" || fail "the new process did not reload both jobs"
[ "$(grep -c "started on cpu" "$STATE/jobs/$b/log.txt")" = 1 ] || fail "$b started more than once"
grep -q "device fault" "$STATE/jobs/$b/log.txt" && fail "$b met the fault"
check_metrics "$STATE/jobs/$b/metrics.jsonl" 2

# Healthy again, and the daemon serves as before.
ctl devices --json >"$TMP/dev1.json" || fail "devices after the re-exec"
grep -q '"faulted":[[:space:]]*null' "$TMP/dev1.json" || fail "cpu still faulted after the re-exec"
ctl devices | grep -q FAULTED && fail "parlectl devices still says FAULTED"
c=$(ctl submit "$TMP/b.json" -q) || fail "submit c"
ctl wait "$c" >/dev/null || fail "$c did not end done"
# The state dir's lock crossed the re-exec: held once, and a second parled
# on the state dir is still refused, naming this pid.
[ "$(ls -l "/proc/$pid/fd" | grep -c "$STATE/parled.lock")" = 1 ] ||
    fail "the re-executed parled does not hold the state dir's lock once"
"$PARLED" --socket "$TMP/second.sock" --state-dir "$STATE" 2>"$TMP/second.err" &&
    fail "a second parled started on the state dir after the re-exec"
grep -q "state dir $STATE is in use by another parled (pid $pid," "$TMP/second.err" ||
    fail "second parled: $(cat "$TMP/second.err")"
stop_daemon

# Socket-activated (a harness in systemd's place, as systemd.sh): the passed
# socket crosses the re-exec as fd 3, never removed nor re-bound, and
# NOTIFY_SOCKET hears READY=1, RELOADING=1, READY=1 from the one PID.
rm -rf "$STATE"
: >"$TMP/parled.out"
ACT=$TMP/act.sock
PARLE_FAULT_REPLICA=1:device:40:1 python3 "$(dirname "$0")/activate.py" "$PARLED" "$ACT" "$STATE" \
    "$TMP" >"$TMP/harness.out" 2>&1 &
HARNESS=$!
for _ in $(seq 300); do grep -q READY=1 "$TMP/notified" 2>/dev/null && break; sleep 0.1; done
grep -q READY=1 "$TMP/notified" || fail "no READY=1: $(cat "$TMP/harness.out")"
DAEMON_PID=$(cat "$TMP/parled.pid")
c() { "$PARLECTL" --socket "$ACT" "$@"; }
a=$(c submit "$TMP/a.json" -q) || fail "activated: submit a"
b=$(c submit "$TMP/b.json" -q) || fail "activated: submit b"
# A watch open across the re-exec ends with the connection, as at a shutdown:
# wait for the new process's READY=1 first.
for _ in $(seq 600); do [ "$(grep -c READY=1 "$TMP/notified")" = 2 ] && break; sleep 0.1; done
c wait "$b" >/dev/null || fail "activated: $b did not end done after the re-exec"
c status "$a" --json | grep -q '"state":[[:space:]]*"failed"' || fail "activated: $a not failed"
[ "$(cat "$TMP/notified" | tr '\n' ' ')" = "READY=1 RELOADING=1 READY=1 " ] ||
    fail "NOTIFY_SOCKET got: $(cat "$TMP/notified" | tr '\n' ' ')"
[ "$(cat "$TMP/parled.pid")" = "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" || fail "activated: pid changed"
grep -q "replaced the stale socket" "$TMP/parled.err" && fail "parled re-bound the passed socket"
c shutdown >/dev/null || fail "activated: shutdown"
wait "$HARNESS" || fail "activated: parled exited $? after shutdown"
DAEMON_PID=
[ -S "$ACT" ] || fail "parled removed the socket systemd passed it"
echo PASS
