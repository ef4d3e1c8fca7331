#!/bin/bash
# Time limits, dependencies and quotas through parled (docs/architecture.md,
# "Scheduling"), as real users made here, on the CPU with cpu:1 standing in
# for a GPU:
# 1. a job at its time_limit checkpoints and ends "timeout" ('wait' exits
#    1, the error says so); 'resume' runs it on from that checkpoint, ranked
#    as any queued job: behind a lighter user's, not ahead as a job resuming
#    a preemption;
# 2. dependencies: a job --after another waits naming it and starts once it
#    ended done; one after a cancelled job ends cancelled naming it and why;
#    --after-any starts after it however it ended; one after a sweep waits
#    for its jobs; a sweep's jobs after a job (the base job's `after`) wait
#    naming it and run once it ended done, or end cancelled naming it; an
#    unknown id is refused;
# 3. --max-cores-per-user 1: a user's second job waits "quota" while
#    another user's starts; a job that alone is past the quota is refused;
# 4. --oldest-first-after 3 counts only time a job was eligible to run: a
#    job resumed after a timeout ranks behind a lighter user's job queued
#    longer, and a job held past the bound and released then does not pass
#    a lighter user's job submitted meanwhile;
# 5. --min-gpu-share: a job asking less is refused, naming both.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
make_users sl
if [ "$(nproc)" -lt 2 ]; then
    echo "SKIP: two CPU cores are needed (two cpu:1 jobs side by side)"
    exit 77
fi
if [ "$(nproc)" -gt 2 ] && command -v taskset >/dev/null; then
    PARLED_WRAP="taskset -c 0,1" # parled's cores: two, as on the CI machine
fi
start_daemon --group "$grp" --admin-group "$adm"
job() { # job FILE EPOCHS [extra fields]
    mlp_job "$1" "$2"
    sed -i "s/\"devices\": \"cpu\"/\"devices\": \"cpu:1\"${3:+, $3}/" "$1"
    chmod 644 "$1"
}
job "$TMP/short.json" 1
job "$TMP/long.json" 1000
job "$TMP/limited.json" 1000 '"time_limit": "00:00:02"'

# ---- 1. time limit ----
t=$(ctl_as "$alice" submit -q "$TMP/limited.json") || fail "submit the limited job"
ctl_as "$alice" wait "$t" && fail "wait on a timed-out job exited 0"
ctl status "$t" --json >"$TMP/t.st"
[ "$(field "$TMP/t.st" state)" = timeout ] || fail "$t did not end timeout: $(cat "$TMP/t.st")"
case "$(field "$TMP/t.st" error)" in
"time limit of 2 s reached at epoch "*"parlectl resume $t") ;;
*) fail "$t's error does not say why: $(field "$TMP/t.st" error)" ;;
esac
ctl list --state timeout | grep -q "^$t " || fail "list --state timeout does not show $t"
blocker=$(ctl submit -q --set devices=cpu "$TMP/long.json") || fail "submit the blocker"
wait_state "$blocker" running 20
b=$(ctl_as "$bob" submit -q "$TMP/short.json") || fail "submit bob's job"
ctl_as "$alice" resume "$t" >/dev/null || fail "alice cannot resume her timed-out job"
ctl status "$t" --json >"$TMP/t.st"
case "$(field "$TMP/t.st" waiting)" in
"queue: cpu kept for $b ($bob), ahead by its owner used less device time recently") ;;
*) fail "the resumed $t does not rank behind bob's job: $(field "$TMP/t.st" waiting)" ;;
esac
ctl cancel "$blocker" >/dev/null || fail "cancel the blocker"
wait_log "$t" "resuming from checkpoint at outer iteration" 20
step=$(resume_step "$t")
[ -n "$step" ] && [ "$step" -gt 0 ] || fail "$t did not resume from its checkpoint"
ctl cancel "$t" >/dev/null || fail "cancel $t"
wait_state "$t" cancelled 20

