#!/bin/bash
# tensorboard: `parlectl tensorboard` writes event files that TensorBoard's
# own reader (EventAccumulator, from the tensorboard package in the venv
# scripts/install-deps.sh sets up) reads back equal to the jobs'
# metrics.jsonl: tags, steps, times, values (as float32), the per-replica
# quantities of a rule; --follow appends while a job runs and has the final
# values once it has ended; a sweep's jobs are runs SWEEP/pPOINT/ID.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sweep_lib.sh"
PY=${PARLE_TB_PYTHON:-$PARLE_SOURCE_ROOT/build-venv/bin/python}
if ! "$PY" -c 'import tensorboard' 2>/dev/null; then
    echo "SKIP: no TensorBoard to read the event files back ($PY; scripts/install-deps.sh sets up build-venv)"
    exit 77
fi
CHECK="$(dirname "$0")/tensorboard_check.py"
start_daemon

# A rule that reports per-replica quantities (GoSGD's a_i and pushes), and
# Parle's gamma and rho.
mlp_job "$TMP/job.json" 2
sed 's/"name": "sgd"/"name": "gosgd", "replicas": 2, "p": 0.2/' "$TMP/job.json" >"$TMP/gosgd.json"
sed 's/"name": "sgd"/"name": "parle", "replicas": 2/' "$TMP/job.json" >"$TMP/parle.json"
a=$(ctl submit "$TMP/gosgd.json" -q) || fail "submit gosgd"
b=$(ctl submit "$TMP/parle.json" -q) || fail "submit parle"
ctl wait "$a" && ctl wait "$b" || fail "the jobs did not end done"

ctl tensorboard "$a" "$b" -o "$TMP/tb" --json >"$TMP/tb.json" || fail "tensorboard $a $b"
python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["dir"] == sys.argv[2] and [r["run"] for r in o["runs"]] == sys.argv[3:], o
assert all(r["events"] > 0 and r["scalars"] > r["events"] for r in o["runs"]), o
' "$TMP/tb.json" "$TMP/tb" "$a" "$b" || fail "tensorboard --json: $(cat "$TMP/tb.json")"
"$PY" "$CHECK" "$TMP/tb" "$a=$STATE/jobs/$a/metrics.jsonl" "$b=$STATE/jobs/$b/metrics.jsonl" \
    >"$TMP/check.out" || fail "TensorBoard read back other values than metrics.jsonl's"
cat "$TMP/check.out"
grep -q "^$a: 18 tags" "$TMP/check.out" || fail "$a: not the 13 tags and GoSGD's 5 per-replica and sum ones"

# A run folder is written once; -o is required; an unknown job is an error.
out=$(ctl tensorboard "$a" -o "$TMP/tb" 2>&1) && fail "a second writer into $TMP/tb/$a succeeded"
echo "$out" | grep -q "^parlectl: $TMP/tb/$a already holds an event file (events.out.tfevents.*.parle)" ||
    fail "second writer: $out"
ctl tensorboard "$a" >/dev/null 2>&1
[ $? -eq 2 ] || fail "tensorboard without -o: not a usage error"
# A failed command leaves no empty event file behind to block the next try:
# an unknown job is found before anything is created, a run folder in the
# way after the runs before it were.
out=$(ctl tensorboard "$a" j9999 -o "$TMP/none" 2>&1) && fail "tensorboard of an unknown job succeeded"
echo "$out" | grep -q "not_found" || fail "unknown job: $out"
[ ! -e "$TMP/none" ] || fail "tensorboard of an unknown job created $(find "$TMP/none")"
mkdir -p "$TMP/tb2/$b" && : >"$TMP/tb2/$b/events.out.tfevents.1.other"
ctl tensorboard "$a" "$b" -o "$TMP/tb2" 2>/dev/null && fail "a second writer into $TMP/tb2/$b succeeded"
[ -z "$(ls "$TMP/tb2/$a")" ] || fail "a failed tensorboard left $(ls "$TMP/tb2/$a") in $TMP/tb2/$a"

