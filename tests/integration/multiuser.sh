#!/bin/bash
# parled as root for a group (docs/architecture.md, "Security model"), tried
# as hostile members would: users made here (and removed at the end), one
# outside the group and one in the admin group. Each check fails without its
# fix: owners, file rights, non-regular files, bounds, text fields.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
make_users mu

start_daemon --group "$grp" --admin-group "$adm" --max-jobs-per-user 2 \
    --max-connections-per-user 2

# A job that runs until cancelled, readable by the users.
mlp_job "$TMP/long.json" 1000
chmod 644 "$TMP/long.json"

# ---- 1. ownership ----
a=$(ctl_as "$alice" submit -q "$TMP/long.json") || fail "alice submits"
ctl_as "$bob" list | grep -q "^$a .*$alice" || fail "bob's list does not show alice's job with her name"
ctl_as "$bob" status "$a" --json | grep -q "\"user\":[[:space:]]*\"$alice\"" ||
    fail "status does not name the owner"
mkdir -m 755 "$TMP/bob" && chown "$bob" "$TMP/bob"
for op in "cancel $a" "resume $a" "logs $a" "export $a -o $TMP/bob/x.safetensors" "watch $a" \
    "plot $a -o $TMP/bob/x.svg"; do
    # shellcheck disable=SC2086
    out=$(ctl_as "$bob" $op 2>&1) && fail "bob may $op alice's job"
    echo "$out" | grep -q "belongs to $alice" || fail "bob's $op: no clear refusal: $out"
done
ctl_as "$bob" shutdown 2>&1 | grep -q "only root" || fail "bob may shut parled down"
check_alive "bob's refusals"
out=$(ctl_as "$eve" list 2>&1) && fail "a user outside the group is served"
echo "$out" | grep -qE "may not use parled|permission denied: parled serves the members of group $grp and $eve is not one: an admin adds you with \`usermod -aG $grp $eve\`" ||
    fail "eve's refusal: $out"
ctl_as "$alice" logs "$a" >/dev/null || fail "alice cannot read her own job's logs"
ctl_as "$carol" cancel "$a" >/dev/null || fail "the admin group cannot cancel alice's job"
wait_state "$a" cancelled 10

