#!/bin/bash
# kill -9 of parled mid-sweep: the restarted daemon has the sweep and every
# one of its jobs (done, interrupted, queued) and finishes them; a job the
# sweep lacks (here: one whose status.json was lost, as when parled dies
# while it queues the sweep) is queued again from the sweep's own record.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sweep_lib.sh"
# The sweep's third job (this parled's third) parks once it has reported its
# step 4, so the kill lands while it runs however loaded the machine is.
PARLE_FAULT_REPLICA=0:park:3:4 start_daemon
sweep_base "$TMP/base.json" 2 2048
cat >"$TMP/sweep.json" <<'SWEEP'
{"name": "restart", "base": "base.json", "grid": {"optim.lr": [0.01, 0.02, 0.03]}, "seeds": 2}
SWEEP
id=$(ctl sweep -q "$TMP/sweep.json") || fail "sweep"
wait_log j0003 "parked after step" 120
kill_daemon
grep -q '"state":[[:space:]]*"running"' "$STATE/jobs/j0003/status.json" || fail "j0003 was not running"
[ -f "$STATE/sweeps/$id/sweep.json" ] && [ -f "$STATE/sweeps/$id/state.json" ] ||
    fail "the sweep's files: $(ls -R "$STATE/sweeps")"
# j0006, queued, lost its status: the reload skips it, the sweep queues its point again.
: >"$STATE/jobs/j0006/status.json"

start_daemon
grep -q "reloaded 1 sweep(s)" "$TMP/parled.err" || fail "the daemon log does not report the sweep"
grep -q "sweep $id: queued its missing job j0007 (point 2, seed 2 of 2)" "$TMP/parled.err" ||
    fail "the missing job was not queued again: $(grep sweep "$TMP/parled.err")"
wait_sweep "$id" done 180
ctl sweep status "$id" --json >"$TMP/sweep_final.json"
python3 - "$TMP/sweep_final.json" <<'PY' || fail "the sweep after the restart: $(cat "$TMP/sweep_final.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["state"] == "done" and s["jobs"] == 6 and s["counts"]["done"] == 6, s
want = [["j0001", "j0002"], ["j0003", "j0004"], ["j0005", "j0007"]]
assert [r["jobs"] for r in s["points"]] == want, [r["jobs"] for r in s["points"]]
assert all(r["done"] == 2 and r["test_error_mean"] is not None for r in s["points"])
PY
grep -q "parled restarted while the job ran" "$STATE/jobs/j0003/log.txt" || fail "j0003 did not resume"
ctl status j0007 --json | grep -q '"seed_index":[[:space:]]*1' || fail "j0007 is not seed 2"
grep -q '"seed":[[:space:]]*4' "$STATE/jobs/j0007/job.json" || fail "j0007's seed is not 3 + 1"
stop_daemon
echo PASS