# --follow: the event file grows while the job runs; at the end it holds
# every value.
sed 's/"train_limit": 1024/"train_limit": 4096/; s/"epochs": 2/"epochs": 4/' "$TMP/parle.json" >"$TMP/long.json"
c=$(ctl submit "$TMP/long.json" -q) || fail "submit the long job"
ctl tensorboard "$c" -o "$TMP/tbf" --follow >"$TMP/follow.out" 2>&1 &
follow=$!
size() { stat -c %s "$TMP"/tbf/"$c"/events.out.tfevents.* 2>/dev/null || echo 0; }
grew=
first=0
for _ in $(seq 600); do
    s=$(size)
    # Past the 40 bytes of the file_version record: the first metrics.
    if [ "$first" -eq 0 ] && [ "$s" -gt 40 ]; then
        first=$s
    elif [ "$first" -gt 0 ] && [ "$s" -gt "$first" ]; then
        # It grew; and the job was still running after that.
        ctl status "$c" --json >"$TMP/st.json"
        [ "$(field "$TMP/st.json" state)" = running ] && grew=1
        break
    fi
    sleep 0.1
done
[ -n "$grew" ] || fail "the event file did not grow while $c ran (sizes $first, $(size))"
ctl wait "$c" || fail "$c did not end done"
for _ in $(seq 100); do
    kill -0 "$follow" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$follow" 2>/dev/null && fail "tensorboard --follow still runs 10 s after $c ended"
wait "$follow" || fail "tensorboard --follow: $(cat "$TMP/follow.out")"
"$PY" "$CHECK" "$TMP/tbf" "$c=$STATE/jobs/$c/metrics.jsonl" ||
    fail "--follow's event file differs from metrics.jsonl"

# A sweep's id: its jobs, one run each, grouped by point (SWEEP/pPOINT/ID).
sweep_base "$TMP/base.json" 1
printf '{"base": "base.json", "grid": {"optim.lr": [0.05, 0.1]}, "seeds": 2}' >"$TMP/sw.json"
sid=$(ctl sweep "$TMP/sw.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') ||
    fail "sweep submit"
wait_sweep "$sid" done 120
ctl sweep status "$sid" --json >"$TMP/sw_st.json"
want=$(python3 -c '
import json, sys
sw = json.load(open(sys.argv[1]))
print(" ".join("%s/p%d/%s" % (sw["id"], p["point"], j) for p in sw["points"] for j in p["jobs"]))
' "$TMP/sw_st.json")
[ "$(echo "$want" | wc -w)" -eq 4 ] || fail "sweep $sid: not 4 jobs: $want"
ctl tensorboard "$sid" -o "$TMP/tbs" --json >"$TMP/tbs.json" || fail "tensorboard $sid"
python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert [r["run"] for r in o["runs"]] == sys.argv[2:], o
' "$TMP/tbs.json" $want || fail "sweep runs: $(cat "$TMP/tbs.json"), want $want"
specs=""
for run in $want; do specs="$specs $run=$STATE/jobs/${run##*/}/metrics.jsonl"; done
# shellcheck disable=SC2086
"$PY" "$CHECK" "$TMP/tbs" $specs || fail "the sweep's event files differ from metrics.jsonl"

# A sweep's job named by its id goes to DIR/ID, also when its sweep is named
# too (once: the first naming wins); a job with no metrics gets no run.
member=${want%% *}
member=${member##*/}
ctl tensorboard "$member" "$sid" -o "$TMP/tbm" --json >"$TMP/tbm.json" || fail "tensorboard $member $sid"
python3 -c '
import json, sys
runs = [r["run"] for r in json.load(open(sys.argv[1]))["runs"]]
member, want = sys.argv[2], sys.argv[3:]
assert runs == [member] + [w for w in want if not w.endswith("/" + member)], runs
' "$TMP/tbm.json" "$member" $want || fail "a job named alone and by its sweep: $(cat "$TMP/tbm.json")"
[ -d "$TMP/tbm/$member" ] || fail "the sweep's job named alone is not in DIR/$member"
mlp_job "$TMP/never.json" 1000
run=$(ctl submit -q "$TMP/never.json") || fail "submit"
never=$(ctl submit -q "$TMP/never.json") || fail "submit"
ctl cancel "$never" >/dev/null && ctl cancel "$run" >/dev/null || fail "cancel"
ctl tensorboard "$never" -o "$TMP/tbn" | grep -q "^$never: no metrics, no run written$" ||
    fail "a job with no metrics: $(ctl tensorboard "$never" -o "$TMP/tbn2" 2>&1)"
[ ! -e "$TMP/tbn/$never" ] || fail "an empty run was written for $never"
stop_daemon
echo PASS