# ---- 2. the owner's file rights ----
idx_files() { # idx_files DIR: a tiny IDX data set, 4 training and 2 test images
    python3 - "$1" <<'PY'
import os, struct, sys
d = sys.argv[1]
for split, n in (("train", 4), ("t10k", 2)):
    with open(os.path.join(d, split + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(range(256)) * (n * 784 // 256 + 1))
        f.truncate(16 + n * 784)
    with open(os.path.join(d, split + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
}
mkdir -m 700 "$TMP/rootonly" && idx_files "$TMP/rootonly"
mkdir -m 755 "$TMP/alice" && chown "$alice" "$TMP/alice"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
    t10k-labels-idx1-ubyte; do
    ln -s "$TMP/rootonly/$f" "$TMP/alice/$f"
done
idx_job() { # idx_job FILE ROOT
    cat >"$1" <<JOB
{"name": "it-idx", "model": {"arch": "mlp"}, "data": {"dataset": "mnist", "root": "$2"},
 "algorithm": {"name": "sgd"}, "optim": {"lr": 0.05, "batch": 2}, "epochs": 1, "seed": 1,
 "devices": "cpu"}
JOB
    chmod 644 "$1"
}
idx_job "$TMP/rootonly.json" "$TMP/rootonly"
b=$(ctl_as "$alice" submit -q "$TMP/rootonly.json") || fail "submit the root-only data job"
ctl wait "$b" 2>/dev/null && fail "alice's job read a root-only directory"
ctl status "$b" --json | grep -q "Permission denied" || fail "no permission error: $(ctl status "$b")"
idx_job "$TMP/link.json" "$TMP/alice"
b=$(ctl_as "$alice" submit -q "$TMP/link.json") || fail "submit the symlink job"
ctl wait "$b" 2>/dev/null && fail "alice's job read a root-only file through her symlink"
ctl status "$b" --json >"$TMP/b.json"
grep -q "alice/train-labels-idx1-ubyte: cannot open: Permission denied" "$TMP/b.json" ||
    fail "the symlink's error: $(cat "$TMP/b.json")"
grep -q "magic" "$TMP/b.json" && fail "the error quotes the root-only file's content"
r=$(ctl submit -q "$TMP/rootonly.json") || fail "root submits the same job"
ctl wait "$r" || fail "root's job on its own files did not end done: $(ctl status "$r")"

# ---- 3. only regular files, never a blocking open ----
mkdir -m 755 "$TMP/fifo" && idx_files "$TMP/fifo" && chown -R "$alice" "$TMP/fifo"
rm "$TMP/fifo/train-images-idx3-ubyte" && as "$alice" mkfifo "$TMP/fifo/train-images-idx3-ubyte"
idx_job "$TMP/fifo.json" "$TMP/fifo"
f=$(ctl_as "$alice" submit -q "$TMP/fifo.json") || fail "submit the FIFO job"
timeout 20 "$PARLECTL" --socket "$SOCK" wait "$f" 2>/dev/null
[ $? = 1 ] || fail "the FIFO job did not fail at once"
ctl status "$f" --json | grep -q "not a regular file (a FIFO)" || fail "no FIFO error"
r=$(ctl submit -q "$TMP/rootonly.json") && ctl wait "$r" || fail "the job after the FIFO"

# ---- 4. bounds ----
c1=$(ctl_as "$alice" submit -q "$TMP/long.json") && c2=$(ctl_as "$alice" submit -q "$TMP/long.json") ||
    fail "alice's two jobs"
out=$(ctl_as "$alice" submit -q "$TMP/long.json" 2>&1) && fail "a third job of alice's was queued"
echo "$out" | grep -q "max-jobs-per-user" || fail "the refusal does not name the bound: $out"
d=$(ctl_as "$bob" submit -q "$TMP/long.json") || fail "bob is refused because of alice's jobs"
ctl_as "$carol" cancel "$c1" >/dev/null && ctl_as "$carol" cancel "$c2" >/dev/null &&
    ctl_as "$bob" cancel "$d" >/dev/null || fail "cancel the bound's jobs"
# A request far too large (8 MiB on one line): refused, and everyone else
# is still served.
head -c 8388608 /dev/zero | tr '\0' 'a' | as "$alice" "$RAWCLIENT" "$SOCK" >"$TMP/big.out" 2>&1
grep -q '"code":"line_too_long"' "$TMP/big.out" || fail "alice's 8 MiB line: $(head -c 300 "$TMP/big.out")"
ctl_as "$bob" list >/dev/null || fail "bob is refused after alice's 8 MiB line"
check_alive "an 8 MiB request line"

# Two connections of alice's held open (their input a FIFO we hold); a
# third is refused, bob is served.
mkfifo "$TMP/hold"
as "$alice" "$RAWCLIENT" "$SOCK" <"$TMP/hold" >/dev/null 2>&1 &
h1=$!
as "$alice" "$RAWCLIENT" "$SOCK" <"$TMP/hold" >/dev/null 2>&1 &
h2=$!
exec 7>"$TMP/hold"
sleep 1
out=$(ctl_as "$alice" list 2>&1) && fail "a third connection of alice's was served"
echo "$out" | grep -q "max-connections-per-user" || fail "the refusal does not name the bound: $out"
ctl_as "$bob" list >/dev/null || fail "bob is refused because of alice's connections"
exec 7>&-
wait "$h1" "$h2"
ctl_as "$alice" list >/dev/null || fail "alice is refused after closing her connections"

# ---- 6. text fields ----
out=$(ctl_as "$alice" submit -q "$TMP/long.json" --set "data.root=/x
2026-11-26 parled: info: forged" 2>&1) && fail "a newline in data.root was taken"
echo "$out" | grep -q "data.root: byte 2 (0x0a) is a control character" || fail "newline: $out"
grep -q "forged" "$TMP/parled.err" && fail "the forged line reached parled's log"

stop_daemon
echo PASS
