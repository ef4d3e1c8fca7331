#!/bin/bash
# CPU shares (devices "cpu:K", docs/config.md): two cpu:1 jobs run at once on
# disjoint cores; a whole-CPU job waits for them, saying so; a share larger
# than parled's cores is refused at submit; the jobs end done.
. "$(dirname "$0")/lib.sh"
ncores=$(nproc)
[ "$ncores" -ge 2 ] || { echo "SKIP: needs 2 cores"; exit 77; }
if [ "$ncores" -gt 2 ] && command -v taskset >/dev/null; then
    PARLED_WRAP="taskset -c 0,1"
fi
start_daemon
mlp_job "$TMP/long.json" 1000
mlp_job "$TMP/short.json" 2
a=$(ctl submit -q --set devices=cpu:1 "$TMP/long.json") || fail "submit a (cpu:1)"
b=$(ctl submit -q --set devices=cpu:1 "$TMP/long.json") || fail "submit b (cpu:1)"
wait_state "$a" running 30
wait_state "$b" running 30
cores_of() { ctl status "$1" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["cores"])'; }
ca=$(cores_of "$a") cb=$(cores_of "$b")
[ "$ca" != "$cb" ] && [ "${ca#[}" != "$ca" ] && [ "${cb#[}" != "$cb" ] ||
    fail "the two cpu:1 jobs do not hold one core each, apart: $ca and $cb"
ctl status "$a" --json >"$TMP/a.st"
[ "$(field "$TMP/a.st" devices)" = cpu:1 ] || fail "status does not show the share"
grep -q "started on cpu (1 cores)" "$STATE/jobs/$a/log.txt" || fail "a's log does not say 1 core"
ctl devices --json | python3 -c '
import json, sys
cpu = [d for d in json.load(sys.stdin) if d["kind"] == "cpu"][0]
assert sorted(cpu["jobs"]) == sorted(sys.argv[1:]), cpu' "$a" "$b" || fail "devices does not list both jobs on the cpu"
ctl devices | grep -q "^cpu .*running $a $b" || fail "parlectl devices does not show both jobs"
whole=$(ctl submit -q "$TMP/short.json") || fail "submit a whole-CPU job"
ctl status "$whole" --json >"$TMP/w.st"
case "$(field "$TMP/w.st" waiting)" in
"devices: cpu held by $a (root), $b (root)") ;;
*) fail "the whole-CPU job does not say it waits for both: $(field "$TMP/w.st" waiting)" ;;
esac
out=$(ctl submit -q --set devices=cpu:999 "$TMP/short.json" 2>&1) && fail "cpu:999 was queued"
echo "$out" | grep -q "asks for 999 cores, parled has" || fail "no clear refusal: $out"
ctl cancel "$a" >/dev/null && ctl cancel "$b" >/dev/null || fail "cancel the shares"
ctl wait "$whole" || fail "the whole-CPU job did not end done"
ctl status "$whole" --json >"$TMP/w.st"
[ "$(field "$TMP/w.st" cores)" = null ] || fail "an ended job still holds cores"
grep -q "started on cpu ($ncores cores)\|started on cpu (2 cores)" "$STATE/jobs/$whole/log.txt" ||
    fail "the whole-CPU job did not take every core"
stop_daemon
echo PASS
