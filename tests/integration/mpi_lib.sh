# Shared by the MPI integration tests (sourced after lib.sh and mpi_setup):
# the loopback launcher, a rank's pid, a job's error, timed waits and the
# comparison of exported masters.

# mpirun on this machine over loopback TCP, oversubscribed: mpi_loopback K [WRAPPER]
mpi_loopback() {
    echo "$MPIRUN --allow-run-as-root --oversubscribe --mca btl self,tcp
          --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -n $1 ${2:-}"
}

# rank_pid R: the pid rank R > 0 logged when it began serving.
rank_pid() {
    sed -n "s/^parled\[rank $1\]: serving rank 0 (rank $1 of [0-9]*, pid \([0-9]*\),.*/\1/p" \
        "$TMP/parled.err" | tail -n 1
}

error_of() { field "$STATE/jobs/$1/status.json" error; }

# timed_wait ID LIMIT: parlectl wait within LIMIT seconds; its exit status in
# WAIT_RC, how long it took in WAIT_S.
timed_wait() {
    t0=$(date +%s.%N)
    timeout "$2" "$PARLECTL" --socket "$SOCK" wait "$1" >/dev/null
    WAIT_RC=$?
    WAIT_S=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# within SECONDS LIMIT: SECONDS < LIMIT.
within() { awk -v s="$1" -v t="$2" 'BEGIN { exit !(s < t) }'; }

# The job's test loss, from its status.json.
test_loss() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["test_loss"])' \
        "$STATE/jobs/$1/status.json"
}

# compare A B: the largest difference between two exported masters, relative
# to the largest weight; fails above 1e-4.
compare() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n; out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        lo, hi = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((hi - lo) // 4), b[base + lo:base + hi])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), (a.keys(), b.keys())
scale = max(max(abs(x) for x in v) for v in a.values()) or 1.0
diff = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a)
print("%.3g" % (diff / scale))
sys.exit(0 if diff / scale < 1e-4 else 1)
PY
}

# parle_job FILE EPOCHS TRAIN_LIMIT [REPLICAS [TIMEOUT_S]]: Parle on an MLP
# and synthetic data.
parle_job() {
    cat >"$1" <<JOB
{"name": "mpi-parle", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": $3, "test_limit": 256},
 "algorithm": {"name": "parle", "replicas": ${4:-3}, "L": 3}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": $2, "seed": 3, "devices": "cpu", "log_every": 4, "comm": {"timeout_s": ${5:-20}}}
JOB
}

# sanitizer_clean: no heap corruption, sanitizer report or abort in the ranks' stderr.
sanitizer_clean() {
    ! grep -En "corrupted|double free|free\(\): |malloc\(\): |ERROR: AddressSanitizer|runtime error:|LeakSanitizer|MPI_ABORT" \
        "$TMP/parled.err" || fail "a rank reported memory corruption or aborted (above)"
}
