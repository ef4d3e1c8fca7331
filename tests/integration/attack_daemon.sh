#!/bin/bash
# parled as root for a group whose members are hostile (docs/architecture.md,
# "Security model"): each attack runs as a real unprivileged member while
# another member's requests are timed, and each must be refused or bounded
# with the others served in under a second (three in a sanitizer's build).
# Users are made here and removed at the end (as multiuser.sh). Each check
# fails on a parled without its fix.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; [ -n "${FLOOD:-}" ] && kill "$FLOOD" 2>/dev/null; remove_users; (exit $rc); cleanup' EXIT
make_users ad

# The attacker's client: pipelines request lines without reading (hold), or
# sends them and counts the error codes of the replies (send).
cat >"$TMP/attack.py" <<'PY'
import collections, json, socket, sys, threading, time
mode, sock, path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
line = open(path, "rb").read().rstrip(b"\n") + b"\n"
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
if mode == "hold":  # never reads; parled stops reading it, so the send blocks
    try:
        s.sendall(line * n)
        time.sleep(600)
    except OSError:
        pass
    sys.exit(0)
threading.Thread(target=s.sendall, args=(line * n,), daemon=True).start()
f = s.makefile("rb")
codes = collections.Counter()
for _ in range(n):
    r = json.loads(f.readline())
    codes[r.get("error", {}).get("code", "ok")] += 1
    if "error" in r and codes[r["error"]["code"]] == 1:
        print(r["error"]["message"], file=sys.stderr)
    elif "error" not in r and "id" in r:
        print(r["id"], file=sys.stderr)
print(" ".join(f"{k}={v}" for k, v in sorted(codes.items())))
PY
chmod 644 "$TMP/attack.py"
# The system's python3: a user's PATH may lead to root's own (pyenv) one.
py=$(PATH=/usr/bin:/bin command -v python3) || fail "no python3 in /usr/bin or /bin"
attack() { # attack USER MODE FILE N
    as "$1" "$py" "$TMP/attack.py" "$2" "$SOCK" "$3" "$4"
}

# timed_list: bob's `parlectl list`, answered within a second, while the
# attack in $FLOOD runs; how many times it was answered before that ended.
timed_list() {
    LISTS=0
    while kill -0 "$FLOOD" 2>/dev/null; do
        t0=$(date +%s%N)
        ctl_as "$bob" list >/dev/null || fail "bob's list failed during $1"
        ms=$((($(date +%s%N) - t0) / 1000000))
        [ "$ms" -lt "$ANSWER_MS" ] || fail "bob's list took $ms ms during $1"
        LISTS=$((LISTS + 1))
    done
}

# alice's jobs run until cancelled, one at a time on the cores.
mlp_job "$TMP/long.json" 1000
# Under AddressSanitizer freed memory waits in a quarantine (256 MiB by
# default) before it is reused: parled's growth below is measured without it.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1}:quarantine_size_mb=0"
chmod 644 "$TMP/long.json"
start_daemon --group "$grp" --admin-group "$adm" --max-jobs-per-user 1001 --stop-timeout 5 \
    --devices cpu
first=$DAEMON_PID
a=$(ctl_as "$alice" submit -q "$TMP/long.json") || fail "alice submits"

# ---- a second parled on the same state dir ----
"$PARLED" --socket "$TMP/second.sock" --state-dir "$STATE" 2>"$TMP/second.err" &&
    fail "a second parled started on the state dir"
grep -q "state dir $STATE is in use by another parled (pid $first," "$TMP/second.err" ||
    fail "the second parled's error: $(cat "$TMP/second.err")"
[ -e "$TMP/second.sock" ] && fail "the second parled bound its socket"

