#!/bin/bash
# scripts/fetch-cifar.py's download, from a local server (cut_server.py, no
# network) serving an archive the test makes: the first download is cut
# mid-way and says how to resume; run again, it resumes with a range request
# from where it stopped, prints bytes and rate, checks and unpacks; through
# --proxy the request goes to the proxy. Under umask 027 the folders it makes
# above the set are 0755 and a member of the group reads the data.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
FETCH=$PARLE_SOURCE_ROOT/scripts/fetch-cifar.py
SERVER=
trap 'rc=$?; remove_users; [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null; (exit $rc); cleanup' EXIT
try_users fd
[ "$members" = 1 ] ||
    echo "SKIP (part): a member reading the data (needs root, useradd, setpriv); modes checked instead"
python3 "$(dirname "$0")/fake_cifar.py" "$TMP/c10.tar.gz" cifar10
size=$(stat -c %s "$TMP/c10.tar.gz")
md5=$(md5sum "$TMP/c10.tar.gz" | cut -d' ' -f1)
cut=$((size / 2))
python3 "$(dirname "$0")/cut_server.py" "$TMP/c10.tar.gz" "$cut" "$TMP/requests" "$TMP/port" &
SERVER=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
port=$(cat "$TMP/port") || fail "the server did not start"
URL=http://127.0.0.1:$port/cifar-10-binary.tar.gz
DEST=$TMP/var/lib/parle/data/cifar10
fetch() { (umask 027 && python3 "$FETCH" cifar10 --md5 "$md5" --dest "$DEST" --group "$GROUP" "$@"); }

fetch --url "$URL" >"$TMP/one.out" 2>&1 && fail "a cut download was taken: $(cat "$TMP/one.out")"
grep -q "stopped at $cut of $size bytes .*: run the same command again to resume it" "$TMP/one.out" ||
    fail "the cut download's message: $(cat "$TMP/one.out")"
part=$TMP/var/lib/parle/data/.cifar-10-binary.tar.gz.part
[ "$(stat -c %s "$part")" = "$cut" ] || fail "the partial file holds $(stat -c %s "$part" 2>&1), not $cut bytes"
[ ! -e "$DEST" ] || fail "a cut download unpacked something"

fetch --url "$URL" >"$TMP/two.out" 2>&1 || fail "the resumed download: $(cat "$TMP/two.out")"
[ "$(tail -n 1 "$TMP/requests")" = "/cifar-10-binary.tar.gz bytes=$cut-" ] ||
    fail "the second run did not resume at byte $cut: $(cat "$TMP/requests")"
grep -q "resuming at" "$TMP/two.out" || fail "the second run does not say it resumes: $(cat "$TMP/two.out")"
grep -Eq "^  [0-9.]+ MiB of [0-9.]+ MiB, [0-9.]+ MiB/s$" "$TMP/two.out" ||
    fail "no progress line (bytes of total, rate): $(cat "$TMP/two.out")"
[ ! -e "$part" ] || fail "the partial file stayed after the set was unpacked"
cmp <(cat "$DEST"/cifar-10-batches-bin/data_batch_{1,2,3,4,5}.bin "$DEST/cifar-10-batches-bin/test_batch.bin") \
    <(tar -xzOf "$TMP/c10.tar.gz" cifar-10-batches-bin/data_batch_{1,2,3,4,5}.bin cifar-10-batches-bin/test_batch.bin) ||
    fail "the resumed download's data differs from the archive's"

# Under umask 027: the folders made above the set are 0755, the set the group's.
for d in "$TMP/var" "$TMP/var/lib" "$TMP/var/lib/parle" "$TMP/var/lib/parle/data"; do
    [ "$(stat -c %a "$d")" = 755 ] || fail "$d is $(stat -c %a "$d") under umask 027, not 755"
done
[ "$(stat -c '%a %G' "$DEST")" = "750 $GROUP" ] || fail "$DEST: $(stat -c '%a %G' "$DEST")"
if [ "$members" = 1 ]; then
    as "$alice" cat "$DEST/cifar-10-batches-bin/test_batch.bin" >/dev/null ||
        fail "$alice, a member of $GROUP, cannot read the data fetched under umask 027"
    as "$eve" cat "$DEST/cifar-10-batches-bin/test_batch.bin" >/dev/null 2>&1 &&
        fail "$eve, outside $GROUP, reads the data"
fi

# --proxy: the request goes to the proxy, the archive's URL in full.
rm -rf "$DEST"
fetch --url http://cifar.invalid/cifar-10-binary.tar.gz --proxy "http://127.0.0.1:$port" \
    >"$TMP/proxy.out" 2>&1 || fail "through --proxy: $(cat "$TMP/proxy.out")"
[ "$(tail -n 1 "$TMP/requests")" = "http://cifar.invalid/cifar-10-binary.tar.gz -" ] ||
    fail "the proxy was not asked for the archive: $(tail -n 1 "$TMP/requests")"
[ -s "$DEST/cifar-10-batches-bin/test_batch.bin" ] || fail "nothing unpacked through --proxy"
echo "fetch_download: cut at $cut of $size bytes, resumed, through a proxy, readable under umask 027: OK"
