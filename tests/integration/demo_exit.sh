#!/bin/bash
# scripts/demo.sh (the README's first command) exits 0 after a job that ended
# done, so `scripts/demo.sh && ...` works: its exit trap once failed under
# set -e once the daemon was gone, and the script exited 1. Run on a short
# job with the build under test.
. "$(dirname "$0")/lib.sh"
mlp_job "$TMP/job.json" 1
build=$(dirname "$(dirname "$PARLED")")
BUILD=$build JOB=$TMP/job.json TMPDIR=$TMP "$PARLE_SOURCE_ROOT/scripts/demo.sh" >"$TMP/demo.out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "demo.sh exited $rc: $(tail -n 5 "$TMP/demo.out")"
grep -q "^final test error: [0-9.]*%$" "$TMP/demo.out" || fail "demo.sh printed no final error: $(cat "$TMP/demo.out")"
echo PASS