# ---- 2. dependencies ----
sweep_jobs() { # SWEEP: its jobs' ids, one a line
    ctl list --json | python3 -c 'import json,sys
print("\n".join(j["id"] for j in json.load(sys.stdin) if j["sweep"] == sys.argv[1]))' "$1"
}
started_after_end() { # DEP JOB: JOB started at or after DEP ended
    ctl list --json | python3 -c 'import json,sys
j = {j["id"]: j for j in json.load(sys.stdin)}
sys.exit(not j[sys.argv[1]]["ended_at"] <= j[sys.argv[2]]["started_at"])' "$1" "$2"
}
out=$(ctl_as "$bob" submit -q --after j0999 "$TMP/short.json" 2>&1) &&
    fail "a job after an unknown id was queued: $out"
echo "$out" | grep -q "after: job j0999 is not in parled's queue" || fail "no clear refusal: $out"
a=$(ctl_as "$bob" submit -q "$TMP/short.json") || fail "submit a"
b=$(ctl_as "$bob" submit -q --after "$a" "$TMP/short.json") || fail "submit b after a"
x=$(ctl_as "$carol" submit -q --priority -1 "$TMP/long.json") || fail "submit x"
c=$(ctl_as "$carol" submit -q --after "$x" "$TMP/short.json") || fail "submit c after x"
d=$(ctl_as "$carol" submit -q --after-any "$x" "$TMP/short.json") || fail "submit d after any x"
ctl status "$c" --json >"$TMP/c.st"
case "$(field "$TMP/c.st" waiting)" in
"after: $x ($carol) is "*) ;;
*) fail "$c does not name its dependency: $(field "$TMP/c.st" waiting)" ;;
esac
ctl_as "$bob" wait "$b" || fail "b (after a) did not end done"
started_after_end "$a" "$b" || fail "b started before a ended"
ctl_as "$carol" cancel "$x" >/dev/null || fail "cancel x"
ctl_as "$carol" wait "$c" && fail "c (after the cancelled x) did not end cancelled"
ctl status "$c" --json >"$TMP/c.st"
[ "$(field "$TMP/c.st" state)" = cancelled ] || fail "$c is not cancelled: $(cat "$TMP/c.st")"
case "$(field "$TMP/c.st" error)" in
"not started: job $x it runs after ended cancelled"*) ;;
*) fail "$c's error does not name $x: $(field "$TMP/c.st" error)" ;;
esac
ctl_as "$carol" wait "$d" || fail "d (after any x) did not end done"
# A job after a sweep: it waits for every job of the sweep to end done.
printf '%s\n' '{"base": "short.json", "grid": {"optim.lr": [0.01, 0.02]}}' >"$TMP/sweep.json"
chmod 644 "$TMP/sweep.json"
sw=$(ctl_as "$bob" sweep -q "$TMP/sweep.json") || fail "submit the sweep"
e=$(ctl_as "$bob" submit -q --after "$sw" "$TMP/short.json") || fail "submit e after the sweep"
ctl status "$e" --json >"$TMP/e.st"
case "$(field "$TMP/e.st" waiting)" in
"after: sweep $sw has "[12]" job(s) not ended") ;;
*) fail "$e does not name the sweep: $(field "$TMP/e.st" waiting)" ;;
esac
ctl_as "$bob" wait "$e" || fail "e (after the sweep) did not end done"
# A sweep after a job (its base job's `after`): behind a blocker on the whole
# CPU, p and q wait; the sweep after p waits naming p and runs once p ended
# done; the sweep after q ends cancelled, each of its jobs naming q.
blocker=$(ctl submit -q --set devices=cpu "$TMP/long.json") || fail "submit the blocker"
wait_state "$blocker" running 20
p=$(ctl_as "$bob" submit -q "$TMP/short.json") || fail "submit p"
q=$(ctl_as "$bob" submit -q "$TMP/short.json") || fail "submit q"
for dep in "$p" "$q"; do
    sed "s/\"epochs\"/\"after\": \"$dep\", \"epochs\"/" "$TMP/short.json" >"$TMP/after_$dep.json"
    printf '{"base": "after_%s.json", "grid": {"optim.lr": [0.01, 0.02]}}\n' "$dep" >"$TMP/sweep_$dep.json"
    chmod 644 "$TMP/after_$dep.json" "$TMP/sweep_$dep.json"
