#!/bin/sh
# The main job: build parle, start a fresh parled on a socket and state dir
# under a temporary directory, submit a LeNet job on Fashion-MNIST, watch it to
# the end, print the master's final test error and stop the daemon.
#   JOB=configs/other.json scripts/demo.sh    runs another job file
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
JOB=${JOB:-configs/lenet-fmnist-parle.json}
if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" -Dbuildtype=release >/dev/null
fi
ninja -C "$BUILD" daemon/parled client/parlectl >/dev/null

tmp=$(mktemp -d "${TMPDIR:-/tmp}/parle-demo.XXXXXX")
export PARLE_SOCKET="$tmp/parled.sock"
"$BUILD/daemon/parled" --socket "$PARLE_SOCKET" --state-dir "$tmp/state" >"$tmp/parled.log" 2>&1 &
daemon=$!
# Under set -e a failing command in the trap would become the exit status:
# the daemon is normally gone by then, so each step may fail harmlessly.
cleanup() {
    kill "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
i=0
until grep -q "ready" "$tmp/parled.log"; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$daemon" 2>/dev/null; then
        echo "parled did not start:" >&2
        cat "$tmp/parled.log" >&2
        exit 1
    fi
    sleep 0.1
done
ctl="$BUILD/client/parlectl"
id=$("$ctl" submit -q "$JOB")
echo "submitted $JOB as job $id (daemon log: $tmp/parled.log)"
"$ctl" watch "$id" || true
state=0
"$ctl" wait "$id" || state=$?
"$ctl" status "$id" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
if s.get("state") != "done":
    print("job %s ended %s: %s" % (s.get("id"), s.get("state"), s.get("error", "")))
else:
    print("final test error: %.2f%%" % (100 * s["test_error"]))
'
"$ctl" shutdown >/dev/null
wait "$daemon" 2>/dev/null || true
exit $state
