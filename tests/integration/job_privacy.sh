#!/bin/bash
# What a member sees of another member's job (docs/architecture.md,
# "Security model"), as real users made here: bob's job's status, its line
# in list and status, and his sweep's status show alice what the queue needs
# (id, owner, state, devices, priority, why it waits, times) but none of its
# training values, errors or paths; bob and an admin (carol) see them all; a
# job of alice's that runs after bob's failed one names his job and its
# state, not his error. With parled --open-job-details every member sees all.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
make_users jp
start_daemon --group "$grp" --admin-group "$adm"
mlp_job "$TMP/short.json" 1
mlp_job "$TMP/long.json" 1000
# A job that fails as it loads its data: its error names bob's data path.
secret=$TMP/bob-private-data
sed 's|"dataset": "synthetic"|"dataset": "mnist", "root": "'"$secret"'"|' "$TMP/short.json" \
    >"$TMP/bad.json"
cat >"$TMP/sweep.json" <<'JSON'
{"base": {"name": "it-sw", "model": {"arch": "mlp"},
         "data": {"dataset": "synthetic", "train_limit": 256, "test_limit": 64},
         "algorithm": {"name": "sgd"}, "optim": {"lr": 0.05, "batch": 32},
         "epochs": 1, "seed": 3, "devices": "cpu", "log_every": 4},
 "grid": {"optim.lr": [0.0123]}, "seeds": 1}
JSON
chmod 644 "$TMP"/*.json

b=$(ctl_as "$bob" submit -q "$TMP/short.json") || fail "bob submits"
ctl_as "$bob" wait "$b" || fail "bob's job did not end done"
bad=$(ctl_as "$bob" submit -q "$TMP/bad.json") || fail "bob submits the failing job"
wait_state "$bad" failed 30
ctl_as "$bob" status "$bad" --json | grep -qF "$secret" ||
    fail "bob's failed job's error does not name its data path (the test needs it to)"
sw=$(ctl_as "$bob" sweep -q "$TMP/sweep.json") || fail "bob submits a sweep"
for _ in $(seq 300); do
    ctl_as "$bob" sweep status "$sw" --json >"$TMP/sw.json"
    grep -q '"state":[[:space:]]*"done"' "$TMP/sw.json" && break
    sleep 0.1
done
grep -q '"test_error_mean":[[:space:]]*[0-9]' "$TMP/sw.json" ||
    fail "bob's sweep has no test error: $(cat "$TMP/sw.json")"
a=$(ctl_as "$alice" submit -q --after "$bad" "$TMP/short.json") || fail "alice submits after $bad"
wait_state "$a" cancelled 30

# seen DETAILS USER: USER's view of bob's jobs and sweep has DETAILS (yes/no).
seen() {
    ctl_as "$2" status "$b" --json >"$TMP/b.json" || fail "$2: status $b"
    ctl_as "$2" status "$bad" --json >"$TMP/bad.st" || fail "$2: status $bad"
    ctl_as "$2" list --json >"$TMP/list.json" || fail "$2: list"
    ctl_as "$2" status --json >"$TMP/all.json" || fail "$2: status"
    ctl_as "$2" sweep status "$sw" --json >"$TMP/sw.json" || fail "$2: sweep status"
    for k in id owner state devices priority waiting submitted_at started_at ended_at; do
        grep -q "\"$k\":" "$TMP/b.json" || fail "$2 does not see $k of $b: $(cat "$TMP/b.json")"
    done
    [ "$(field "$TMP/b.json" state)" = done ] || fail "$2 does not see $b done"
    if [ "$1" = yes ]; then
        for k in train_loss test_error lr; do
            [ "$(field "$TMP/b.json" $k)" != null ] || fail "$2 does not see $k of $b"
        done
        grep -qF "$secret" "$TMP/bad.st" || fail "$2 does not see $bad's error"
        grep -q '"test_error_mean":[[:space:]]*[0-9]' "$TMP/sw.json" ||
            fail "$2 does not see the sweep's test error: $(cat "$TMP/sw.json")"
    else
        for k in train_loss test_error test_loss lr error save_error; do
            [ "$(field "$TMP/b.json" $k)" = null ] ||
                fail "$2 sees $k of bob's job: $(cat "$TMP/b.json")"
        done
        [ "$(field "$TMP/b.json" details)" = false ] || fail "$2: details not false"
        for f in bad.st list.json all.json; do
            ! grep -qF "$secret" "$TMP/$f" || fail "$2 sees bob's path in $f: $(cat "$TMP/$f")"
            # (alice's own job never trained: any value here is bob's)
            ! grep -q '"\(train_loss\|test_error\|lr\)":[[:space:]]*[0-9]' "$TMP/$f" ||
                fail "$2 sees bob's training values in $f: $(cat "$TMP/$f")"
        done
        grep -q '"test_error_mean":[[:space:]]*[0-9]\|0\.0123' "$TMP/sw.json" &&
            fail "$2 sees bob's sweep's test error or values: $(cat "$TMP/sw.json")"
    fi
    return 0
}

seen yes "$bob"
seen yes "$carol"
seen no "$alice"
# alice's own job says which of bob's jobs and how it ended, not his error.
ctl_as "$alice" status "$a" --json >"$TMP/a.json"
grep -q "not started: job $bad it runs after ended failed" "$TMP/a.json" ||
    fail "alice's job does not name $bad and its state: $(cat "$TMP/a.json")"
! grep -qF "$secret" "$TMP/a.json" || fail "alice's job copies bob's error: $(cat "$TMP/a.json")"
[ "$(field "$TMP/a.json" details)" = true ] || fail "alice does not see her own job's details"

stop_daemon
start_daemon --group "$grp" --admin-group "$adm" --open-job-details
seen yes "$alice"
"$PARLED" --help | grep -q -- "--open-job-details" || fail "parled --help lacks --open-job-details"
echo "PASS"
