#!/bin/bash
# A sweep's early stop (docs/sweeps.md): CPU jobs run one after another, so
# points 0 and 1 finish first; point 2 (a learning rate far too small) is,
# after its first epoch, worse than the median of their errors then by more
# than the margin, and is cancelled saying why. The median is checked against
# the finished jobs' own metrics; a point within the margin runs on.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sweep_lib.sh"
start_daemon
# 30 epochs: the cancel lands long before a stopped job could finish.
sweep_base "$TMP/base.json" 30
cat >"$TMP/sweep.json" <<'SWEEP'
{"name": "early", "base": "base.json", "grid": {"optim.lr": [0.01, 0.02, 0.00001, 0.012]},
 "early_stop": {"after_epochs": 1, "margin": 0.05}}
SWEEP
id=$(ctl sweep -q "$TMP/sweep.json") || fail "sweep"
wait_sweep "$id" done 120
ctl sweep status "$id" --json >"$TMP/s.json"
python3 - "$TMP/s.json" "$STATE" <<'PY' || fail "the early stop: $(cat "$TMP/s.json")"
import json, statistics, sys
s = json.load(open(sys.argv[1]))
rows = {r["point"]: r for r in s["points"]}
assert [rows[p]["state"] for p in range(4)] == ["done", "done", "early_stopped", "done"], rows
assert s["counts"]["early_stopped"] == 1 and s["counts"]["cancelled"] == 1, s["counts"]
assert s["early_stop"] == {"after_epochs": 1, "margin": 0.05}, s["early_stop"]
def first_eval(job):
    for line in open(f"{sys.argv[2]}/jobs/{job}/metrics.jsonl"):
        m = json.loads(line)
        if m["event"] == "eval" and m["epoch"] >= 1:
            return m["test_error"]
done = [first_eval(rows[p]["jobs"][0]) for p in (0, 1)]
stopped = rows[2]["jobs"][0]
mine = first_eval(stopped)
median = statistics.median(done)
assert mine > median + 0.05, (mine, median)
st = json.load(open(f"{sys.argv[2]}/jobs/{stopped}/status.json"))
want = (f"early stop: test error {100 * mine:.2f}% after 1 epochs is worse than "
        f"{100 * median:.2f}%, the median of the sweep's 2 finished jobs then, by more than "
        f"the margin 5.00%")
assert st["state"] == "cancelled" and st["error"] == want, (st["error"], want)
assert st["epoch"] < 30, st["epoch"]
# Point 3, within the margin of the same median, ran on.
assert rows[3]["state"] == "done" and first_eval(rows[3]["jobs"][0]) <= median + 0.05
assert s["state"] == "done", s["state"]
PY
stopped=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["points"][2]["jobs"][0])' "$TMP/s.json")
grep -q "early stop: test error" "$STATE/jobs/$stopped/log.txt" || fail "the log does not say why"
ctl sweep status "$id" | grep -Eq "^  2 +1e-05 +early_stopped" || fail "table: $(ctl sweep status "$id")"
# The summary counts each job once: the stopped job as early_stopped alone.
ctl sweep status "$id" | head -n 1 | grep -q " 4 jobs: 3 done, 1 early_stopped; " ||
    fail "summary: $(ctl sweep status "$id" | head -n 1)"
# Jobs so short that a stopped one may end before its cancel lands: either
# way the record agrees with the job (early_stopped with a cancelled job, or
# a done job with no error and no early stop).
sweep_base "$TMP/short.json" 2
sed 's/base.json/short.json/; s/"early"/"short"/' "$TMP/sweep.json" >"$TMP/short_sweep.json"
sid=$(ctl sweep -q "$TMP/short_sweep.json") || fail "short sweep"
wait_sweep "$sid" done 120
ctl sweep status "$sid" --json >"$TMP/short_s.json"
python3 - "$TMP/short_s.json" "$STATE" <<'PY' || fail "the short sweep's record and its jobs disagree: $(cat "$TMP/short_s.json")"
import json, sys
s = json.load(open(sys.argv[1]))
stopped = 0
for p in s["points"]:
    st = json.load(open(f"{sys.argv[2]}/jobs/{p['jobs'][0]}/status.json"))
    if p["state"] == "early_stopped":
        assert st["state"] == "cancelled" and st["error"].startswith("early stop:"), (p, st)
        stopped += 1
    else:
        assert st["state"] == "done" and not st.get("error"), (p, st)
assert s["counts"]["early_stopped"] == stopped == s["counts"]["cancelled"], s["counts"]
PY
# The early stop's record survives a restart.
stop_daemon
start_daemon
[ "$(ctl sweep status "$id" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["early_stopped"])')" = 1 ] ||
    fail "the early stop was forgotten across a restart"
stop_daemon
echo PASS
