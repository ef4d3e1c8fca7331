#!/bin/bash
# parled under systemd, without systemd: a harness passes a bound, listening
# socket as fd 3 with LISTEN_PID/LISTEN_FDS (socket activation) and a
# NOTIFY_SOCKET (abstract) that must receive READY=1; parlectl then drives
# parled through the passed socket, which parled must not remove at exit.
# Then `systemd-analyze verify` on data/parled.{service,socket} where it exists.
. "$(dirname "$0")/lib.sh"

mlp_job "$TMP/quick.json" 1
ACT=$TMP/act.sock
python3 "$(dirname "$0")/activate.py" "$PARLED" "$ACT" "$STATE" "$TMP" >"$TMP/harness.out" 2>&1 &
HARNESS=$!
for _ in $(seq 300); do [ -s "$TMP/notified" ] && break; sleep 0.1; done
[ -s "$TMP/notified" ] || fail "the harness saw no notification: $(cat "$TMP/harness.out")"
DAEMON_PID=$(cat "$TMP/parled.pid")
[ "$(head -n 1 "$TMP/notified")" = "READY=1" ] ||
    fail "NOTIFY_SOCKET got '$(head -n 1 "$TMP/notified")', not READY=1"
grep -q "replaced the stale socket" "$TMP/parled.err" && fail "parled re-bound the passed socket"

c() { "$PARLECTL" --socket "$ACT" "$@"; }
c version | grep -q "^parled " || fail "parlectl through the passed socket"
id=$(c submit "$TMP/quick.json" -q --wait) || fail "a job through the passed socket"
c status "$id" --json | grep -q '"state":[[:space:]]*"done"' || fail "job $id not done"
c shutdown >/dev/null || fail "shutdown"
wait "$HARNESS"; rc=$?
DAEMON_PID=
[ "$rc" = 0 ] || fail "parled exited $rc after shutdown"
[ -S "$ACT" ] || fail "parled removed the socket systemd passed it"

# Without LISTEN_PID matching, LISTEN_FDS is ignored: parled binds --socket itself.
LISTEN_PID=1 LISTEN_FDS=1 start_daemon
ctl version >/dev/null || fail "parled ignoring a foreign LISTEN_PID"
stop_daemon

# The units: @bindir@ substituted; verify them (ExecStart pointed at this build's parled).
units=${PARLE_BUILD_ROOT:-}/data
[ -f "$units/parled.service" ] || fail "no data/parled.service in the build dir"
grep -q "^ExecStart=/.*/parled --socket /run/parled/parled.sock --state-dir /var/lib/parled$" \
    "$units/parled.service" || fail "ExecStart: $(grep ExecStart "$units/parled.service")"
grep -q "^Type=notify$" "$units/parled.service" || fail "Type=notify"
grep -q "^ListenStream=/run/parled/parled.sock$" "$PARLE_SOURCE_ROOT/data/parled.socket" ||
    fail "ListenStream"
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$TMP/units"
    sed "s|^ExecStart=[^ ]*|ExecStart=$PARLED|" "$units/parled.service" >"$TMP/units/parled.service"
    cp "$PARLE_SOURCE_ROOT/data/parled.socket" "$TMP/units/"
    SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$TMP/units/parled.socket" \
        "$TMP/units/parled.service" >"$TMP/verify" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$TMP/verify")"
    echo "systemd-analyze verify: OK"
else
    echo "SKIP: systemd-analyze verify (no systemd-analyze here)"
fi
echo "systemd: OK"
