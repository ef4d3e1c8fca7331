#!/bin/bash
# A driver that cannot be asked for its GPUs is not "no GPU": the CUDA error
# (injected: PARLE_FAULT_GPU_PROBE=35, cudaErrorInsufficientDriver, a driver
# older than the runtime) and what to do must be in parled's start-up log,
# `parlectl devices` and the refusal of a GPU job; CPU jobs still run. A GPU
# the build has no code for (PARLE_FAULT_GPU_CC) is listed unusable. Then,
# with no injection, the refusal says why this machine has no GPU.
. "$(dirname "$0")/lib.sh"
err='the NVIDIA driver cannot be used: cudaGetDeviceCount: .*cudaErrorInsufficientDriver.*: the NVIDIA '
err+='driver is older than the CUDA runtime parle was built with: install a driver'
brief='cudaErrorInsufficientDriver\): install a driver as new as the runtime, or rebuild for the '
brief+="driver's CUDA \(parlectl devices says more\)"

PARLE_FAULT_GPU_PROBE=35 start_daemon
grep -Eq "no GPU: $err" "$TMP/parled.err" ||
    fail "parled's log does not name the driver's error: $(head -n 5 "$TMP/parled.err")"
ctl devices >"$TMP/devices" || fail "parlectl devices"
grep -Eq "^gpu +none: $err" "$TMP/devices" || fail "parlectl devices printed: $(cat "$TMP/devices")"
grep -Eq "^cpu +[0-9]+ cores" "$TMP/devices" || fail "parlectl devices lost the CPU: $(cat "$TMP/devices")"
mlp_job "$TMP/a.json" 1
ctl submit "$TMP/a.json" --set devices=gpu >"$TMP/refused" 2>&1 && fail "a GPU job was accepted"
grep -Eq "the daemon has no GPU: .*$brief" "$TMP/refused" ||
    fail "the refusal does not name the driver's error: $(cat "$TMP/refused")"
ctl submit "$TMP/a.json" --set devices=gpu:2 >"$TMP/refused2" 2>&1 && fail "a gpu:2 job was accepted"
grep -Eq "asks for 2 GPUs, the daemon has 0: .*$brief" "$TMP/refused2" ||
    fail "the gpu:2 refusal does not name the driver's error: $(cat "$TMP/refused2")"
id=$(ctl submit "$TMP/a.json" -q --set devices=cpu) || fail "a CPU job was refused"
ctl wait "$id" >/dev/null || fail "the CPU job did not end done"
stop_daemon

# An injection that is not a number is refused by name, not taken for a GPU.
PARLE_FAULT_GPU_PROBE=x start_daemon
ctl devices >"$TMP/devices" || fail "parlectl devices"
grep -q 'PARLE_FAULT_GPU_PROBE="x": want a CUDA error number' "$TMP/devices" ||
    fail "a bad PARLE_FAULT_GPU_PROBE: $(cat "$TMP/devices")"
stop_daemon

# A GPU below compute capability 8.0 (injected: PARLE_FAULT_GPU_CC=75): listed
# unusable with why, never placed on, and the refusal says so.
PARLE_FAULT_GPU_CC=75 start_daemon
grep -q "GPU 0 is unusable: compute capability 7.5: this build has code for 8.0 and later only" \
    "$TMP/parled.err" || fail "parled's log does not say GPU 0 is unusable: $(head -n 5 "$TMP/parled.err")"
ctl devices >"$TMP/devices" || fail "parlectl devices"
grep -Eq "^gpu 0  .*unusable: compute capability 7.5: this build has code for 8.0 and later only" \
    "$TMP/devices" || fail "parlectl devices printed: $(cat "$TMP/devices")"
ctl submit "$TMP/a.json" --set devices=gpu >"$TMP/refused" 2>&1 && fail "a GPU job was accepted"
grep -q "the daemon has no GPU: unusable: GPU 0 compute capability 7.5 (below 8.0: this build has no code for it)" \
    "$TMP/refused" || fail "the refusal does not say why: $(cat "$TMP/refused")"
stop_daemon

# No injection: a machine with no GPU says why (no CUDA in the build, or the
# driver's own error where CUDA is built but no GPU is reachable).
start_daemon
if [ "$(ctl devices --json | grep -c '"kind":[[:space:]]*"gpu"')" -eq 0 ]; then
    ctl submit "$TMP/a.json" --set devices=gpu >"$TMP/refused" 2>&1 && fail "a GPU job was accepted"
    grep -Eq "the daemon has no GPU: (this parle was built without CUDA|.*\(cudaError[A-Za-z]+\): .*parlectl devices says more)" \
        "$TMP/refused" || fail "the refusal says no why: $(cat "$TMP/refused")"
fi
stop_daemon
echo "driver_error: the driver's error in parled's log, parlectl devices and the refusal: OK"
