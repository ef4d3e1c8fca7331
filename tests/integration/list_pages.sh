#!/bin/bash
# `list` a page at a time (docs/protocol.md, "list"): the newest page by
# default, in submission order, with the total and the id to ask the next,
# older page with (null at the end); a state filtered by parled; parlectl
# list --limit N and --all (every page, oldest first).
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/long.json" 1000
run=$(ctl submit -q "$TMP/long.json") || fail "submit the running job"
wait_state "$run" running 30
ids=$run
for _ in 1 2 3 4; do
    id=$(ctl submit -q "$TMP/long.json") || fail "submit"
    ids="$ids $id"
done
set -- $ids # j0001 (running) .. j0005 (queued)
ctl hold "$5" >/dev/null || fail "hold $5"

# page REQUEST-FIELDS: the reply's ids, total and next_before on one line.
page() {
    echo "{\"op\":\"list\"$1}" | raw --lines 1 | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["ok"], r
print(" ".join(j["id"] for j in r["jobs"]), "|", r["total"], "|", r["next_before"])'
}
[ "$(page ',"limit":2')" = "$4 $5 | 5 | $4" ] || fail "the newest page: $(page ',"limit":2')"
[ "$(page ",\"limit\":2,\"before\":\"$4\"")" = "$2 $3 | 5 | $2" ] ||
    fail "the page before $4: $(page ",\"limit\":2,\"before\":\"$4\"")"
[ "$(page ",\"limit\":2,\"before\":\"$2\"")" = "$1 | 5 | None" ] ||
    fail "the last page: $(page ",\"limit\":2,\"before\":\"$2\"")"
[ "$(page '')" = "$* | 5 | None" ] || fail "the default page: $(page '')"
[ "$(page ',"state":"queued"')" = "$2 $3 $4 | 3 | None" ] ||
    fail "queued only: $(page ',"state":"queued"')"
[ "$(page ',"state":"held","limit":1')" = "$5 | 1 | None" ] || fail "held only"
out=$(echo '{"op":"list","limit":1001}' | raw --lines 1)
echo "$out" | grep -q '"code":"bad_request".*limit: must be a whole number of jobs in 1..1000' ||
    fail "limit 1001: $out"

ctl list --limit 2 >"$TMP/l2"
[ "$(awk 'NR > 1 && /^j/ {print $1}' "$TMP/l2" | tr '\n' ' ')" = "$4 $5 " ] ||
    fail "list --limit 2: $(cat "$TMP/l2")"
grep -q "the newest 2 of 5 jobs: --all lists every one" "$TMP/l2" || fail "no hint: $(cat "$TMP/l2")"
ctl list --all --limit 2 >"$TMP/all"
[ "$(awk 'NR > 1 && /^j/ {print $1}' "$TMP/all" | tr '\n' ' ')" = "$* " ] ||
    fail "list --all: $(cat "$TMP/all")"
ctl list --all --limit 2 --state queued --json | grep -c '"id":' | grep -qx 3 ||
    fail "list --all --state queued --json"
out=$(ctl list --limit 0 2>&1) && fail "--limit 0 taken: $out"
echo "$out" | grep -q -- "--limit: expected a number of jobs in 1..1000" || fail "no clear error: $out"
echo PASS
