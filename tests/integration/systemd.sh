#!/bin/bash
# parled under systemd, without systemd: a harness passes a bound, listening
# socket as fd 3 with LISTEN_PID/LISTEN_FDS (socket activation) and a
# NOTIFY_SOCKET (abstract) that must receive READY=1; parlectl then drives
# parled through the passed socket, which parled must not remove at exit.
# Then `systemd-analyze verify` on data/parled.{service,socket} where it exists.
. "$(dirname "$0")/lib.sh"

mlp_job "$TMP/quick.json" 1
ACT=$TMP/act.sock
python3 - "$PARLED" "$ACT" "$STATE" "$TMP" <<'PY' >"$TMP/harness.out" 2>&1 &
import os, socket, subprocess, sys
parled, path, state, tmp = sys.argv[1:]
lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
lsock.bind(path)
lsock.listen(16)
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
name = "@parle-notify-%d" % os.getpid()
notify.bind("\0" + name[1:])
notify.settimeout(30)
env = dict(os.environ, NOTIFY_SOCKET=name, LISTEN_FDS="1", PARLED=parled)
def child():
    if lsock.fileno() != 3:
        os.dup2(lsock.fileno(), 3)
    os.set_inheritable(3, True)  # no FD_CLOEXEC
# LISTEN_PID must be parled's own pid: sh sets it to $$ and execs parled.
p = subprocess.Popen(["sh", "-c", 'export LISTEN_PID=$$; exec "$PARLED" --socket "$1" --state-dir "$2" '
                      '--log-level debug', "sh", path, state],
                     env=env, preexec_fn=child, close_fds=False,
                     stdout=open(tmp + "/parled.out", "w"), stderr=open(tmp + "/parled.err", "w"))
open(tmp + "/parled.pid", "w").write("%d\n" % p.pid)
lsock.close()
try:
    msg = notify.recv(4096).decode()
except socket.timeout:
    msg = "(nothing within 30 s)"
print("notify:", msg, flush=True)
open(tmp + "/notified", "w").write(msg)
sys.exit(p.wait())
PY
HARNESS=$!
for _ in $(seq 300); do [ -e "$TMP/notified" ] && break; sleep 0.1; done
[ -e "$TMP/notified" ] || fail "the harness saw no notification: $(cat "$TMP/harness.out")"
DAEMON_PID=$(cat "$TMP/parled.pid")
[ "$(cat "$TMP/notified")" = "READY=1" ] || fail "NOTIFY_SOCKET got '$(cat "$TMP/notified")', not READY=1"
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
