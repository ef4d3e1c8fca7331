#!/bin/sh
# Builds the libFuzzer harnesses with clang and runs each one for FUZZ_SECONDS
# (default 30) on its seed corpus; exits non-zero if any harness finds a crash,
# a leak, undefined behaviour or a hang. New inputs accumulate in
# BUILD_DIR/fuzz-corpus/<harness>, findings go to BUILD_DIR/fuzz-artifacts/.
#   usage: tests/fuzz/run_fuzz.sh [BUILD_DIR]     (default: build-fuzz)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-30}

if [ -f "$build/build.ninja" ]; then
    meson configure "$build" -Dfuzz=true >/dev/null
else
    CC=clang meson setup "$build" "$root" -Dfuzz=true -Dcuda=disabled -Dmpi=disabled \
        -Dbuildtype=debugoptimized >/dev/null
fi

# The seed inputs of a harness: job files for the job parser; for any other,
# the files in tests/fuzz/seeds/<harness>/ if there are some.
seeds_for() {
    case "$1" in
    fuzz_jobconfig) ls "$root"/configs/*.json ;;
    *) if [ -d "$root/tests/fuzz/seeds/$1" ]; then ls "$root/tests/fuzz/seeds/$1"/*; fi ;;
    esac
}

failed=""
for src in "$root"/tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    ninja -C "$build" "tests/fuzz/$name" >/dev/null
    corpus="$build/fuzz-corpus/$name"
    mkdir -p "$corpus" "$build/fuzz-artifacts"
    for seed in $(seeds_for "$name"); do
        cp "$seed" "$corpus/"
    done
    echo "run_fuzz: $name for ${seconds}s"
    if ! "$build/tests/fuzz/$name" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$build/fuzz-artifacts/$name-" "$corpus" 2>"$build/fuzz-$name.log"; then
        tail -n 40 "$build/fuzz-$name.log" >&2
        failed="$failed $name"
    else
        grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$build/fuzz-$name.log" || true
    fi
done
if [ -n "$failed" ]; then
    echo "run_fuzz: failed:$failed (inputs in $build/fuzz-artifacts/)" >&2
    exit 1
fi
echo "run_fuzz: no failures"
