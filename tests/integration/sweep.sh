#!/bin/bash
# parlectl sweep (docs/sweeps.md): a grid with seeds expanded into tagged jobs
# that run like any job; the status figures against the jobs' own (mean and
# standard deviation computed here); samples; plot of a sweep; cancel; the
# per-user bound; bad sweep files refused naming the key, nothing queued;
# --set on the base job.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sweep_lib.sh"
start_daemon --max-jobs-per-user 20

sweep_base "$TMP/base.json" 2
cat >"$TMP/grid.json" <<'SWEEP'
{"name": "lr-mom", "base": "base.json",
 "grid": {"optim.lr": [0.003, 0.01], "optim.momentum": [0, 0.9]}, "seeds": 3}
SWEEP
out=$(ctl sweep "$TMP/grid.json") || fail "sweep: $out"
echo "$out" | grep -q "^sweep s0001 (lr-mom): 4 points x 3 seeds, 12 jobs queued$" || fail "reply: $out"
wait_sweep s0001 done 120
ctl sweep status s0001 --json >"$TMP/sweep.json" || fail "sweep status --json"
ctl list --json >"$TMP/jobs.json" || fail "list --json"

# Expansion and figures, independently: every job of the sweep by its tag,
# its job.json as queued, the mean and sample standard deviation of each
# point's final test errors, its wall time, the best point.
python3 - "$TMP/sweep.json" "$TMP/jobs.json" "$STATE" <<'PY' || fail "the sweep's expansion or figures"
import json, statistics, sys
sweep = json.load(open(sys.argv[1]))
jobs = [j for j in json.load(open(sys.argv[2])) if j["sweep"] == "s0001"]
assert len(jobs) == 12 and sweep["jobs"] == 12 and sweep["npoints"] == 4, (len(jobs), sweep)
assert sweep["keys"] == ["optim.lr", "optim.momentum"] and sweep["state"] == "done"
grid = [(0.003, 0), (0.003, 0.9), (0.01, 0), (0.01, 0.9)]
best = None
for row in sweep["points"]:
    p = row["point"]
    mine = sorted((j for j in jobs if j["point"] == p), key=lambda j: j["seed_index"])
    assert [j["seed_index"] for j in mine] == [0, 1, 2], (p, mine)
    assert row["jobs"] == [j["id"] for j in mine], (row["jobs"], mine)
    assert row["values"] == {"optim.lr": grid[p][0], "optim.momentum": grid[p][1]}, row
    for k, j in enumerate(mine):
        cfg = json.load(open(f"{sys.argv[3]}/jobs/{j['id']}/job.json"))
        assert (cfg["optim"]["lr"], cfg["optim"]["momentum"]) == grid[p], cfg
        assert cfg["seed"] == 3 + k and cfg["name"] == f"lr-mom p{p} s{k}", cfg
        assert j["state"] == "done", j
    errs = [j["test_error"] for j in mine]
    assert abs(row["test_error_mean"] - statistics.mean(errs)) < 1e-12, (row, errs)
    assert abs(row["test_error_std"] - statistics.stdev(errs)) < 1e-12, (row, errs)
    assert abs(row["wall_s"] - sum(j["elapsed_s"] for j in mine)) < 1e-6, row
    assert row["state"] == "done" and row["done"] == 3, row
    if best is None or statistics.mean(errs) < best[1]:
        best = (p, statistics.mean(errs))
assert sweep["best"] == best[0] and [r["point"] for r in sweep["points"] if r["best"]] == [best[0]]
assert len({j["test_error"] for j in jobs}) > 1, "every job has the same error: figures untested"
PY
best=$(field "$TMP/sweep.json" best)
ctl sweep status s0001 | grep -Eq "^\* $best +" || fail "the best point is not marked: $(ctl sweep status s0001)"
ctl sweep status s0001 | grep -q " ± " || fail "no mean ± std: $(ctl sweep status s0001)"
# Columns by what a terminal shows: each row's WALL and JOBS start under
# their headers, "±" (two bytes) or not.
ctl sweep status s0001 >"$TMP/table.txt"
python3 - "$TMP/table.txt" <<'PY' || fail "sweep status columns drift: $(cat "$TMP/table.txt")"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
head = next(i for i, l in enumerate(lines) if "POINT" in l and "JOBS" in l)
rows = [l for l in lines[head + 1:] if re.match(r"^[* ] \d", l)]
assert len(rows) == 4 and all("±" in r for r in rows), rows
for col in ("WALL", "JOBS"):
    at = lines[head].index(col)
    for r in rows:
        assert r[at - 2:at] == "  " and r[at] != " ", (col, lines[head], r)
PY
ctl sweep ls | grep -Eq "^s0001 +lr-mom +root +done +4 +12 +12 +point $best" ||
    fail "sweep ls: $(ctl sweep ls)"
