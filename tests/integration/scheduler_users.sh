#!/bin/bash
# The scheduler between users (docs/architecture.md, "Scheduling"), as real
# users made here: a member may only lower priorities (a nice), acts (hold,
# release, rm) only on their own jobs, an admin may raise; fair share: of two
# users' jobs queued at equal priority, the user who used less device time
# recently goes first, even having submitted later.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
make_users su
start_daemon --group "$grp" --admin-group "$adm"
mlp_job "$TMP/short.json" 2
mlp_job "$TMP/long.json" 1000
chmod 644 "$TMP/short.json" "$TMP/long.json"

# ---- a member lowers, an admin raises ----
blocker=$(ctl submit -q --priority 10 "$TMP/long.json") || fail "root submits the blocker"
wait_state "$blocker" running 30
out=$(ctl_as "$alice" submit -q --priority 5 "$TMP/short.json" 2>&1) &&
    fail "alice queued a job at priority 5: $out"
echo "$out" | grep -q "priority: 5 is above 0: only root" || fail "no clear refusal: $out"
a=$(ctl_as "$alice" submit -q --priority -1 "$TMP/short.json") || fail "alice lowers at submit"
out=$(ctl_as "$alice" priority "$a" 0 2>&1) && fail "alice raised her job: $out"
echo "$out" | grep -q "only root, parled's user and its --admin-group may raise" ||
    fail "no clear refusal of the raise: $out"
ctl_as "$alice" priority "$a" -5 --json | grep -q '"priority":[[:space:]]*-5' ||
    fail "alice cannot lower her job"
for op in "priority $a -6" "hold $a" "release $a"; do
    # shellcheck disable=SC2086
    out=$(ctl_as "$bob" $op 2>&1) && fail "bob may $op (alice's job)"
    echo "$out" | grep -q "belongs to $alice" || fail "bob's $op: no clear refusal: $out"
done
ctl_as "$carol" priority "$a" 3 >/dev/null || fail "carol (admin) cannot raise alice's job"
ctl status "$a" --json >"$TMP/a.st"
[ "$(field "$TMP/a.st" priority)" = 3 ] || fail "the admin's raise did not hold: $(cat "$TMP/a.st")"
out=$(ctl_as "$alice" priority "$a" 5000 2>&1) && fail "a priority out of range was taken"
echo "$out" | grep -q "priority: must be an integer in -1000..1000" || fail "no range error: $out"
ctl_as "$alice" hold "$a" >/dev/null || fail "alice holds her job"
ctl_as "$alice" release "$a" >/dev/null || fail "alice releases her job"
ctl cancel "$a" >/dev/null || fail "cancel a"

# ---- fair share ----
# alice uses the CPU for a while; then, behind the blocker, alice queues two
# jobs and bob one, last. Once the blocker goes, bob's starts first, also
# after parled restarted in between (usage.json keeps alice's use).
ctl priority "$blocker" -10 >/dev/null || fail "root lowers the blocker"
a0=$(ctl_as "$alice" submit -q --priority 0 "$TMP/short.json") || fail "alice submits a0"
ctl_as "$alice" wait "$a0" || fail "a0 did not end done"
ctl status "$blocker" --json >"$TMP/blocker.st"
[ "$(field "$TMP/blocker.st" preempted_by)" = "$a0" ] ||
    fail "the blocker, lowered, did not make room for $a0: $(cat "$TMP/blocker.st")"
wait_state "$blocker" running 30
stop_daemon
start_daemon --group "$grp" --admin-group "$adm"
wait_state "$blocker" running 30
ctl priority "$blocker" 10 >/dev/null || fail "root raises the blocker again"
a1=$(ctl_as "$alice" submit -q "$TMP/short.json") || fail "alice submits a1"
a2=$(ctl_as "$alice" submit -q "$TMP/short.json") || fail "alice submits a2"
b1=$(ctl_as "$bob" submit -q "$TMP/short.json") || fail "bob submits b1"
wait_state "$a1" queued 5
ctl status "$a1" --json >"$TMP/a1.st"
case "$(field "$TMP/a1.st" waiting)" in
"queue: cpu kept for $b1 ($bob), ahead by its owner used less device time recently") ;;
*) fail "$a1 does not say it waits behind bob's job: $(field "$TMP/a1.st" waiting)" ;;
esac
ctl cancel "$blocker" >/dev/null || fail "cancel the blocker"
ctl_as "$alice" wait "$a2" || fail "a2 did not end done"
for id in "$a1" "$a2" "$b1"; do ctl status "$id" --json >"$TMP/$id.st"; done
start() { field "$TMP/$1.st" started_at; }
awk -v b="$(start "$b1")" -v a="$(start "$a1")" 'BEGIN { exit !(b < a) }' ||
    fail "bob's job started after alice's though alice used more device time"
awk -v a1="$(start "$a1")" -v a2="$(start "$a2")" 'BEGIN { exit !(a1 < a2) }' ||
    fail "alice's jobs did not start in submission order"
out=$(ctl_as "$bob" rm "$a2" 2>&1) && fail "bob removed alice's job: $out"
echo "$out" | grep -q "belongs to $alice" || fail "bob's rm: no clear refusal: $out"
ctl_as "$alice" rm "$a2" >/dev/null || fail "alice cannot remove her ended job"
check_alive "the users' requests"
stop_daemon
# A usage.json that is not what parled writes is named in the log and
# ignored: parled serves, and keeps its table from then on.
echo '{"usage_at": 1, "owners": [{"uid": -3, "device_seconds": 1}]}' >"$STATE/usage.json"
start_daemon --group "$grp" --admin-group "$adm"
grep -q "fair share starts from nothing: $STATE/usage.json: owners\[0\].uid: must be a user id" \
    "$TMP/parled.err" || fail "a bad usage.json is not named in the log: $(cat "$TMP/parled.err")"
check_alive "a bad usage.json"
stop_daemon
echo PASS
