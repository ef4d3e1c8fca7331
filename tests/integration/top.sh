#!/bin/bash
# parlectl top driven in tmux as a member (docs/monitoring.md): an 80x30 pane runs
# `parlectl top` as bob while alice's job runs and bob's waits for the CPU;
# what the pane shows is checked against `status --json` (the waiting job's
# reason, the running job, the counts), alice's training values are not
# shown to bob, the keys sort, filter to bob's jobs and quit; alice's job
# ends and the pane follows. Then the plain snapshot (not a terminal) fits
# 80 columns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
if ! command -v tmux >/dev/null; then
    echo "SKIP: needs tmux"
    exit 77
fi
TMUX_SOCK=
unset TMUX # a tmux of its own, even when the test runs inside one
trap 'rc=$?; [ -z "$TMUX_SOCK" ] || tmux -S "$TMUX_SOCK" kill-server 2>/dev/null; remove_users; (exit $rc); cleanup' EXIT
make_users tp
chmod 755 "$TMP"
start_daemon --group "$grp" --admin-group "$adm" --devices cpu

mlp_job "$TMP/long.json" 1000
chmod 644 "$TMP/long.json"
a=$(ctl_as "$alice" submit -q "$TMP/long.json") || fail "alice submits"
wait_steps "$a" 60
b=$(ctl_as "$bob" submit -q "$TMP/long.json") || fail "bob submits"
for _ in $(seq 100); do
    ctl status "$b" --json >"$TMP/b.json"
    [ -n "$(field "$TMP/b.json" waiting)" ] && [ "$(field "$TMP/b.json" waiting)" != null ] && break
    sleep 0.1
done
why=$(field "$TMP/b.json" waiting)
[ -n "$why" ] && [ "$why" != null ] || fail "$b does not say why it waits"

TMUX_SOCK=$TMP/tmux.sock
tmux -S "$TMUX_SOCK" new-session -d -s top -x 80 -y 30 \
    "setpriv --reuid=$bob --regid=$(id -g "$bob") --init-groups -- $PARLECTL --socket $SOCK top -d 0.5; sleep 30" ||
    fail "tmux new-session"

pane() { tmux -S "$TMUX_SOCK" capture-pane -p -t top >"$TMP/pane" || fail "capture-pane"; }
# until_pane WHAT REGEX...: capture until every extended regex matches a
# line of the pane, 30 s at most.
until_pane() {
    local what=$1 ok
    shift
    for _ in $(seq 60); do
        pane
        ok=1
        for re in "$@"; do grep -Eq -- "$re" "$TMP/pane" || { ok=0; break; }; done
        [ $ok = 1 ] && return 0
        sleep 0.5
    done
    fail "$what: the pane does not show /$re/:
$(cat "$TMP/pane")"
}

version=$(ctl status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["version"])')
# Job rows cut owners at 9 columns, and the waiting reason at the 80th
# (its column starts at the 48th).
al=${alice:0:9} bo=${bob:0:9}
why_cut=${why:0:33}
why_cut=${why_cut%"${why_cut##*[! ]}"}
until_pane "alice runs, bob waits" "^parled $version  up " "devices 0 free, 1 held  queue 1 \(0 held\)  running 1" \
    "^cpu +100% .* $a\$" "^$a +$al +sgd +\(not shown\) +- +- +-\$" \
    "^$b +$bo +sgd +queued +[0-9smh]+  " "^RUNNING 1 \(sort: id\)" "^QUEUED 1" \
    "^$alice +1 +0 " "^$bob +0 +1 " "^q quit  s sort \(id\)  m my jobs only"
# TOP_PANE_OUT=PREFIX keeps this picture and the one after alice's job
# ends in PREFIX.1 and PREFIX.2 (docs/monitoring.md shows them).
[ -z "${TOP_PANE_OUT:-}" ] || cp "$TMP/pane" "$TOP_PANE_OUT.1"
# The reason as status gives it, compared as a fixed string.
grep -F -- "$why_cut" "$TMP/pane" | grep -q "^$b " || fail "the pane does not give $b's reason as status does ($why_cut):
$(cat "$TMP/pane")"
grep -q "^RUNNING" "$TMP/pane" && [ "$(awk '{ if (length($0) > 80) n++ } END { print n + 0 }' "$TMP/pane")" = 0 ] ||
    fail "the pane has lines over 80 columns"

# Keys: s sorts by owner, m keeps bob's own jobs only.
tmux -S "$TMUX_SOCK" send-keys -t top s
until_pane "s" "^RUNNING 1 \(sort: owner\)" "s sort \(owner\)"
tmux -S "$TMUX_SOCK" send-keys -t top m
until_pane "m" "^RUNNING 0 \(sort: owner\)" "^QUEUED 1" "m everyone's jobs"
grep -q "^$a " "$TMP/pane" && fail "m still shows alice's $a"
grep -q "^$alice " "$TMP/pane" && fail "m still shows alice's use"
tmux -S "$TMUX_SOCK" send-keys -t top m

# alice's job ends: bob's runs, his own training values shown.
ctl_as "$alice" cancel "$a" >/dev/null || fail "alice cancels"
wait_state "$a" cancelled 30
wait_steps "$b" 60
ctl status --json >"$TMP/all.json"
until_pane "alice's job ended" "^$b +$bo +sgd +\[[#.]{10}\] +[0-9]+% +[0-9]+ " \
    "^jobs: 0 done, 0 failed, 1 cancelled, 0 timeout" "queue 0 \(0 held\)  running 1" "^QUEUED 0"
grep -q "^$a " "$TMP/pane" && fail "the ended $a is still listed"
[ -z "${TOP_PANE_OUT:-}" ] || cp "$TMP/pane" "$TOP_PANE_OUT.2"

tmux -S "$TMUX_SOCK" send-keys -t top q
for _ in $(seq 50); do
    pane
    grep -q "^RUNNING" "$TMP/pane" || break
    sleep 0.2
done
grep -q "^RUNNING" "$TMP/pane" && fail "q did not end top:
$(cat "$TMP/pane")"

# Not a terminal: one picture of at most 80 columns, the same jobs as status.
ctl_as "$bob" top -n 1 >"$TMP/snap" || fail "top -n 1"
grep -Eq "^$b +$bo +sgd" "$TMP/snap" || fail "the snapshot lacks $b: $(cat "$TMP/snap")"
[ "$(awk '{ if (length($0) > 80) n++ } END { print n + 0 }' "$TMP/snap")" = 0 ] ||
    fail "the snapshot has lines over 80 columns"
grep -q $'\033' "$TMP/snap" && fail "the snapshot holds escape sequences"
ctl_as "$bob" top --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["viewer"]["admin"] is False and r["jobs"]["cancelled"] == 1, r
' || fail "top --json"
ctl cancel "$b" >/dev/null
wait_state "$b" cancelled 30
stop_daemon
echo "ok"