ctl status j0001 --json | grep -q '"sweep":[[:space:]]*"s0001"' || fail "a job's status lacks its sweep"
# A sweep that has ended has nothing to cancel: refused, its state kept.
out=$(ctl sweep cancel s0001 2>&1) && fail "cancelling a done sweep succeeded: $out"
echo "$out" | grep -q "sweep s0001 has ended .*nothing to cancel" || fail "cancel of a done sweep: $out"
[ "$(sweep_field s0001 state)" = done ] && [ "$(sweep_field s0001 cancelled)" = false ] ||
    fail "a refused cancel changed the sweep: $(ctl sweep status s0001)"

# plot of a sweep: one curve per point, its seeds as a band in each panel.
ctl plot s0001 -o "$TMP/s.svg" --json >"$TMP/plot.json" || fail "plot s0001"
[ "$(field "$TMP/plot.json" jobs)" = 4 ] || fail "plot: not 4 curves: $(cat "$TMP/plot.json")"
[ "$(grep -c "<polygon" "$TMP/s.svg")" = 12 ] || fail "plot: not 3 bands for each of 4 points"
# The master's curves, dashed, as a single job's plot has them: each point's
# test loss (in the loss panel) and test error.
[ "$(grep -c '<polyline.*stroke-dasharray' "$TMP/s.svg")" = 8 ] ||
    fail "plot: not 2 dashed master curves for each of 4 points"
grep -q "s0001 point 3 {&quot;optim.lr&quot;:0.01,&quot;optim.momentum&quot;:0.9} (3 seeds)" \
    "$TMP/s.svg" || fail "plot: no legend for point 3"

# samples: 2 of the 4 points, drawn alike for the same sample_seed.
cat >"$TMP/samples.json" <<'SWEEP'
{"base": "base.json", "grid": {"optim.lr": [0.003, 0.01], "optim.momentum": [0, 0.9]},
 "samples": 2, "sample_seed": 11}
