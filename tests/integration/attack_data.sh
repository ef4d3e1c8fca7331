#!/bin/bash
# Attacks on what parled reads for a job and on what parlectl writes, made
# as unprivileged members of parled's group would (docs/architecture.md,
# "Security model"), with users made here and removed at the end:
#   1. data files whose headers (IDX) or sizes (CIFAR) claim a million
#      images, sparse files of the right size: refused before anything is
#      loaded, naming the file, the count and both figures; parled's peak
#      resident memory stays small; a synthetic set counted at its size;
#   2. data files linked to /proc/self/maps and /proc/self/fd/2 (parled's
#      own memory map and log): refused, quoting none of their bytes;
#   3. a symlink planted at the name `plot -o` writes through: untouched,
#      its target unchanged; a run folder of `tensorboard -o` planted as a
#      symlink: refused, nothing written where it points;
# while another member's `parlectl list` is answered within a second (three
# in a sanitizer's build: ANSWER_MS, lib.sh).
# Host memory is what PARLE_MEMINFO says (4 GiB, 1 GiB available), so the
# forged sets exceed it on any machine.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; [ -n "${LISTER:-}" ] && kill "$LISTER" 2>/dev/null; remove_users; (exit $rc); cleanup' EXIT
make_users at

printf 'MemTotal: 4194304 kB\nMemFree: 1048576 kB\nMemAvailable: 1048576 kB\n' >"$TMP/meminfo"
PARLE_MEMINFO=$TMP/meminfo start_daemon --group "$grp"

# Bob lists the jobs every 0.2 s throughout; each answer's time is kept.
lister() {
    while :; do
        s=$(date +%s%N)
        ctl_as "$bob" list >/dev/null 2>&1 || echo "refused" >>"$TMP/list.times"
        echo $((($(date +%s%N) - s) / 1000000)) >>"$TMP/list.times"
        sleep 0.2
    done
}
lister &
LISTER=$!

mkdir -m 755 "$TMP/alice" && chown "$alice" "$TMP/alice"
# idx_set DIR N: IDX files under DIR, alice's: N training images (sparse
# zeros behind the header when N is large) and 2 test images.
idx_set() {
    python3 - "$1" "$2" <<'PY'
import os, struct, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for split, count in (("train", n), ("t10k", 2)):
    with open(os.path.join(d, split + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, 28, 28))
        f.truncate(16 + count * 784)
    with open(os.path.join(d, split + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, count))
        f.truncate(8 + count)
PY
    chown -R "$alice" "$1"
}
job_file() { # job_file FILE DATASET ROOT
    cat >"$1" <<JOB
{"name": "it-attack", "model": {"arch": "mlp"}, "data": {"dataset": "$2", "root": "$3"},
 "algorithm": {"name": "sgd"}, "optim": {"lr": 0.05, "batch": 2}, "epochs": 1, "seed": 1,
 "devices": "cpu"}
JOB
    chmod 644 "$1"
}
# failed_with ID TEXT...: the job ends failed within 60 s, its error holding
# every TEXT; its error in $TMP/err.
failed_with() {
    id=$1
    shift
    timeout 60 "$PARLECTL" --socket "$SOCK" wait "$id" >/dev/null 2>&1
    [ $? = 1 ] || fail "job $id did not fail within 60 s: $(ctl status "$id")"
    ctl status "$id" --json >"$TMP/st.json"
    field "$TMP/st.json" error >"$TMP/err"
    for t in "$@"; do
        grep -qF -- "$t" "$TMP/err" || fail "job $id's error lacks '$t': $(cat "$TMP/err")"
    done
}
peak_kib() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$DAEMON_PID/status"; }

# ---- 1. headers claiming a million images ----
idx_set "$TMP/alice/forged" 1000000
job_file "$TMP/forged.json" mnist "$TMP/alice/forged"
j=$(ctl_as "$alice" submit -q "$TMP/forged.json") || fail "submit the forged IDX job"
failed_with "$j" "memory: $TMP/alice/forged/train-images-idx3-ubyte's header claims 1000000 examples of 1x28x28" \
    "1000000 training and 2 test examples to load" "needs 2.93 GiB on cpu" \
    "but 1.00 GiB are available now (MemAvailable)"
