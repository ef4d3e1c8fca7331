#!/bin/sh
# Builds parle the ways CI does and runs every test suite:
#   release (-Werror, CUDA when nvcc is found): unit, threads, integration, gpu, learning
#   AddressSanitizer + UndefinedBehaviorSanitizer: unit, threads, integration
#   ThreadSanitizer: threads
# The sanitizer builds are optimised (-O2 -g, as the sanitizers' authors
# advise): at -O0 the numerics and MPI tests took three to four times as long.
#   libFuzzer (clang): the request parser and the job-file validator, FUZZ_SECONDS each
# Ends with one line: "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
OUT=${PARLE_TEST_BUILD:-build-test}
JOBS=${JOBS:-$(nproc)}
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=1"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
status=0
logs=""
broken=0      # builds that failed: each counts as one failed test
mkdir -p "$OUT"

step() { echo "== $*"; }

# setup DIR ARGS...: configure (or reconfigure) a build directory and build it.
build() {
    dir=$1; shift
    if [ -d "$dir" ]; then
        meson setup --reconfigure "$dir" "$@" >"$dir.setup.log" 2>&1
    else
        meson setup "$dir" "$@" >"$dir.setup.log" 2>&1
    fi || { echo "meson setup $dir failed:"; tail -30 "$dir.setup.log"; return 1; }
    ninja -C "$dir" -j "$JOBS" >"$dir.build.log" 2>&1 || {
        echo "build $dir failed:"; grep -E "error|warning" "$dir.build.log" | head -40
        tail -20 "$dir.build.log"; return 1; }
}

# run DIR PROCS SUITES...: run the given suites' tests PROCS at a time (one
# marked is_parallel: false runs alone) and remember the log
# (meson-logs/testlog-SUITE-....json).
run() {
    dir=$1; procs=$2; shift 2
    args=""
    base=testlog
    for s in "$@"; do args="$args --suite $s"; base="$base-$s"; done
    # shellcheck disable=SC2086
    meson test -C "$dir" $args --print-errorlogs --num-processes "$procs" --logbase "$base" ||
        status=1
    logs="$logs $dir/meson-logs/$base.json"
}

step "release build (-Werror)"
if build "$OUT/release" -Dwerror=true -Dbuildtype=release; then
    # The integration tests mostly wait on their daemons: two at a time; the
    # others take every core: one at a time.
    run "$OUT/release" 1 unit threads gpu learning
    run "$OUT/release" 2 integration
else
    status=1; broken=$((broken + 1)); echo "FAILED: release build" >&2
fi

step "AddressSanitizer + UndefinedBehaviorSanitizer build"
if build "$OUT/asan" -Dwerror=true -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
        -Dcuda=disabled -Dlearning_tests=false; then
    run "$OUT/asan" 1 unit threads
    run "$OUT/asan" 2 integration
else
    status=1; broken=$((broken + 1)); echo "FAILED: asan build" >&2
fi

step "ThreadSanitizer build"
if build "$OUT/tsan" -Dwerror=true -Dbuildtype=debugoptimized -Db_sanitize=thread -Dcuda=disabled \
        -Dlearning_tests=false; then
    OMP_NUM_THREADS=1 run "$OUT/tsan" 1 threads
else
    status=1; broken=$((broken + 1)); echo "FAILED: tsan build" >&2
fi

fuzz_result=""
if [ -x tests/fuzz/run_fuzz.sh ] && command -v clang >/dev/null 2>&1; then
    step "libFuzzer harnesses (${FUZZ_SECONDS:=20} s each)"
    if FUZZ_SECONDS=$FUZZ_SECONDS tests/fuzz/run_fuzz.sh "$PWD/$OUT/fuzz"; then
        fuzz_result=pass
    else
        fuzz_result=fail; status=1
    fi
fi

# shellcheck disable=SC2086
python3 - "$fuzz_result" "$broken" $logs <<'PY'
import json, sys
fuzz, broken, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
passed = skipped = 0
failed = broken
for p in paths:
    try:
        lines = open(p).read().splitlines()
    except OSError:
        failed += 1
        print(f"missing test log {p}")
        continue
    for line in lines:
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
if fuzz == "pass":
    passed += 1
elif fuzz == "fail":
    failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
