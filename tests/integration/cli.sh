#!/bin/bash
# parlectl itself: help, usage errors, --set, output forms, the message when
# parled is not running.
. "$(dirname "$0")/lib.sh"

out=$(ctl version 2>&1) && fail "version without a daemon succeeded"
[ "$out" = "parlectl: parled is not running on $SOCK: start it with \`parled --socket $SOCK &\`" ] ||
    fail "not-running message: $out"
PARLE_SOCKET=$SOCK "$PARLECTL" list 2>&1 | grep -q "not running on $SOCK" || fail "PARLE_SOCKET ignored"

"$PARLECTL" --help | grep -q "^usage: parlectl" || fail "--help"
for c in submit status list watch logs cancel resume wait export devices version shutdown; do
    ctl "$c" --help | grep -q "^usage: parlectl $c" || fail "$c --help"
done
ctl bogus 2>/dev/null; [ $? = 2 ] || fail "an unknown command must exit 2"
ctl watch 2>/dev/null; [ $? = 2 ] || fail "a missing argument must exit 2"
ctl list --frob 2>/dev/null; [ $? = 2 ] || fail "an unknown option must exit 2"
"$PARLED" --help | grep -q -- "--state-dir" || fail "parled --help"
"$PARLED" --version | grep -q "^parled " || fail "parled --version"
"$PARLED" --log-level loud 2>/dev/null; [ $? = 2 ] || fail "parled --log-level loud must exit 2"

start_daemon
ctl version | grep -q "^parled .* (protocol 1)$" || fail "version output"
ctl version --json | grep -q '"protocol"' || fail "version --json"
ctl devices | grep -q "^cpu" || fail "devices"
ctl status | grep -q "^parled .* on $SOCK" || fail "status without an id"

# --set: values are JSON when they parse, else strings; intermediate objects are created.
mlp_job "$TMP/job.json" 1
id=$(ctl submit "$TMP/job.json" -q --set optim.lr=0.02 --set name=cli-set \
    --set eval.bn=average --set 'data.sampling=replacement') || fail "submit with --set"
grep -q '"lr":[[:space:]]*0.02' "$STATE/jobs/$id/job.json" || fail "--set optim.lr"
grep -q '"name":[[:space:]]*"cli-set"' "$STATE/jobs/$id/job.json" || fail "--set name"
grep -q '"bn":[[:space:]]*"average"' "$STATE/jobs/$id/job.json" || fail "--set created eval.bn"
out=$(ctl submit "$TMP/job.json" --set name.x=1 2>&1) && fail "--set through a string succeeded"
echo "$out" | grep -q "not an object" || fail "--set name.x message: $out"
out=$(ctl submit "$TMP/job.json" --set epochs=true 2>&1) && fail "epochs=true was accepted"
echo "$out" | grep -q "epochs" || fail "invalid job message lacks the path: $out"

# submit --watch on a non-tty prints plain lines and exits like wait.
ctl submit "$TMP/job.json" --watch >"$TMP/watch.txt" || fail "submit --watch exited non-zero"
grep -q "epoch 1/1 \[" "$TMP/watch.txt" || fail "no progress line from submit --watch"
grep -q "test error" "$TMP/watch.txt" || fail "no eval line from submit --watch"
grep -q $'\r' "$TMP/watch.txt" && fail "carriage returns when stdout is not a tty"
ctl watch "$id" --json | tail -n 1 | grep -q '"event":"end"' || fail "watch --json end line"

ctl logs "$id" -f >"$TMP/logs.txt" || fail "logs -f"
grep -q "done:" "$TMP/logs.txt" || fail "logs -f did not reach the end"
ctl list --json | grep -q "\"$id\"" || fail "list --json"
ctl list | grep -q "^$id .*done" || fail "list"
ctl status nope 2>&1 | grep -q "no job nope" || fail "status of an unknown job"
ctl export "$id" "$TMP/out.safetensors" | grep -q "^exported $id (epoch 1 of 1, test error .*) to $TMP/out.safetensors$" ||
    fail "export output"
[ -s "$TMP/out.safetensors" ] || fail "export wrote nothing"
ls -A "$TMP" | grep -Eq "out.safetensors.(tmp|part)" && fail "export left its temporary file"
ctl export nope "$TMP/x" 2>&1 | grep -q "no job nope" || fail "export of an unknown job"
ctl export "$id" /nonexistent/dir/x 2>&1 | grep -q "cannot create a temporary in /nonexistent/dir" ||
    fail "export into a missing directory"
ctl cancel "$id" 2>&1 | grep -q "already ended" || fail "cancelling a done job"
ctl resume "$id" 2>&1 | grep -q "is done: only a failed or timed-out job" || fail "resuming a done job"
ctl resume "$id" --frob 2>/dev/null; [ $? = 2 ] || fail "resume --frob must exit 2"
ctl shutdown | grep -q "shutting down" || fail "shutdown"
wait_exit 30 || fail "parled did not exit after shutdown"
[ "$EXIT_STATUS" = 0 ] || fail "parled exited $EXIT_STATUS after shutdown"
[ ! -e "$SOCK" ] || fail "the socket was left behind"
echo PASS