grep -q "data: .* training" "$STATE/jobs/$j/log.txt" && fail "the forged IDX set was loaded"
mkdir -p "$TMP/alice/cifar" && chown "$alice" "$TMP/alice/cifar"
for i in 1 2 3 4 5; do
    as "$alice" truncate -s $((200000 * 3073)) "$TMP/alice/cifar/data_batch_$i.bin"
done
as "$alice" truncate -s $((2 * 3073)) "$TMP/alice/cifar/test_batch.bin"
job_file "$TMP/cifar.json" cifar10 "$TMP/alice/cifar"
j=$(ctl_as "$alice" submit -q "$TMP/cifar.json") || fail "submit the forged CIFAR job"
failed_with "$j" "data_batch_1.bin's size (with its set's other files) claims 1000000 examples of 3x32x32" \
    "are available now (MemAvailable)"
# A synthetic set is as large as its limit says, and counted so at submit.
mlp_job "$TMP/synth.json" 1
chmod 644 "$TMP/synth.json"
out=$(ctl_as "$alice" submit -q "$TMP/synth.json" --set data.train_limit=2000000 2>&1) &&
    fail "a synthetic set of 2,000,000 examples was queued"
echo "$out" | grep -q "memory: needs 5.8.* GiB on cpu .* but the machine has 4.00 GiB (MemTotal)" ||
    fail "the synthetic set's refusal: $out"
peak=$(peak_kib)
[ -n "$peak" ] && [ "$peak" -lt 262144 ] || fail "parled's peak resident memory is $peak KiB"
check_alive "the forged sets"
# The same files within a limit fit, and load as far as their (zero) data.
ctl_as "$alice" submit -q "$TMP/forged.json" --set data.train_limit=4 >"$TMP/id" ||
    fail "submit the limited job"
j=$(cat "$TMP/id")
timeout 60 "$PARLECTL" --socket "$SOCK" wait "$j" >/dev/null 2>&1
grep -q "data: 4 training and 2 test examples" "$STATE/jobs/$j/log.txt" ||
    fail "a limited forged set was not admitted: $(ctl status "$j")"

# ---- 2. /proc magic links and virtual files as data ----
leaks() { # anything read from the file: IDX magics, byte counts, sizes
    grep -qE "magic|0x|bytes|record|truncated" "$TMP/err"
}
idx_set "$TMP/alice/maps" 2
as "$alice" ln -sf /proc/self/maps "$TMP/alice/maps/train-labels-idx1-ubyte"
job_file "$TMP/maps.json" mnist "$TMP/alice/maps"
j=$(ctl_as "$alice" submit -q "$TMP/maps.json") || fail "submit the maps job"
failed_with "$j" "train-labels-idx1-ubyte: on a virtual file system (proc)"
leaks && fail "the /proc/self/maps error quotes the file: $(cat "$TMP/err")"
idx_set "$TMP/alice/fd" 2
as "$alice" ln -sf /proc/self/fd/2 "$TMP/alice/fd/train-labels-idx1-ubyte"
job_file "$TMP/fd.json" mnist "$TMP/alice/fd"
j=$(ctl_as "$alice" submit -q "$TMP/fd.json") || fail "submit the fd job"
failed_with "$j" "train-labels-idx1-ubyte: cannot open"
leaks && fail "the /proc/self/fd/2 error quotes the file: $(cat "$TMP/err")"
mkdir -p "$TMP/alice/cfd" && chown "$alice" "$TMP/alice/cfd"
as "$alice" ln -sf /proc/self/fd/2 "$TMP/alice/cfd/data_batch_1.bin"
job_file "$TMP/cfd.json" cifar10 "$TMP/alice/cfd"
j=$(ctl_as "$alice" submit -q "$TMP/cfd.json") || fail "submit the CIFAR fd job"
failed_with "$j" "data_batch_1.bin: cannot open"
leaks && fail "the CIFAR /proc/self/fd/2 error gives its size: $(cat "$TMP/err")"
check_alive "the /proc links"