SWEEP
a=$(ctl sweep --json "$TMP/samples.json" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["npoints"] == 2 and s["jobs"] == 2; print(s["id"])') &&
    b=$(ctl sweep -q "$TMP/samples.json") || fail "samples"
wait_sweep "$b" done 60
pa=$(ctl sweep status "$a" --json | python3 -c 'import json,sys; print([r["point"] for r in json.load(sys.stdin)["points"]])')
pb=$(ctl sweep status "$b" --json | python3 -c 'import json,sys; print([r["point"] for r in json.load(sys.stdin)["points"]])')
[ "$pa" = "$pb" ] && python3 -c "p=$pa; assert len(p) == 2 and p[0] < p[1] <= 3" ||
    fail "samples drew $pa and $pb"

# cancel: the running job stops, the queued ones are cancelled at once.
sweep_base "$TMP/long.json" 500
cat >"$TMP/long_sweep.json" <<'SWEEP'
{"base": "long.json", "grid": {"optim.lr": [0.01, 0.02]}, "seeds": 2}
SWEEP
c=$(ctl sweep -q "$TMP/long_sweep.json") || fail "the long sweep"
first=$(ctl sweep status "$c" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["points"][0]["jobs"][0])')
wait_state "$first" running 30
wait_steps "$first" 60
# The bound counts a sweep as its jobs: 4 active, 17 more would pass 20.
cat >"$TMP/big.json" <<'SWEEP'
{"base": "base.json", "grid": {"optim.lr": [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.011, 0.012, 0.013, 0.014, 0.015, 0.016, 0.017]}}
SWEEP
out=$(ctl sweep "$TMP/big.json" 2>&1) && fail "a sweep past --max-jobs-per-user was queued"
echo "$out" | grep -q "has 4 jobs queued or running: a sweep of 17 jobs would pass parled's --max-jobs-per-user 20" ||
    fail "the bound's refusal: $out"
out=$(ctl sweep cancel "$c") || fail "sweep cancel: $out"
echo "$out" | grep -q "sweep $c cancelled: 4 job(s) stop" || fail "cancel reply: $out"
wait_sweep "$c" cancelled 30
ctl wait "$first" 2>/dev/null; [ $? = 3 ] || fail "the running job of the cancelled sweep did not end cancelled"
[ "$(ctl sweep status "$c" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["cancelled"])')" = 4 ] ||
    fail "not every job of the sweep is cancelled"
out=$(ctl sweep cancel "$c" 2>&1) && fail "cancelling a sweep twice succeeded"
echo "$out" | grep -q "has already been cancelled" || fail "second cancel: $out"

# Bad sweep files: one clear error naming the key; nothing is queued.
njobs=$(ctl list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
bad() { # bad JSON EXPECTED
    printf '%s\n' "$1" >"$TMP/bad.json"
    out=$(ctl sweep "$TMP/bad.json" 2>&1) && fail "a bad sweep was queued: $1"
    echo "$out" | grep -qF -- "$2" || fail "bad sweep $1: the message lacks '$2': $out"
}
bad '{"base": "base.json", "grid": {"optim.lr": 0.1}}' 'grid."optim.lr": must be a non-empty list'
bad '{"base": "base.json", "grid": {"optim.lr": []}}' 'grid."optim.lr": must be a non-empty list'
bad '{"base": "base.json", "grid": {"optim.lrr": [0.1]}}' 'grid."optim.lrr": unknown key'
bad '{"base": "base.json", "grid": {"optim.lr": [0.1, -1]}}' 'point 1 (optim.lr=-1): optim.lr: must be > 0'
bad '{"base": "base.json", "grid": {}, "seedz": 3}' 'seedz: unknown field'
bad '{"base": "nope.json", "grid": {}}' \
    "cannot read $TMP/nope.json: No such file or directory (the sweep's \"base\" names it)"
bad '{"base": "base.json", "grid": {"devices": ["cpu", "7"]}}' 'point 1 (devices="7"), seed 1 of 1: devices:'
bad '{"base": "base.json", "grid": {"optim.lr": [1,2,3,4,5,6,7,8,9,10,11]}, "seeds": 91}' \
    'grid: 11 points x 91 seeds is 1001 jobs, more than the 1000 a sweep may queue'
bad '{"base": "base.json", "grid": {}, "early_stop": {"after_epochs": 2, "margin": 0.1}}' \
    'early_stop.after_epochs: 2 is not before the last epoch of point 0 (epochs 2)'
[ "$(ctl list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = "$njobs" ] ||
    fail "a refused sweep left jobs behind"
[ "$(ctl sweep ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 4 ] ||
    fail "a refused sweep left a sweep behind"
ctl sweep status s0099 2>&1 | grep -q "no sweep s0099" || fail "status of no sweep"
ctl sweep status j0001 2>/dev/null; [ $? = 2 ] || fail "a job id taken as a sweep id"

# --set: a key of the base job for every point; a key the grid varies, or
# one inside or around it, is refused before anything is sent.
d=$(ctl sweep -q "$TMP/samples.json" --set optim.batch=16 --set=optim.nesterov=false) ||
    fail "sweep --set"
wait_sweep "$d" done 60
ctl sweep status "$d" --json >"$TMP/set.json" || fail "sweep status $d"
python3 - "$TMP/set.json" "$STATE" <<'PY' || fail "--set did not reach every job of the sweep"
import json, sys
rows = json.load(open(sys.argv[1]))["points"]
jobs = [j for r in rows for j in r["jobs"]]
assert len(jobs) == 2, rows
for r in rows:
    for j in r["jobs"]:
        cfg = json.load(open(f"{sys.argv[2]}/jobs/{j}/job.json"))
        assert cfg["optim"]["batch"] == 16 and cfg["optim"]["nesterov"] is False, cfg
        assert cfg["optim"]["lr"] == r["values"]["optim.lr"], (cfg, r)
PY
for set in optim.lr=0.1 optim={} optim.lr.x=1; do
    out=$(ctl sweep "$TMP/samples.json" --set "$set" 2>&1) && fail "--set $set on a grid key was queued"
    echo "$out" | grep -q "^parlectl: --set ${set%%=*}: the sweep's grid varies optim.lr$" ||
        fail "--set $set: $out"
done
# --set name names the sweep and its jobs, over the sweep file's name.
cat >"$TMP/named.json" <<'SWEEP'
{"name": "in-file", "base": "base.json", "grid": {"optim.lr": [0.01]}, "seeds": 1}
SWEEP
out=$(ctl sweep "$TMP/named.json" --set name=renamed) || fail "sweep --set name: $out"
e=${out#sweep }; e=${e%% *}
# One of each, said in the singular.
[ "$out" = "sweep $e (renamed): 1 point x 1 seed, 1 job queued" ] || fail "reply: $out"
[ "$(sweep_field "$e" name)" = renamed ] || fail "--set name: the sweep is named $(sweep_field "$e" name)"
wait_sweep "$e" done 60
ctl sweep status "$e" | head -n 1 | grep -q ": done; 1 point x 1 seed, 1 job: 1 done; " ||
    fail "summary: $(ctl sweep status "$e" | head -n 1)"
ej=$(ctl sweep status "$e" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["points"][0]["jobs"][0])')
ctl status "$ej" --json >"$TMP/ej.json"
[ "$(field "$TMP/ej.json" name)" = "renamed p0 s0" ] || fail "--set name: its job is $(field "$TMP/ej.json" name)"
out=$(ctl sweep ls --set optim.lr=1 2>&1); [ $? = 2 ] || fail "sweep ls took --set: $out"
check_alive "sweeps"
stop_daemon

# parled gone before it answers a sweep (a kill -9 while it queued it): the
# client says the sweep may be recorded and how to find it.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
c, _ = s.accept()
c.recv(1 << 20)
c.close()
' "$TMP/gone.sock" &
for _ in $(seq 50); do [ -S "$TMP/gone.sock" ] && break; sleep 0.1; done
out=$("$PARLECTL" --socket "$TMP/gone.sock" sweep "$TMP/grid.json" 2>&1) &&
    fail "a sweep with no answer succeeded"
echo "$out" | grep -q "the sweep may have been recorded .*'parlectl sweep ls' lists the sweeps" ||
    fail "no hint after the connection closed: $out"
echo PASS
