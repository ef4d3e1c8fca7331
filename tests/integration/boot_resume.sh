#!/bin/bash
# A machine that reboots while a job runs: parled.service is enabled (the
# README enables it with the socket) and wanted by multi-user.target, after
# the NVIDIA persistence daemon and time-sync.target, so it starts at boot and
# the job resumes with no client connecting. The boot is systemd's as the
# systemd test's harness plays it (activate.py: the socket passed as fd 3, a
# NOTIFY_SOCKET); the job is watched through its files only, never the socket.
. "$(dirname "$0")/lib.sh"
unit=$PARLE_SOURCE_ROOT/data/parled.service.in
grep -qx "WantedBy=multi-user.target" "$unit" || fail "parled.service is not wanted by multi-user.target"
after=" $(sed -n 's/^After=//p' "$unit" | tr '\n' ' ') "
for u in parled.socket nvidia-persistenced.service time-sync.target; do
    [[ $after == *" $u "* ]] || fail "parled.service is not After=$u (After=$after)"
done
grep -qx "systemctl enable --now parled.socket parled.service" "$PARLE_SOURCE_ROOT/README.md" ||
    fail "the README does not enable parled.service (a reboot would wait for a client)"

ACT=$TMP/act.sock
HARNESS=
boot() { # as systemd at boot: the socket unit, then parled.service
    rm -f "$TMP/notified" "$ACT"
    python3 "$(dirname "$0")/activate.py" "$PARLED" "$ACT" "$STATE" "$TMP" >>"$TMP/harness.out" 2>&1 &
    HARNESS=$!
    for _ in $(seq 300); do [ -s "$TMP/notified" ] && break; sleep 0.1; done
    grep -q "^READY=1" "$TMP/notified" || fail "parled was not ready: $(tail -n 5 "$TMP/parled.err")"
    DAEMON_PID=$(cat "$TMP/parled.pid")
}
shutdown() { # as systemd stopping the service: SIGTERM, the jobs checkpoint
    kill -TERM "$DAEMON_PID"
    wait "$HARNESS" || fail "parled exited $? after SIGTERM"
    DAEMON_PID=
}
status() { field "$STATE/jobs/$id/status.json" state; }
steps() { grep -c '"event":"progress"' "$STATE/jobs/$id/metrics.jsonl" 2>/dev/null || echo 0; }

boot
SOCK=$ACT
mlp_job "$TMP/long.json" 500
id=$(ctl submit "$TMP/long.json" -q) || fail "submit"
wait_steps "$id" 60
shutdown
before=$(steps)

logged=$(wc -l <"$TMP/parled.err")
boot # and no client: only the files are read from here on
for _ in $(seq 600); do
    [ "$(status)" = running ] && [ "$(steps)" -gt "$before" ] && break
    sleep 0.1
done
[ "$(status)" = running ] && [ "$(steps)" -gt "$before" ] ||
    fail "$id did not resume after the boot: state $(status), $(steps) progress lines ($before before)"
tail -n +$((logged + 1)) "$TMP/parled.err" | grep -E "debug: uid [0-9]+: " &&
    fail "a client's request reached parled after the boot"
shutdown
echo "boot_resume: $id running at shutdown resumed at boot with no client ($before -> $(steps) progress lines): OK"
