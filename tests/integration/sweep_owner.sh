#!/bin/bash
# A sweep belongs to its submitter (SO_PEERCRED), as a job does: everyone
# sees its status, only its owner (and root, the admin group) may cancel it
# or read its jobs' metrics; it counts as its jobs against
# --max-jobs-per-user; its base job file is read by parlectl with the
# user's rights, never by parled. Users made here, removed at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sweep_lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
make_users so
start_daemon --group "$grp" --max-jobs-per-user 3

sweep_base "$TMP/long.json" 1000
printf '%s\n' '{"base": "long.json", "grid": {"optim.lr": [0.01, 0.02]}}' >"$TMP/sweep.json"
chmod 644 "$TMP/long.json" "$TMP/sweep.json"
id=$(ctl_as "$alice" sweep -q "$TMP/sweep.json") || fail "alice's sweep"
ctl_as "$bob" sweep status "$id" --json | grep -q "\"user\":[[:space:]]*\"$alice\"" ||
    fail "bob does not see alice's sweep with her name"
ctl_as "$bob" sweep ls | grep -q "^$id .*$alice" || fail "sweep ls does not show alice's sweep"
out=$(ctl_as "$bob" sweep cancel "$id" 2>&1) && fail "bob cancelled alice's sweep"
echo "$out" | grep -q "sweep $id belongs to $alice (uid $(id -u "$alice")): only its owner" ||
    fail "bob's cancel: no clear refusal: $out"
mkdir -m 755 "$TMP/bob" && chown "$bob" "$TMP/bob"
out=$(ctl_as "$bob" plot "$id" -o "$TMP/bob/x.svg" 2>&1) && fail "bob plotted alice's sweep"
echo "$out" | grep -q "belongs to $alice" || fail "bob's plot: no clear refusal: $out"
[ "$(sweep_field "$id" state)" != cancelled ] || fail "alice's sweep was cancelled by bob"

# The bound: alice has 2 jobs; a sweep of 2 more would make 4 > 3.
out=$(ctl_as "$alice" sweep "$TMP/sweep.json" 2>&1) && fail "alice passed --max-jobs-per-user"
echo "$out" | grep -q "a sweep of 2 jobs would pass parled's --max-jobs-per-user 3" ||
    fail "the bound's refusal: $out"
ctl_as "$bob" sweep -q "$TMP/sweep.json" >/dev/null || fail "bob is refused because of alice's jobs"

# The base file is read by parlectl as the user: one bob cannot read is refused
# on his side, though parled (root) could read it.
cp "$TMP/long.json" "$TMP/secret.json" && chmod 600 "$TMP/secret.json"
printf '%s\n' '{"base": "secret.json", "grid": {}}' >"$TMP/secret_sweep.json"
chmod 644 "$TMP/secret_sweep.json"
out=$(ctl_as "$bob" sweep "$TMP/secret_sweep.json" 2>&1) && fail "bob's sweep read a file he cannot"
echo "$out" | grep -q "cannot read $TMP/secret.json: Permission denied" || fail "secret base: $out"

out=$(ctl_as "$alice" sweep cancel "$id" --json) || fail "alice cannot cancel her sweep: $out"
echo "$out" | python3 -c 'import json,sys; assert json.load(sys.stdin)["cancelled_jobs"] == 2' ||
    fail "sweep cancel --json: $out"
wait_sweep "$id" cancelled 30
ctl sweep cancel s0002 >/dev/null || fail "root cannot cancel bob's sweep"
check_alive "sweep ownership"
stop_daemon
echo PASS
