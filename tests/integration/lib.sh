# Shared by the integration tests (sourced): a temporary parled and helpers.
# Needs PARLED, PARLECTL, PARLE_TRAIN, RAWCLIENT and PARLE_SOURCE_ROOT in the
# environment.
set -u
# Under -Db_sanitize, a UBSan report must fail the test, not scroll by.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/parle-it.XXXXXX")
SOCK=$TMP/parled.sock
STATE=$TMP/state
DAEMON_PID=

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

cleanup() {
    rc=$?
    if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill -KILL "$DAEMON_PID" 2>/dev/null
        wait "$DAEMON_PID" 2>/dev/null
    fi
    if [ "$rc" -ne 0 ] && [ -f "$TMP/parled.err" ]; then
        echo "--- parled stderr ---" >&2
        tail -n 50 "$TMP/parled.err" >&2
    fi
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# start_daemon [parled options]: start parled (under $PARLED_WRAP, e.g. a
# taskset command, if set) and wait for its ready line, START_WAIT seconds
# at most (default 10).
start_daemon() {
    : >"$TMP/parled.out"
    ${PARLED_WRAP:-} "$PARLED" --socket "$SOCK" --state-dir "$STATE" --log-level debug "$@" \
        >"$TMP/parled.out" 2>>"$TMP/parled.err" &
    DAEMON_PID=$!
    for _ in $(seq $((${START_WAIT:-10} * 10))); do
        if grep -q "^parled ready on $SOCK (state dir $STATE)$" "$TMP/parled.out"; then
            return 0
        fi
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            [ -n "${START_TRY:-}" ] && return 1 # the caller decides (START_TRY=1)
            fail "parled exited before it was ready"
        fi
        sleep 0.1
    done
    fail "parled did not print its ready line within ${START_WAIT:-10} s"
}

# stop_daemon: SIGTERM and wait for a clean exit (status 0, socket removed).
stop_daemon() {
    kill -TERM "$DAEMON_PID"
    wait_exit 60 || fail "parled did not exit within 60 s of SIGTERM"
    [ "$EXIT_STATUS" -eq 0 ] || fail "parled exited with $EXIT_STATUS after SIGTERM"
    [ ! -e "$SOCK" ] || fail "parled left its socket behind"
}

# wait_exit SECONDS: wait for the daemon to exit; its status in EXIT_STATUS.
wait_exit() {
    for _ in $(seq $(($1 * 10))); do
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            wait "$DAEMON_PID"
            EXIT_STATUS=$?
            DAEMON_PID=
            return 0
        fi
        sleep 0.1
    done
    return 1
}

ctl() {
    "$PARLECTL" --socket "$SOCK" "$@"
}

# raw [rawclient options]: send stdin as is, print the reply lines.
raw() {
    "$RAWCLIENT" "$@" "$SOCK"
}

# The daemon must still answer after whatever a test just did to it.
check_alive() {
    ctl version >/dev/null || fail "parled does not answer version after: $1"
}

# field JSON_FILE KEY: a top-level value of a pretty-printed object.
field() {
    sed -n "s/^[[:space:]]*\"$2\":[[:space:]]*\(.*\)$/\1/p" "$1" | head -n 1 | sed 's/,$//; s/^"//; s/"$//'
}

# wait_state ID STATE SECONDS
wait_state() {
    for _ in $(seq $(($3 * 10))); do
        ctl status "$1" --json >"$TMP/st.json" 2>/dev/null || true
        [ "$(field "$TMP/st.json" state)" = "$2" ] && return 0
        sleep 0.1
    done
    fail "job $1 did not reach state $2 within $3 s (now: $(field "$TMP/st.json" state))"
}

# wait_steps ID SECONDS: until the running job has taken a step.
wait_steps() {
    for _ in $(seq $(($2 * 10))); do
        ctl status "$1" --json >"$TMP/st.json" 2>/dev/null || true
        step=$(field "$TMP/st.json" step)
        [ -n "$step" ] && [ "$step" != 0 ] && return 0
        sleep 0.1
    done
    fail "job $1 took no step within $2 s"
}

# A quick job: an MLP on synthetic data (what it learns does not matter); 32
# steps an epoch, a checkpoint after each.
# mlp_job FILE EPOCHS
mlp_job() {
    cat >"$1" <<JOB
{"name": "it-mlp", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": 1024, "test_limit": 256},
 "algorithm": {"name": "sgd"}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": $2, "seed": 3, "devices": "cpu", "log_every": 4}
JOB
}

# ANSWER_MS: the longest another member's answer may take while parled is
# attacked: a second, or three in a sanitizer's build (everything there,
# parlectl's start included, runs several times slower).
if ldd "$PARLED" 2>/dev/null | grep -q 'lib[at]san'; then
    ANSWER_MS=3000
else
    ANSWER_MS=1000
fi

# kill_daemon: kill -9, as a crash would.
kill_daemon() {
    kill -KILL "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null
    DAEMON_PID=
}

# wait_log ID PATTERN SECONDS: until the job's log.txt has a line matching
# the extended regex PATTERN.
wait_log() {
    for _ in $(seq $(($3 * 10))); do
        grep -Eq -- "$2" "$STATE/jobs/$1/log.txt" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "job $1: no log line matching '$2' within $3 s; log ends: $(tail -n 5 "$STATE/jobs/$1/log.txt")"
}

# waits_keeping_nothing LONG BIG SMALL WHAT PATTERN: l (job file LONG) runs at
# priority -1; big (BIG, priority 0, on l's cores) cannot start for WHAT
# ("memory", "the disk"): it must wait, its `waiting` matching the extended
# regex PATTERN, preempting no job, while s (SMALL), submitted after it,
# runs to done; then big and l are cancelled.
waits_keeping_nothing() {
    local l big s
    l=$(ctl submit -q --priority -1 "$1") || fail "submit l"
    wait_state "$l" running 20
    big=$(ctl submit -q "$2") || fail "submit big"
    s=$(ctl submit -q "$3") || fail "submit s"
    ctl wait "$s" >/dev/null || fail "$s did not run to done while $big waits for $4: $(ctl status "$big")"
    ctl status "$big" --json >"$TMP/big.st"
    [ "$(field "$TMP/big.st" state)" = queued ] || fail "$big left the queue: $(cat "$TMP/big.st")"
    field "$TMP/big.st" waiting | grep -Eq -- "$5" ||
        fail "$big does not wait for $4: $(field "$TMP/big.st" waiting)"
    ctl status "$l" --json | grep -q '"state":[[:space:]]*"running"' || fail "$l stopped for $big: $(ctl status "$l")"
    grep -q "preempted by" "$STATE/jobs/$l/log.txt" && fail "$l was preempted for $big, which waits for $4"
    ctl cancel "$big" >/dev/null && ctl cancel "$l" >/dev/null || fail "cancel big and l"
    wait_state "$l" cancelled 20
}

# resume_step ID: the step the job's last resume started from.
resume_step() {
    sed -n 's/.*resuming from checkpoint at outer iteration [0-9]* (step \([0-9]*\))$/\1/p' \
        "$STATE/jobs/$1/log.txt" | tail -n 1
}

# check_metrics FILE EPOCHS [BEFORE STEP]: the metrics history of a finished
# job is whole: progress steps strictly increase, as do eval steps and their
# epochs, whole epochs 1..EPOCHS among them, no line goes back in step. With
# BEFORE (a copy taken before a restart) and STEP (where the run resumed),
# the lines up to STEP are exactly BEFORE's.
check_metrics() {
    python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [json.loads(l) for l in lines]
last = {"progress": 0, "eval": 0}
prev = 0
for r in rows:
    kind, step = r["event"], r["step"]
    assert step >= prev, f"step {step} after {prev}"
    assert step > last[kind], f"{kind} step {step} after {last[kind]}"
    last[kind] = prev = step
evals = [r["epoch"] for r in rows if r["event"] == "eval"]
assert all(a < b for a, b in zip(evals, evals[1:])), f"eval epochs {evals}"
whole = [e for e in evals if e == int(e)]
assert whole == list(range(1, int(sys.argv[2]) + 1)), f"eval epochs {evals}"
if len(sys.argv) > 3:
    cut = int(sys.argv[4])
    before = [l for l in open(sys.argv[3]).read().splitlines()
              if l.strip() and json.loads(l)["step"] <= cut]
    kept = [l for l in lines if json.loads(l)["step"] <= cut]
    assert before and kept == before, f"{len(kept)} lines up to step {cut}, {len(before)} before"
' "$@" || fail "the metrics history $1 is not whole"
}

# mpi_setup: skip (exit 77) unless parled has MPI and mpirun exists; sets
# MPIRUN and what Open MPI needs to run as root here. Under
# -Db_sanitize=address, Open MPI's own allocations at init are never freed:
# only those are suppressed (docs/mpi.md).
mpi_setup() {
    if [ "${PARLE_HAVE_MPI:-0}" != 1 ]; then
        echo "SKIP: parled was built without MPI (-Dmpi=auto found none)"
        exit 77
    fi
    MPIRUN=$(command -v mpirun) || { echo "SKIP: mpirun not found"; exit 77; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(dirname "$0")/lsan-mpi.supp:print_suppressions=0}
}
