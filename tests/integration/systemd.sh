#!/bin/bash
# parled under systemd, without systemd: a harness passes a bound, listening
# socket as fd 3 with LISTEN_PID/LISTEN_FDS (socket activation) and a
# NOTIFY_SOCKET (abstract) that must receive READY=1; parlectl then drives
# parled through the passed socket, which parled must not remove at exit.
# Then `systemd-analyze verify` on data/parled.{service,socket} where it exists.
# Then the units as `meson install` puts them, serving the group parle: the
# group made by systemd-sysusers from the installed sysusers.d entry, the
# socket made as parled.socket says and parled started by parled.service's
# ExecStart as written, in a mount namespace whose /run, /var/lib and
# /etc/group are the test's own; a member of the group runs parlectl with no
# --socket, one who is not is refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"

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
grep -q "^ExecStart=/.*/parled --socket /run/parled/parled.sock --state-dir /var/lib/parled --group parle --metrics-file /var/lib/prometheus/node-exporter/parle.prom$" \
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

# ---- the installed units serve the group parle ----
if [ "$(id -u)" != 0 ] || ! command -v systemd-sysusers >/dev/null || ! command -v useradd >/dev/null ||
    ! command -v setpriv >/dev/null || ! unshare -m true 2>/dev/null; then
    echo "SKIP: the installed units serving group parle (needs root, systemd-sysusers, useradd, setpriv, unshare -m)"
    echo "systemd: OK"
    exit 0
fi
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
make_users sy
meson install -C "$PARLE_BUILD_ROOT" --destdir "$TMP/root" --no-rebuild >"$TMP/install.log" 2>&1 ||
    fail "meson install: $(tail -n 20 "$TMP/install.log")"
