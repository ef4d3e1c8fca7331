#!/bin/bash
# scripts/fetch-cifar.py on archives made by the test (no network): one with
# another MD5 than the published one is refused, as are a corrupt file, a
# member outside the shipped folder, a missing data file and a truncated
# record, each naming what is wrong, and nothing is left at the destination;
# a good one (its MD5 given by --md5) unpacks group-readable and parle-train
# trains on it.
. "$(dirname "$0")/lib.sh"

FETCH=$PARLE_SOURCE_ROOT/scripts/fetch-cifar.py
FAKE=$(dirname "$0")/fake_cifar.py
GROUP=$(id -gn)
DEST=$TMP/data/cifar10
md5() { md5sum "$1" | cut -d' ' -f1; }

# refused FILE TEXT [OPTIONS]: the script fails, says TEXT, unpacks nothing.
refused() {
    local file=$1 text=$2
    shift 2
    out=$(python3 "$FETCH" cifar10 --archive "$file" --dest "$DEST" --group "$GROUP" "$@" 2>&1) &&
        fail "$file accepted: $out"
    echo "$out" | grep -qF -- "$text" || fail "$file: no '$text' in: $out"
    [ ! -e "$DEST" ] || fail "$file left $DEST behind"
    [ -z "$(ls -A "$TMP/data" 2>/dev/null)" ] || fail "$file left $(ls -A "$TMP/data")"
}

python3 "$FAKE" "$TMP/good.tar.gz" cifar10
refused "$TMP/good.tar.gz" "expected c32a1d4ab5d03f1284b67883e8d87530 (the published MD5 of cifar-10-binary.tar.gz)"
head -c 5000 "$TMP/good.tar.gz" >"$TMP/cut.tar.gz"
refused "$TMP/cut.tar.gz" "not a readable .tar.gz" --md5 "$(md5 "$TMP/cut.tar.gz")"
python3 "$FAKE" "$TMP/evil.tar.gz" cifar10 --extra ../evil
refused "$TMP/evil.tar.gz" "unexpected member '../evil'" --md5 "$(md5 "$TMP/evil.tar.gz")"
python3 "$FAKE" "$TMP/c100.tar.gz" cifar100
refused "$TMP/c100.tar.gz" "unexpected member 'cifar-100-binary'" --md5 "$(md5 "$TMP/c100.tar.gz")"
python3 "$FAKE" "$TMP/omit.tar.gz" cifar10 --omit test_batch.bin
refused "$TMP/omit.tar.gz" "lacks cifar-10-batches-bin/test_batch.bin" --md5 "$(md5 "$TMP/omit.tar.gz")"
python3 "$FAKE" "$TMP/short.tar.gz" cifar10 --short
refused "$TMP/short.tar.gz" "not a whole number of 3073-byte records" --md5 "$(md5 "$TMP/short.tar.gz")"

python3 "$FETCH" cifar10 --archive "$TMP/good.tar.gz" --md5 "$(md5 "$TMP/good.tar.gz")" \
    --dest "$DEST" --group "$GROUP" >"$TMP/fetch.out" 2>&1 || fail "good archive: $(cat "$TMP/fetch.out")"
for f in data_batch_1.bin data_batch_5.bin test_batch.bin; do
    [ "$(stat -c '%a %G' "$DEST/cifar-10-batches-bin/$f")" = "640 $GROUP" ] ||
        fail "$f: $(stat -c '%a %G' "$DEST/cifar-10-batches-bin/$f"), not 640 $GROUP"
done
[ "$(stat -c '%a %G' "$DEST")" = "750 $GROUP" ] || fail "$DEST: $(stat -c '%a %G' "$DEST")"
cat >"$TMP/job.json" <<EOF
{"model": {"arch": "mlp"}, "data": {"dataset": "cifar10", "root": "$DEST"},
 "algorithm": {"name": "sgd"}, "optim": {"batch": 8}, "epochs": 1, "devices": "cpu"}
EOF
out=$("$PARLE_TRAIN" --quiet "$TMP/job.json" 2>&1) || fail "parle-train on the unpacked set: $out"
echo "$out" | grep -q "final test error" || fail "parle-train: $out"
# Again over the first: replaced whole.
python3 "$FETCH" cifar10 --archive "$TMP/good.tar.gz" --md5 "$(md5 "$TMP/good.tar.gz")" \
    --dest "$DEST" --group "$GROUP" >"$TMP/fetch.out" 2>&1 || fail "again: $(cat "$TMP/fetch.out")"
[ "$(ls -A "$TMP/data")" = cifar10 ] || fail "the second fetch left $(ls -A "$TMP/data")"
echo "fetch_cifar: OK"
