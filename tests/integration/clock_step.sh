#!/bin/bash
# parled's wall clock stepped (as an NTP step or a resumed VM does) while jobs
# run, under libfaketime (Debian package faketime) with only CLOCK_REALTIME
# moved: every duration counts real time (docs/architecture.md, "Time").
# Real time here is /proc/uptime's, which no step moves; MARGIN is a second
# (three under a sanitizer's slower build, as ANSWER_MS).
# 1. a time limit of 6 s, the clock a day ahead meanwhile: the job reaches
#    its limit neither before 5 s nor after 7 s of real time; a cancel right
#    after a step back of an hour ends the job within MARGIN;
# 2. --preempt-grace 4 with the clock a day ahead after the ask: the victim
#    (holding its stop, PARLE_FAULT_REPLICA's stopping) is stopped neither
#    before 3 s nor after 4 s and the grace's once-a-second look;
# 3. a preemption withdrawn after a step back of an hour: its charge is not
#    negative;
# 4. --save-retry 5 with the clock a day ahead: the job fails neither before
#    4 s of retries nor after 6 s and MARGIN.
# Throughout, the one owner's use (fair share) is never negative nor more
# than the real seconds since the first job (all jobs on the CPU, one
# device), and each restart keeps it.
. "$(dirname "$0")/lib.sh"
lib=
for f in /usr/lib/*/faketime/libfaketimeMT.so.1 /usr/lib/faketime/libfaketimeMT.so.1; do
    [ -e "$f" ] && lib=$f && break
done
[ -n "$lib" ] || { echo "SKIP: libfaketime is not installed (Debian package faketime)"; exit 77; }
if ldd "$PARLED" 2>/dev/null | grep -q 'lib[at]san'; then
    echo "SKIP: libfaketime is not preloaded under a sanitizer"
    exit 77
fi
[ "$(nproc)" -ge 2 ] || { echo "SKIP: needs 2 cores"; exit 77; }
PARLED_WRAP="env LD_PRELOAD=$lib FAKETIME_TIMESTAMP_FILE=$TMP/offset FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1"
if [ "$(nproc)" -gt 2 ] && command -v taskset >/dev/null; then
    PARLED_WRAP="taskset -c 0,1 $PARLED_WRAP"
fi
MARGIN=$((ANSWER_MS / 1000))
offset() { echo "$1" >"$TMP/offset"; } # parled's wall clock, seconds from the real one
now() { cut -d' ' -f1 /proc/uptime; }
# calc EXPR: an awk expression's value; holds EXPR: exits 0 when it is true.
calc() { awk "BEGIN { print ($1) }"; }
holds() { awk "BEGIN { exit !($1) }"; }
sleep_until() { sleep "$(calc "$1 - $(now) > 0 ? $1 - $(now) : 0")"; }
state_of() { ctl status "$1" --json | sed -n 's/^[[:space:]]*"state":[[:space:]]*"\([a-z]*\)",*$/\1/p'; }
# The owner's use (root's: every job here is root's), checked against the
# real seconds since the first job; printed.
usage_checked() {
    local u
    u=$(ctl usage --json | python3 -c 'import json,sys
print(sum(o["device_seconds"] for o in json.load(sys.stdin)["owners"] if o["uid"] == 0))') ||
        fail "usage"
    holds "$u >= 0" || fail "$1: the use is negative: $u device-seconds"
    holds "$u <= $(now) - $first + 1" ||
        fail "$1: $u device-seconds charged in $(calc "$(now) - $first") s of real time"
    echo "$u"
}
# restart WHAT [parled options]: stop, start again, the use kept.
restart() {
    local what=$1 before after
    shift
    before=$(usage_checked "$what")
    stop_daemon
    start_daemon --usage-save-interval 0.5 "$@"
    after=$(usage_checked "after a restart")
    holds "$after >= $before - 0.01" || fail "$what: the use was $before, $after after a restart"
}
mlp_job "$TMP/long.json" 1000
sed -i 's/"devices": "cpu"/"devices": "cpu:1"/' "$TMP/long.json"
sed 's/"epochs"/"time_limit": 6, "epochs"/' "$TMP/long.json" >"$TMP/limited.json"
mlp_job "$TMP/short.json" 1
sed -i 's/"devices": "cpu"/"devices": "cpu:1"/' "$TMP/short.json"
offset +0
start_daemon --usage-save-interval 0.5

# ---- 1. a time limit, and a cancel after a step back ----
first=$(now)
t=$(ctl submit -q "$TMP/limited.json") || fail "submit the limited job"
wait_state "$t" running 20
ran=$(now)
c=$(ctl submit -q "$TMP/long.json") || fail "submit c"
wait_steps "$c" 20
offset +86400
# A pass of the scheduler (a submit) right after the step looks at the limit.
q=$(ctl submit -q "$TMP/short.json") || fail "submit q"
sleep_until "$first + 5"
grep -q "time limit of 6 s reached" "$STATE/jobs/$t/log.txt" &&
    fail "$t reached its time limit of 6 s within 5 s of real time after a step of a day"
wait_log "$t" "time limit of 6 s reached" 20
holds "$(now) <= $ran + 6 + $MARGIN" ||
    fail "$t reached its limit of 6 s after $(calc "$(now) - $ran") s of real time"
wait_state "$t" timeout 20
wait_state "$q" done 30
usage_checked "a step of a day" >/dev/null
offset +82800
asked=$(now)
ctl cancel "$c" >/dev/null || fail "cancel $c"
while [ "$(state_of "$c")" != cancelled ]; do
    holds "$(now) <= $asked + $MARGIN" ||
        fail "$c was not cancelled within $MARGIN s of a step back of an hour: $(state_of "$c")"
    sleep 0.05
done

# ---- 2. the preemption grace ----
# The first job this parled runs holds its stop before the checkpoint; no
# release file is made: the grace ends it.
PARLE_FAULT_REPLICA=0:stopping:1 PARLE_FAULT_RELEASE=$TMP/never restart "the timeout" --preempt-grace 4
v=$(ctl submit -q --priority -1 --set devices=cpu "$TMP/long.json") || fail "submit v"
wait_steps "$v" 20
before=$(now)
p=$(ctl submit -q --set devices=cpu "$TMP/long.json") || fail "submit p"
asked=$(now)
wait_log "$v" "holds its stop before the checkpoint" 20
offset +169200
sleep_until "$before + 3"
grep -q "no checkpoint within --preempt-grace" "$STATE/jobs/$v/log.txt" &&
    fail "$v was stopped within 3 s of real time of a grace of 4 s after a step of a day"
wait_log "$v" "no checkpoint within --preempt-grace \(4 s\)" 20
holds "$(now) <= $asked + 4 + 1 + $MARGIN" ||
    fail "$v was stopped $(calc "$(now) - $asked") s after the ask, with a grace of 4 s"
wait_state "$p" running 20
ctl cancel "$p" >/dev/null && ctl cancel "$v" >/dev/null || fail "cancel p and v"
wait_state "$p" cancelled 20
wait_state "$v" cancelled 20

# ---- 3. a preemption withdrawn after a step back ----
PARLE_FAULT_REPLICA=0:stopping:1 PARLE_FAULT_RELEASE=$TMP/release restart "the grace"
v=$(ctl submit -q --priority -1 --set devices=cpu "$TMP/long.json") || fail "submit v"
wait_steps "$v" 20
p=$(ctl submit -q --set devices=cpu "$TMP/long.json") || fail "submit p"
wait_log "$v" "holds its stop before the checkpoint" 20
offset +165600
ctl cancel "$p" >/dev/null || fail "cancel $p"
wait_log "$v" "preemption withdrawn: $p was cancelled" 20
usage_checked "a preemption withdrawn after a step back" >/dev/null
: >"$TMP/release"
ctl cancel "$v" >/dev/null || fail "cancel $v"
wait_state "$v" cancelled 20

# ---- 4. the save retry ----
# Writes past 100 KB fail: the final master's (400 KB) is retried.
PARLE_FAULT_WRITE_AFTER=100000 restart "the withdrawn preemption" --save-retry 5
s=$(ctl submit -q "$TMP/short.json") || fail "submit s"
wait_log "$s" "the final master \(epoch 1\) could not be written" 30
failed=$(now)
offset +252000
sleep_until "$failed + 4"
[ "$(state_of "$s")" = running ] ||
    fail "$s ended within 4 s of real time of a save retry of 5 s after a step of a day"
while [ "$(state_of "$s")" != failed ]; do
    holds "$(now) <= $failed + 5 + 1 + $MARGIN" ||
        fail "$s did not fail within 6 s and $MARGIN s of a save retry of 5 s: $(state_of "$s")"
    sleep 0.1
done
ctl status "$s" --json | grep -q '"error":.*could not be written in 5 s of retries' ||
    fail "$s's error: $(ctl status "$s" --json | grep '"error"')"
restart "the save retry"
check_alive "the steps of the clock"
stop_daemon
echo PASS