# ---- sweeps: one accepted, then refused ones, never holding the loop ----
sweep_line() { # sweep_line FILE: a sweep_submit of 1000 points
    python3 - "$TMP/long.json" >"$1" <<'PY'
import json, sys
base = json.load(open(sys.argv[1]))
print(json.dumps({"op": "sweep_submit", "sweep": {"name": "flood", "base": base,
      "grid": {"optim.lr": [round(0.001 * (i + 1), 6) for i in range(1000)]}}}))
PY
    chmod 644 "$1"
}
sweep_line "$TMP/sweep.line"
attack "$alice" send "$TMP/sweep.line" 1 >"$TMP/accepted.out" 2>&1 &
FLOOD=$!
timed_list "an accepted sweep of 1000 jobs"
wait "$FLOOD" || fail "the accepted sweep: $(cat "$TMP/accepted.out")"
grep -qx "ok=1" "$TMP/accepted.out" || fail "the 1000-job sweep: $(cat "$TMP/accepted.out")"
[ "$LISTS" -gt 0 ] || fail "no list was timed while the sweep was queued"
echo "bob's list answered $LISTS times under $ANSWER_MS ms while 1000 jobs were queued"
sweep=$(grep -x 's[0-9]*' "$TMP/accepted.out")
ctl_as "$bob" sweep status "$sweep" --json | grep -Eq '"jobs":[[:space:]]*1000,' ||
    fail "sweep $sweep does not have 1000 jobs"

# alice has 1001 jobs queued: ten more sweeps of 1000 are refused at once.
attack "$alice" send "$TMP/sweep.line" 10 >"$TMP/refused.out" 2>&1 &
FLOOD=$!
timed_list "ten refused sweeps of 1000 jobs"
wait "$FLOOD"
grep -qx "limit=10" "$TMP/refused.out" || fail "ten sweeps past the bound: $(cat "$TMP/refused.out")"
grep -q -- "--max-jobs-per-user 1001" "$TMP/refused.out" || fail "the limit error names no flag"

# ---- refusals do not grow the log at will ----
printf '{"op":"submit","job":%s}\n' "$(tr -d '\n' <"$TMP/long.json")" >"$TMP/submit.line"
chmod 644 "$TMP/submit.line"
attack "$alice" send "$TMP/submit.line" 500 >"$TMP/submits.out" 2>&1 ||
    fail "500 refused submits: $(cat "$TMP/submits.out")"
grep -qx "limit=500" "$TMP/submits.out" || fail "500 submits: $(cat "$TMP/submits.out")"
uid=$(id -u "$alice")
n=$(grep -c "rejected a job from $alice (uid $uid)" "$TMP/parled.err")
[ "$n" -le 20 ] || fail "$n log lines for alice's refused submits (at most 20 a minute)"
grep -q "uid $uid: 20 refusals within a minute" "$TMP/parled.err" || fail "no line says the rest are counted"

# ---- queued jobs hold no descriptor each ----
fds=$(find "/proc/$DAEMON_PID/fd" -mindepth 1 | wc -l)
[ "$fds" -lt 100 ] || fail "parled holds $fds descriptors with 1000 jobs queued"
echo "parled holds $fds descriptors with 1000 jobs queued"

# ---- watches: a connection watches one job at a time (the last asked) ----
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DAEMON_PID/status"; }
printf '{"op":"watch","id":"%s"}\n' "$a" >"$TMP/watch.line"
chmod 644 "$TMP/watch.line"
before=$(rss)
attack "$alice" send "$TMP/watch.line" 50000 >"$TMP/watches.out" 2>&1 &
FLOOD=$!
timed_list "50000 watches on one connection"
wait "$FLOOD"
grep -qx "ok=50000" "$TMP/watches.out" || fail "50000 watches: $(cat "$TMP/watches.out")"
grown=$((($(rss) - before) / 1024))
[ "$grown" -lt 32 ] || fail "50000 watches on one connection grew parled by $grown MiB"
echo "50000 watches on one connection grew parled by $grown MiB"
[ -n "$sweep" ] || fail "no sweep id"

# ---- a client that pipelines and never reads does not keep parled alive ----
printf '{"op":"status"}\n' >"$TMP/status.line"
chmod 644 "$TMP/status.line"
attack "$alice" hold "$TMP/status.line" 200000 &
FLOOD=$!
sleep 1
ctl_as "$bob" list >/dev/null || fail "bob is not served while alice holds her replies"
t0=$(date +%s)
ctl_as "$carol" shutdown >/dev/null || fail "carol's shutdown"
wait_exit 20 || fail "parled still runs 20 s after shutdown, held by a client that does not read"
[ "$EXIT_STATUS" -eq 0 ] || fail "parled exited $EXIT_STATUS"
echo "parled exited $(($(date +%s) - t0)) s after shutdown with a client that never reads"
kill "$FLOOD" 2>/dev/null
FLOOD=
START_WAIT=120 start_daemon --group "$grp" --admin-group "$adm" # it reloads 1001 jobs
check_alive "a new parled on the same state dir"
stop_daemon
echo PASS
