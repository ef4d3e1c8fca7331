#!/bin/bash
# Many clients at once, a client that leaves mid-watch, and peer credentials:
# a uid that is not allowed gets one error line and is closed.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/long.json" 500
id=$(ctl submit "$TMP/long.json" -q) || fail "submit"
wait_steps "$id" 60

# Watchers that disconnect mid-watch are cleaned up (abruptly, after 1-3 lines).
for n in 1 2 3 1 2 3; do
    printf '{"op":"watch","id":"%s"}\n' "$id" | raw --lines "$n" >/dev/null ||
        fail "watch then disconnect"
done
sleep 0.5
check_alive "clients leaving mid-watch"

# 100 clients connected at once, each sending two requests.
raw --many 100 || fail "100 clients at once"
check_alive "100 clients"
ctl cancel "$id" >/dev/null

if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
    echo "peer credential checks need root and a 'nobody' user: skipped"
    stop_daemon
    echo PASS
    exit 0
fi
# The socket file is 0660 in a 0700 dir; open the path so that only the
# SO_PEERCRED check stands between nobody and the daemon.
chmod 0711 "$TMP"
chmod 0666 "$SOCK"
printf '{"op":"version"}\n' | raw --user nobody >"$TMP/reply" || fail "nobody: rawclient exit $?"
[ "$(wc -l <"$TMP/reply")" = 1 ] || fail "nobody: expected exactly one line, got: $(cat "$TMP/reply")"
grep -q '^{"ok":false,"error":{"code":"forbidden","message":"uid [0-9]* may not use parled' "$TMP/reply" ||
    fail "nobody: $(cat "$TMP/reply")"
check_alive "a refused uid"
stop_daemon

# With --group, members of the group are let in.
group=$(id -gn nobody)
start_daemon --group "$group"
chmod 0711 "$TMP"
[ "$(stat -c %G "$SOCK")" = "$group" ] || fail "--group did not chown the socket"
[ "$(stat -c %a "$SOCK")" = 660 ] || fail "the socket mode is $(stat -c %a "$SOCK"), not 660"
printf '{"op":"version"}\n' | raw --user nobody >"$TMP/reply" || fail "group member: exit $?"
grep -q '^{"ok":true' "$TMP/reply" || fail "a member of --group was refused: $(cat "$TMP/reply")"
stop_daemon
echo PASS