# ---- 3. planted symlinks where parlectl writes ----
mlp_job "$TMP/quick.json" 1
chmod 644 "$TMP/quick.json"
q=$(ctl_as "$alice" submit -q "$TMP/quick.json") && ctl wait "$q" >/dev/null ||
    fail "alice's quick job"
mkdir -m 2770 "$TMP/shared" && chgrp "$grp" "$TMP/shared"
echo "alice's notes" >"$TMP/alice/precious" && chown "$alice" "$TMP/alice/precious"
# Alice's plot waits, its pid known, until bob has planted a link at the
# name that pid would have written (OUT.part-PID), then runs.
mkfifo "$TMP/go" && chmod 666 "$TMP/go"
as "$alice" sh -c 'echo $$ >"$1/alice/pid.tmp" && mv "$1/alice/pid.tmp" "$1/alice/pid"; read -r _ <"$1/go";
    exec "$2" --socket "$3" plot "$4" -o "$1/shared/out.svg"' sh "$TMP" "$PARLECTL" "$SOCK" "$q" \
    >"$TMP/plot.out" 2>&1 &
plot=$!
for _ in $(seq 100); do [ -s "$TMP/alice/pid" ] && break; sleep 0.1; done
[ -s "$TMP/alice/pid" ] || fail "alice's plot did not start"
pid=$(cat "$TMP/alice/pid")
as "$bob" ln -s "$TMP/alice/precious" "$TMP/shared/out.svg.part-$pid" ||
    fail "bob's planted link"
echo go >"$TMP/go"
wait "$plot" || fail "alice's plot failed: $(cat "$TMP/plot.out")"
[ "$(cat "$TMP/alice/precious")" = "alice's notes" ] || fail "plot wrote through bob's link"
[ -L "$TMP/shared/out.svg.part-$pid" ] || fail "bob's link is gone"
[ -f "$TMP/shared/out.svg" ] && [ ! -L "$TMP/shared/out.svg" ] && grep -q "<svg" "$TMP/shared/out.svg" ||
    fail "out.svg is not the plot"
# A run folder planted as a link to bob's (group-writable) folder.
mkdir -m 2770 "$TMP/shared/bobs" "$TMP/shared/runs" && chgrp "$grp" "$TMP/shared/bobs" "$TMP/shared/runs"
echo "bob's file" >"$TMP/shared/bobs/keep" && chown -R "$bob" "$TMP/shared/bobs"
as "$bob" ln -s "$TMP/shared/bobs" "$TMP/shared/runs/$q" || fail "bob's planted run folder"
out=$(ctl_as "$alice" tensorboard "$q" -o "$TMP/shared/runs" 2>&1) &&
    fail "tensorboard wrote into a linked run folder"
echo "$out" | grep -q "runs/$q: it is a symbolic link" || fail "tensorboard's refusal: $out"
[ "$(ls "$TMP/shared/bobs")" = keep ] || fail "tensorboard wrote into bob's folder: $(ls "$TMP/shared/bobs")"

kill "$LISTER"
wait "$LISTER" 2>/dev/null
LISTER=
grep -q refused "$TMP/list.times" && fail "bob's list was refused during the attacks"
n=$(wc -l <"$TMP/list.times")
max=$(sort -n "$TMP/list.times" | tail -n 1)
# The attacks take about a second: at 0.2 s apart, a few answers fall within.
[ "$n" -ge 3 ] && [ "$max" -lt "$ANSWER_MS" ] || fail "bob's list: $n answers, slowest $max ms"
echo "bob's list: $n answers, slowest $max ms; parled's peak resident memory $(peak_kib) KiB"
stop_daemon
echo PASS
