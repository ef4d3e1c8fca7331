#!/bin/bash
# Status, export over the socket and plot (issue 14):
# - a finished job's status gives its mean throughput (not 0) and the peak
#   memory per device;
# - `export ID -o FILE` writes the daemon's bytes on the client's side with
#   the client's umask, the same bytes as the state dir's file, also for a
#   user who cannot read the state dir (when the test runs as root);
# - a corrupted transfer (a fake parled sending a bad chunk) is an error and
#   leaves neither the target nor a temporary behind;
# - `plot` draws one curve colour per job, and the rendered PNG is not blank.
. "$(dirname "$0")/lib.sh"
start_daemon
mlp_job "$TMP/job.json" 2
a=$(ctl submit "$TMP/job.json" -q) || fail "submit a"
sed 's/"lr": 0.05/"lr": 0.01/' "$TMP/job.json" >"$TMP/job2.json"
b=$(ctl submit "$TMP/job2.json" -q) || fail "submit b"
ctl wait "$a" || fail "$a did not end done"
ctl wait "$b" || fail "$b did not end done"

ctl status "$a" --json >"$TMP/st.json"
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
ips = s["images_per_sec"]
want = s["step"] * 32 / s["elapsed_s"]
assert ips > 0 and abs(ips - want) <= 1e-6 * want, (ips, want)
assert s["mean_images_per_sec"] == ips, s
mem = s["memory_bytes"]
assert list(mem) == ["cpu"] and mem["cpu"] > 0, mem
' "$TMP/st.json" || fail "status of a finished job: $(cat "$TMP/st.json")"
ctl status "$a" | grep -Eq "images/s [1-9][0-9]*" || fail "human status shows no images/s"
ctl status "$a" | grep -q "memory (model + rule state, peak)  cpu [0-9.]* MiB" ||
    fail "human status shows no memory"
# The same after a restart (status.json keeps them).
stop_daemon
start_daemon
ctl status "$a" --json >"$TMP/st2.json"
python3 -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["memory_bytes"] == b["memory_bytes"] and abs(a["images_per_sec"] - b["images_per_sec"]) < 1e-6 * a["images_per_sec"], (a, b)
' "$TMP/st.json" "$TMP/st2.json" || fail "throughput or memory changed across a restart"

# Export: the client writes, with its umask; the bytes are the daemon's.
mkdir "$TMP/out"
(umask 027 && ctl export "$a" -o "$TMP/out/model.safetensors") >/dev/null || fail "export -o"
cmp -s "$TMP/out/model.safetensors" "$STATE/jobs/$a/master.safetensors" || fail "export bytes differ"
[ "$(stat -c %a "$TMP/out/model.safetensors")" = 640 ] || fail "export ignores the umask"
[ -z "$(ls -A "$TMP/out" | grep -v '^model.safetensors$')" ] || fail "export left a temporary"
ctl export "$a" -o "$TMP/out/j.safetensors" --json | grep -q '"crc32"' || fail "export --json"
out=$(ctl export "$a" 2>&1); [ $? = 2 ] || fail "export without a file must be a usage error: $out"

# Another uid that cannot read the state dir still gets the file.
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && getent group nogroup >/dev/null &&
    command -v setpriv >/dev/null; then
    # nobody may use the socket (--group) and, in the admin group, export
    # root's job (multiuser.sh checks the refusal without it), but not read
    # the state dir.
    stop_daemon
    start_daemon --group nogroup --admin-group nogroup
    chmod 700 "$STATE"
    chmod 777 "$TMP/out" && chmod 711 "$TMP"
    [ "$(id -u nobody)" != 0 ] && ! setpriv --reuid nobody --regid nogroup --clear-groups \
        cat "$STATE/jobs/$b/master.safetensors" >/dev/null 2>&1 || fail "nobody can read the state dir"
    setpriv --reuid nobody --regid nogroup --clear-groups \
        "$PARLECTL" --socket "$SOCK" export "$b" -o "$TMP/out/nobody.safetensors" >/dev/null ||
        fail "export as nobody"
    [ "$(stat -c %U "$TMP/out/nobody.safetensors")" = nobody ] || fail "not written by the client"
    cmp -s "$TMP/out/nobody.safetensors" "$STATE/jobs/$b/master.safetensors" || fail "nobody's bytes"
else
    echo "skip: the other-uid export needs root, user nobody and setpriv"
fi