done
sp=$(ctl_as "$bob" sweep -q "$TMP/sweep_$p.json") || fail "submit the sweep after p"
sq=$(ctl_as "$bob" sweep -q "$TMP/sweep_$q.json") || fail "submit the sweep after q"
spj=$(sweep_jobs "$sp") && [ "$(echo "$spj" | wc -l)" = 2 ] || fail "sweep $sp's jobs: $spj"
for id in $spj; do
    ctl status "$id" --json >"$TMP/sp.st"
    [ "$(field "$TMP/sp.st" waiting)" = "after: $p ($bob) is queued" ] ||
        fail "$id of sweep $sp does not wait for $p: $(field "$TMP/sp.st" waiting)"
done
ctl_as "$bob" cancel "$q" >/dev/null || fail "cancel q"
ctl cancel "$blocker" >/dev/null || fail "cancel the blocker"
ctl_as "$bob" wait "$p" || fail "p did not end done"
for id in $spj; do
    ctl_as "$bob" wait "$id" || fail "$id of sweep $sp (after p) did not end done"
    started_after_end "$p" "$id" || fail "$id of sweep $sp started before $p ended"
done
sqj=$(sweep_jobs "$sq") && [ "$(echo "$sqj" | wc -l)" = 2 ] || fail "sweep $sq's jobs: $sqj"
for id in $sqj; do
    ctl status "$id" --json >"$TMP/sq.st"
    [ "$(field "$TMP/sq.st" state)" = cancelled ] || fail "$id of sweep $sq is not cancelled"
    case "$(field "$TMP/sq.st" error)" in
    "not started: job $q it runs after ended cancelled"*) ;;
    *) fail "$id's error does not name $q: $(field "$TMP/sq.st" error)" ;;
    esac
done

# ---- 3. quotas ----
stop_daemon
start_daemon --group "$grp" --admin-group "$adm" --max-cores-per-user 1
out=$(ctl_as "$alice" submit -q --set devices=cpu:2 "$TMP/short.json" 2>&1) &&
    fail "a job past the quota alone was queued: $out"
echo "$out" | grep -q "above parled's --max-cores-per-user (1)" || fail "no clear refusal: $out"
a1=$(ctl_as "$alice" submit -q "$TMP/long.json") || fail "submit a1"
wait_state "$a1" running 20
a2=$(ctl_as "$alice" submit -q "$TMP/short.json") || fail "submit a2"
b1=$(ctl_as "$bob" submit -q "$TMP/long.json") || fail "submit b1"
wait_state "$b1" running 20
ctl status "$a2" --json >"$TMP/a2.st"
case "$(field "$TMP/a2.st" waiting)" in
"quota: $alice's running jobs hold"*"$a1 ($alice)") ;;
*) fail "$a2 does not wait for the quota: $(cat "$TMP/a2.st")" ;;
esac
ctl cancel "$a1" >/dev/null || fail "cancel a1"
ctl_as "$alice" wait "$a2" || fail "a2 did not end done once a1 stopped"
ctl cancel "$b1" >/dev/null || fail "cancel b1"
wait_state "$b1" cancelled 20