prefix=$(meson introspect "$PARLE_BUILD_ROOT" --buildoptions |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
ROOT=$TMP/root$prefix
unit() { sed -n "s/^$2=//p" "$ROOT/lib/systemd/system/$1"; }
sysusers=$ROOT/lib/sysusers.d/parle.conf
[ -f "$sysusers" ] || fail "no sysusers.d entry installed in lib/sysusers.d"
group=$(unit parled.socket SocketGroup)
listen=$(unit parled.socket ListenStream)
[ "$group" = parle ] || fail "parled.socket: SocketGroup=$group"
read -r -a exec_start <<<"$(unit parled.service ExecStart)"
[ "${exec_start[0]}" = "$prefix/bin/parled" ] || fail "ExecStart runs ${exec_start[0]}"
exec_start[0]=$ROOT/bin/parled
echo " ${exec_start[*]} " | grep -q " --group $group " || fail "ExecStart lacks --group $group"
echo " ${exec_start[*]} " | grep -q " --socket $listen " || fail "ExecStart serves another socket"
# The group as systemd-sysusers makes it on this machine (from a copy of its
# files), $alice added to it as `usermod -aG parle` would.
mkdir -p "$TMP/sysroot/etc" "$TMP/unit" "$TMP/xdg"
cp /etc/passwd /etc/group "$TMP/sysroot/etc/"
systemd-sysusers --root="$TMP/sysroot" "$sysusers" >"$TMP/sysusers.log" 2>&1 ||
    fail "systemd-sysusers: $(cat "$TMP/sysusers.log")"
grep -q "^$group:" "$TMP/sysroot/etc/group" || fail "systemd-sysusers made no group $group"
sed -i "/^$group:/{s/:\$/:$alice/;t;s/\$/,$alice/}" "$TMP/sysroot/etc/group"

# In the namespace: systemd's part (RuntimeDirectory=, StateDirectory=, the
# socket unit), then the users' commands, as the installed parlectl finds
# the socket by itself.
in_namespace() {
    DAEMON_PID=
    trap '[ -z "$DAEMON_PID" ] || kill -KILL "$DAEMON_PID" 2>/dev/null; wait' EXIT
    mount -t tmpfs -o mode=0755 tmpfs /run && mount -t tmpfs -o mode=0755 tmpfs /var/lib &&
        mount --bind "$TMP/sysroot/etc/group" /etc/group || fail "mounts"
    mkdir -m "$(unit parled.socket DirectoryMode)" "$(dirname "$listen")"
    mkdir -m 0755 "/var/lib/$(unit parled.service StateDirectory)"
    python3 "$(dirname "$0")/activate.py" --unit "$listen" "$(unit parled.socket SocketMode)" \
        "$group" "$TMP/unit" "${exec_start[@]}" >"$TMP/unit/harness.out" 2>&1 &
    HARNESS=$!
    for _ in $(seq 300); do [ -s "$TMP/unit/notified" ] && break; sleep 0.1; done
    DAEMON_PID=$(cat "$TMP/unit/parled.pid")
    grep -q "^READY=1" "$TMP/unit/notified" || fail "parled was not ready: $(cat "$TMP/unit/parled.err")"
    local ctl=$ROOT/bin/parlectl
    as "$alice" env -u XDG_RUNTIME_DIR -u PARLE_SOCKET "$ctl" list >"$TMP/unit/out" 2>&1 ||
        fail "a member's parlectl list, no --socket: $(cat "$TMP/unit/out")"
    as "$alice" env -u PARLE_SOCKET XDG_RUNTIME_DIR="$TMP/xdg" "$ctl" version >"$TMP/unit/out" 2>&1 ||
        fail "a member's parlectl, nothing in \$XDG_RUNTIME_DIR: $(cat "$TMP/unit/out")"
    as "$eve" env -u XDG_RUNTIME_DIR -u PARLE_SOCKET "$ctl" list >"$TMP/unit/out" 2>&1 &&
        fail "$eve, outside group $group, was served"
    grep -qF "permission denied: parled serves the members of group $group and $eve is not one: an admin adds you with \`usermod -aG $group $eve\`, then you log in again" \
        "$TMP/unit/out" || fail "$eve's refusal says not why nor the fix: $(cat "$TMP/unit/out")"
    # The unit's --metrics-file: node_exporter's textfile folder, written
    # once it exists (prometheus-node-exporter installed after parled).
    local prom
    prom=$(echo " ${exec_start[*]} " | sed -n 's/.* --metrics-file \([^ ]*\) .*/\1/p')
    [ "$prom" = /var/lib/prometheus/node-exporter/parle.prom ] || fail "the unit's --metrics-file: $prom"
    mkdir -p "$(dirname "$prom")"
    for _ in $(seq 150); do [ -s "$prom" ] && break; sleep 0.1; done
    grep -q "^parle_jobs{state=\"queued\"} 0$" "$prom" 2>/dev/null ||
        fail "no metrics in $prom within 15 s of its folder: $(tail -n 3 "$TMP/unit/parled.err")"
    env -u XDG_RUNTIME_DIR -u PARLE_SOCKET "$ctl" shutdown >/dev/null || fail "root's parlectl shutdown"
    wait "$HARNESS" || fail "parled exited $? after shutdown"
    DAEMON_PID=
    # Nothing listens now: the advice is systemd's, not a parled started by hand.
    as "$alice" env -u XDG_RUNTIME_DIR -u PARLE_SOCKET "$ctl" list >"$TMP/unit/out" 2>&1 &&
        fail "parlectl list with parled stopped"
    grep -qF "parled is not running on $listen, the socket of the installed systemd units: an admin starts it with \`systemctl enable --now parled.socket parled.service\`" \
        "$TMP/unit/out" || fail "the advice with parled stopped: $(cat "$TMP/unit/out")"
}
export -f in_namespace unit as fail
export TMP ROOT alice eve group listen
unshare -m --propagation private bash -c "$(declare -p exec_start); set -u; in_namespace" "$0" ||
    fail "the installed units, as a member of $group"
echo "installed units: a member of $group served with no --socket, one outside refused"
echo "systemd: OK"
