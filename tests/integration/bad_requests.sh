#!/bin/bash
# Every kind of bad request gets a JSON error line, and parled goes on serving.
. "$(dirname "$0")/lib.sh"
start_daemon

# expect_error WHAT CODE TEXT: stdin is sent raw; the first reply must be an
# error with CODE whose message contains TEXT. (Fed by < <(...), not a pipe:
# in a pipe it would run in a subshell and its fail could not end the test.)
expect_error() {
    raw >"$TMP/reply" || fail "$1: no reply (rawclient exit $?)"
    head -n 1 "$TMP/reply" | grep -q "^{\"ok\":false,\"error\":{\"code\":\"$2\",\"message\":\".*$3" ||
        fail "$1: expected $2 with '$3', got: $(head -c 300 "$TMP/reply")"
    check_alive "$1"
}

expect_error "truncated JSON" bad_json "not valid JSON" < <(printf '{"op":"version"\n')
expect_error "not JSON" bad_json "not valid JSON" < <(printf 'hello parled\n')
expect_error "text after the value" bad_json "after its JSON" < <(printf '{"op":"version"} {}\n')
expect_error "a NUL byte" bad_json "NUL" < <(printf '{"op":"version"}\0\n')
expect_error "an array" bad_request "must be a JSON object" < <(printf '[1,2]\n')
expect_error "a string" bad_request "must be a JSON object" < <(printf '"version"\n')
expect_error "no op" bad_request "op: missing" < <(printf '{}\n')
expect_error "op not a string" bad_request "op: must be a string" < <(printf '{"op":5}\n')
expect_error "unknown op" unknown_op 'unknown op \\"launch\\"' < <(printf '{"op":"launch"}\n')
expect_error "unknown field" bad_request "x: unknown field" < <(printf '{"op":"list","x":1}\n')
expect_error "watch without id" bad_request "id: missing" < <(printf '{"op":"watch"}\n')
expect_error "id not a string" bad_request "id: must be a string" < <(printf '{"op":"cancel","id":7}\n')
expect_error "id with a path" bad_request "id: not a job id" < <(printf '{"op":"logs","id":"../../etc"}\n')
expect_error "follow not a bool" bad_request "follow: must be true or false" < <(printf '{"op":"logs","id":"j0001","follow":"yes"}\n')
expect_error "submit without job" bad_request "job: missing" < <(printf '{"op":"submit"}\n')
expect_error "job not an object" bad_request "job: must be an object" < <(printf '{"op":"submit","job":[]}\n')
expect_error "export to a path" bad_request "path: unknown field" < <(printf '{"op":"export","id":"j0001","path":"/tmp/x"}\n')
expect_error "export of an unknown job" not_found "no job j0001" < <(printf '{"op":"export","id":"j0001"}\n')
expect_error "unknown job" not_found "no job j9999" < <(printf '{"op":"status","id":"j9999"}\n')

# A line over the 1 MiB limit: an error, then parled closes the connection
# (rawclient reads until EOF, so a connection left open would time out).
expect_error "a line over the limit" line_too_long "longer than 1048576" < <(head -c 1100000 /dev/zero | tr '\0' 'a')
[ "$(wc -l <"$TMP/reply")" = 1 ] || fail "more than one reply to an over-long line"
# Just under the limit is a line like any other.
expect_error "a long line under the limit" bad_request "pad: unknown field" \
    < <(printf '{"op":"version","pad":"'; head -c 1000000 /dev/zero | tr '\0' 'b'; printf '"}\n')

# Binary garbage: every line gets an error reply, none is ok.
head -c 65536 /dev/urandom >"$TMP/garbage"
raw <"$TMP/garbage" >"$TMP/reply" || fail "garbage: rawclient exit $?"
grep -q '"ok":true' "$TMP/reply" && fail "garbage got an ok reply"
[ -s "$TMP/reply" ] || fail "garbage got no reply"
grep -qv '^{"ok":false,"error":{"code":"\(bad_json\|bad_request\|line_too_long\)"' "$TMP/reply" &&
    fail "garbage got a line that is not an error: $(grep -v '"ok":false' "$TMP/reply" | head -c 200)"
check_alive "binary garbage"

# Empty lines are skipped; pipelined requests are answered in order.
printf '\n\r\n{"op":"version"}\n{"op":"list"}\n' | raw >"$TMP/reply"
[ "$(wc -l <"$TMP/reply")" = 2 ] || fail "pipelined: $(cat "$TMP/reply")"
head -n 1 "$TMP/reply" | grep -q '"version"' || fail "pipelined: version first"
tail -n 1 "$TMP/reply" | grep -q '"jobs"' || fail "pipelined: list second"
stop_daemon
echo PASS