# ---- 4. age: the time eligible to run ----
stop_daemon
start_daemon --group "$grp" --admin-group "$adm" --oldest-first-after 3
waiting_is() { # ID TEXT
    ctl status "$1" --json >"$TMP/w.st"
    [ "$(field "$TMP/w.st" waiting)" = "$2" ] ||
        fail "$1 waits otherwise than \"$2\": $(field "$TMP/w.st" waiting)"
}
# heavy: the one of alice and bob whose use weighs more (its timed-out run adds to it).
read -r heavy light < <(ctl usage --json | python3 -c 'import json,sys
u = {o["user"]: o["device_seconds"] for o in json.load(sys.stdin)["owners"]}
a, b = sys.argv[1:]
print(*((a, b) if u.get(a, 0) >= u.get(b, 0) else (b, a)))' "$alice" "$bob")
t=$(ctl_as "$heavy" submit -q "$TMP/limited.json") || fail "submit the limited job"
ctl_as "$heavy" wait "$t" && fail "wait on a timed-out job exited 0"
blocker=$(ctl submit -q --set devices=cpu "$TMP/long.json") || fail "submit the blocker"
wait_state "$blocker" running 20
l1=$(ctl_as "$light" submit -q "$TMP/short.json") || fail "submit l1"
sleep 4 # l1 is eligible past the bound; the timed-out job, submitted before, was not queued
ctl_as "$heavy" resume "$t" >/dev/null || fail "resume $t"
waiting_is "$t" "queue: cpu kept for $l1 ($light), ahead by it was eligible to run longer than --oldest-first-after"
ctl_as "$heavy" cancel "$t" >/dev/null || fail "cancel $t"
ctl_as "$light" cancel "$l1" >/dev/null || fail "cancel l1"
h=$(ctl_as "$heavy" submit -q "$TMP/short.json") || fail "submit h"
ctl_as "$heavy" hold "$h" >/dev/null || fail "hold h"
sleep 4 # h is held past the bound
l2=$(ctl_as "$light" submit -q "$TMP/short.json") || fail "submit l2"
ctl_as "$heavy" release "$h" >/dev/null || fail "release h"
# Past the bound both are aged and l2, eligible longer, stays ahead.
ctl status "$h" --json >"$TMP/h.st"
case "$(field "$TMP/h.st" waiting)" in
"queue: cpu kept for $l2 ($light), ahead by its owner used less device time recently") ;;
"queue: cpu kept for $l2 ($light), ahead by it was eligible to run longer") ;;
*) fail "the released $h passed $l2: $(field "$TMP/h.st" waiting)" ;;
esac
# A restart keeps h's age (its status was written as it was released).
sleep 1
aged=$(ctl status "$h" --json | sed -n 's/^[[:space:]]*"eligible_s":[[:space:]]*\([0-9.e+-]*\),*$/\1/p')
stop_daemon
start_daemon --group "$grp" --admin-group "$adm" --oldest-first-after 3
again=$(ctl status "$h" --json | sed -n 's/^[[:space:]]*"eligible_s":[[:space:]]*\([0-9.e+-]*\),*$/\1/p')
python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (a >= 1 and b >= a))' \
    "$aged" "$again" || fail "$h was eligible $aged s before a restart, $again s after"
ctl cancel "$blocker" >/dev/null || fail "cancel the blocker"
ctl_as "$light" wait "$l2" || fail "l2 did not end done"
ctl_as "$heavy" wait "$h" || fail "h did not end done"

# ---- 5. --min-gpu-share ----
stop_daemon
start_daemon --group "$grp" --admin-group "$adm" --min-gpu-share 0.25
out=$(ctl_as "$alice" submit -q --set gpu_share=0.1 "$TMP/short.json" 2>&1) &&
    fail "a share below --min-gpu-share was queued: $out"
echo "$out" | grep -q "gpu_share: 0.1 is below parled's --min-gpu-share (0.25)" ||
    fail "no clear refusal: $out"
g=$(ctl_as "$alice" submit -q --set gpu_share=0.25 "$TMP/short.json") ||
    fail "a share at --min-gpu-share was refused"
ctl_as "$alice" wait "$g" || fail "$g did not end done"
check_alive "the users' requests"
stop_daemon
echo PASS