# A corrupted transfer: a fake parled answers export with a bad chunk.
FAKE=$TMP/fake.sock
python3 - "$FAKE" <<'PY' &
import base64, json, os, socket, sys, zlib
data = os.urandom(3000)
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
open(sys.argv[1] + ".ready", "w").close()
for mode in ("flip", "short"):
    c, _ = s.accept(); f = c.makefile("rwb")
    for line in f:
        req = json.loads(line)
        if "offset" not in req:
            rep = {"ok": True, "id": req["id"], "metadata": {}, "size": len(data),
                   "crc32": "%08x" % zlib.crc32(data), "version": "v1"}
        else:
            body = bytearray(data)
            if mode == "flip": body[1234] ^= 1
            else: body = body[:2000]
            rep = {"ok": True, "id": req["id"], "version": "v1", "offset": 0,
                   "size": len(data), "data": base64.b64encode(bytes(body)).decode(), "eof": True}
        f.write((json.dumps(rep) + "\n").encode()); f.flush()
    c.close()
PY
fake_pid=$!
for _ in $(seq 50); do [ -e "$FAKE.ready" ] && break; sleep 0.1; done
mkdir "$TMP/bad"
for what in "CRC-32" "got 2000 bytes"; do
    out=$("$PARLECTL" --socket "$FAKE" export j0001 -o "$TMP/bad/m.safetensors" 2>&1) &&
        fail "a corrupted transfer succeeded"
    echo "$out" | grep -q "$what.*the transfer is corrupt" || fail "corrupt transfer message: $out"
    [ -z "$(ls -A "$TMP/bad")" ] || fail "a corrupted transfer left $(ls -A "$TMP/bad")"
done
wait "$fake_pid"

# Plot: two jobs, one stroke colour each; rendered, the image is not blank.
ctl plot "$a" "$b" -o "$TMP/curves.svg" >/dev/null || fail "plot"
python3 -c '
import re, sys
svg = open(sys.argv[1]).read()
colours = set(re.findall(r"<polyline[^>]*stroke=\"(#[0-9a-f]{6})\"", svg))
assert len(colours) == 2, colours
# Train loss and lr solid; the test loss and error of the master dashed.
assert len(re.findall(r"<polyline", svg)) == 8, "4 curves x 2 jobs"
assert len(re.findall(r"<polyline[^>]*stroke-dasharray", svg)) == 4, "2 dashed x 2 jobs"
for t in ("train loss", "test error", "learning rate", "passes over the data", sys.argv[2], sys.argv[3]):
    assert t in svg, t
' "$TMP/curves.svg" "$a" "$b" || fail "the SVG does not have one curve per job"
ctl plot nosuch -o "$TMP/none.svg" 2>/dev/null && fail "plot of an unknown job succeeded"
[ ! -e "$TMP/none.svg" ] || fail "a failed plot left a file"
if command -v rsvg-convert >/dev/null; then
    rsvg-convert "$TMP/curves.svg" -o "$TMP/curves.png" || fail "rsvg-convert"
    python3 - "$TMP/curves.png" <<'PY' || fail "the rendered plot is blank or lacks a job's colour"
import struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
assert raw[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat = 8, b""
while pos < len(raw):
    n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
    body = raw[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 3 if ctype == 2 else 4
data, stride = zlib.decompress(idat), w * bpp
prev, rows, at = bytearray(stride), [], 0
for _ in range(h):
    ft, line = data[at], bytearray(data[at + 1:at + 1 + stride]); at += 1 + stride
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0; b = prev[i]; c = prev[i - bpp] if i >= bpp else 0
        if ft == 1: line[i] = (line[i] + a) & 255
        elif ft == 2: line[i] = (line[i] + b) & 255
        elif ft == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif ft == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
ink = sum(1 for r in rows for i in range(0, stride, bpp) if tuple(r[i:i + 3]) != (255, 255, 255))
assert ink > 0.005 * w * h, f"only {ink} non-white pixels"
seen = {tuple(r[i:i + 3]) for r in rows for i in range(0, stride, bpp)}
for hexc in ("1f77b4", "ff7f0e"):  # plot_svg.c palette: jobs 0 and 1
    assert tuple(bytes.fromhex(hexc)) in seen, hexc
PY
else
    echo "skip: rsvg-convert (librsvg2-bin) is not installed: the PNG check did not run"
fi
stop_daemon
echo PASS
