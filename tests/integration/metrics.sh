#!/bin/bash
# parled --metrics-file read as the admin's Prometheus reads it (docs/monitoring.md):
# Debian's prometheus-node-exporter on a loopback port, its textfile collector
# pointed at the file's folder, /metrics fetched over HTTP while a job runs,
# one waits and the first ends, each time checked against `parlectl status
# --json`; promtool check metrics passes on the file; the file is mode 0644
# and goes with parled.
. "$(dirname "$0")/lib.sh"
exporter=$(command -v prometheus-node-exporter || true)
if [ -z "$exporter" ] || ! command -v promtool >/dev/null; then
    echo "SKIP: needs prometheus-node-exporter and promtool (Debian's prometheus package)"
    exit 77
fi
EXPORTER_PID=
trap 'rc=$?; [ -z "$EXPORTER_PID" ] || kill "$EXPORTER_PID" 2>/dev/null; (exit $rc); cleanup' EXIT

mkdir -m 755 "$TMP/textfile"
PROM=$TMP/textfile/parle.prom

# A bad path is refused at the start, naming the flag.
out=$("$PARLED" --socket "$SOCK" --state-dir "$STATE" --metrics-file "$TMP/textfile/parle.txt" 2>&1) &&
    fail "parled took a metrics file whose name does not end in .prom"
echo "$out" | grep -q -- "--metrics-file" || fail "the refusal does not name --metrics-file: $out"

start_daemon --devices cpu --metrics-file "$PROM" --metrics-interval 0.5
for _ in $(seq 100); do [ -s "$PROM" ] && break; sleep 0.1; done
[ -s "$PROM" ] || fail "parled wrote no $PROM within 10 s"
[ "$(stat -c %a "$PROM")" = 644 ] || fail "$PROM has mode $(stat -c %a "$PROM"), not 0644"

get() { # GET /metrics of the exporter on $port
    python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
        "http://127.0.0.1:$port/metrics"
}

# The exporter on a free loopback port (asked of the kernel; tried again if
# another program took it in between).
for _ in 1 2 3; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
        --collector.textfile --collector.textfile.directory="$TMP/textfile" \
        >"$TMP/exporter.log" 2>&1 &
    EXPORTER_PID=$!
    for _ in $(seq 100); do
        get >/dev/null 2>&1 && break
        kill -0 "$EXPORTER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$EXPORTER_PID" 2>/dev/null && break
    EXPORTER_PID=
done
[ -n "$EXPORTER_PID" ] || fail "prometheus-node-exporter did not start: $(tail -n 5 "$TMP/exporter.log")"

# scrape: /metrics into $TMP/scrape, status --json into $TMP/status.
scrape() {
    get >"$TMP/scrape" || fail "GET /metrics failed"
    ctl status --json >"$TMP/status" || fail "status --json"
}

# agree: what the exporter serves says what status says (see the script);
# the first difference printed, exit status 1.
agree() {
    python3 - "$TMP/scrape" "$TMP/status" <<'PY'
import json, re, sys
samples = {}
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.strip():
        continue
    m = re.match(r'^(\w+)(\{(.*)\})? (\S+)$', line.strip())
    if not m:
        sys.exit(f"unparsable line: {line!r}")
    labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
    samples[(m.group(1), labels)] = float(m.group(4))
def get(name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))
st = json.load(open(sys.argv[2]))
if get("node_textfile_scrape_error") != 0:
    sys.exit("node_exporter could not read the file (node_textfile_scrape_error)")
jobs = st["jobs"]
count = {}
for j in jobs:
    s = {"held": "queued", "preempted": "queued"}.get(j["state"], j["state"])
    count[s] = count.get(s, 0) + 1
for s in ("queued", "running", "done", "failed", "cancelled", "timeout"):
    if get("parle_jobs", state=s) != count.get(s, 0):
        sys.exit(f"parle_jobs{{state={s}}} {get('parle_jobs', state=s)}, status {count.get(s, 0)}")
if get("parle_queue_length") != count.get("queued", 0):
    sys.exit("parle_queue_length differs from status")
running = {j["id"]: j for j in jobs if j["state"] == "running"}
shown = {dict(l)["id"]: dict(l) for (n, l) in samples if n == "parle_job_steps"}
if set(shown) != set(running):
    sys.exit(f"running jobs: metrics {sorted(shown)}, status {sorted(running)}")
for i, j in running.items():
    l = shown[i]
    if (l["owner"], l["rule"], l["device"]) != (j["owner"]["user"], j["algorithm"], j["devices"]):
        sys.exit(f"{i}: labels {l}, status {j['owner']['user']} {j['algorithm']} {j['devices']}")
    steps = get("parle_job_steps", **l)
    if not 0 <= steps <= j["step"]:   # scraped before status was asked
        sys.exit(f"{i}: parle_job_steps {steps}, status step {j['step']}")
    if get("parle_job_progress_ratio", **l) is None or get("parle_job_images_per_second", **l) is None:
        sys.exit(f"{i}: no progress or speed")
owners = {j["owner"]["user"] for j in jobs}
for o in owners:
    live = [j for j in jobs if j["owner"]["user"] == o]
    for s in ("running", "queued"):
        want = sum(1 for j in live if {"held": "queued", "preempted": "queued"}.get(j["state"], j["state"]) == s)
        if get("parle_owner_jobs", owner=o, state=s) != want:
            sys.exit(f"parle_owner_jobs{{owner={o},state={s}}} {get('parle_owner_jobs', owner=o, state=s)}, status {want}")
free = st["daemon"]["state_dir_free_bytes"]
if free is not None and abs(get("parle_state_dir_free_bytes") - free) > 0.05 * free + 64e6:
    sys.exit(f"parle_state_dir_free_bytes {get('parle_state_dir_free_bytes')}, status {free}")
if not get("parle_uptime_seconds") > 0 or get("parle_info", version=st["daemon"]["version"]) != 1:
    sys.exit("parle_uptime_seconds or parle_info wrong")
PY
}

# until_agree WHAT PYTHON_CHECK: scrape until the two agree and the extra
# check on the scrape holds (the file is written every 0.5 s and at each
# event: they may differ for a moment), 30 s at most.
until_agree() {
    for _ in $(seq 60); do
        scrape
        if agree >"$TMP/why" 2>&1 && { python3 -c "$2" "$TMP/scrape" || ! echo "no line: $2" >>"$TMP/why"; }; then
            return 0
        fi
        sleep 0.5
    done
    fail "$1: the exporter's /metrics and status --json disagree: $(cat "$TMP/why")"
}
has() { # has 'REGEX'...: a python check that each matches a line of the scrape
    local res="" r
    for r in "$@"; do res="$res r'''$r''',"; done
    echo "import re, sys; t = open(sys.argv[1]).read(); sys.exit(0 if all(re.search(r, t, re.M) for r in [$res]) else 1)"
}

mlp_job "$TMP/long.json" 1000
a=$(ctl submit -q "$TMP/long.json") || fail "submit a"
b=$(ctl submit -q "$TMP/long.json") || fail "submit b"
wait_steps "$a" 60
until_agree "a runs, b waits" "$(has "^parle_job_steps\{.*id=\"$a\".*\} [1-9]")"
grep -q "^parle_queue_oldest_wait_seconds [0-9]" "$TMP/scrape" || fail "no oldest wait"
grep -q '^parle_device_jobs{device="cpu"} 1$' "$TMP/scrape" || fail "the CPU does not hold one job"
grep -q '^parle_device_memory_held_bytes{device="cpu"} [1-9]' "$TMP/scrape" ||
    fail "no memory held on the CPU"
promtool check metrics <"$PROM" >"$TMP/promtool" 2>&1 || fail "promtool check metrics: $(cat "$TMP/promtool")"
# Every metric the shipped Grafana dashboard queries is in the file.
python3 - "$PARLE_SOURCE_ROOT/data/grafana-parle.json" "$PROM" <<'PY' || fail "the dashboard queries what the file lacks"
import json, re, sys
exprs = [t["expr"] for p in json.load(open(sys.argv[1]))["panels"] for t in p.get("targets", [])]
have = set(re.findall(r"^# TYPE (\w+) ", open(sys.argv[2]).read(), re.M))
missing = sorted({m for e in exprs for m in re.findall(r"\bparle_\w+", e)} - have)
assert exprs and not missing, f"the dashboard queries {missing}, not in the file"
PY

# a ends (cancelled), b starts: the file follows.
ctl cancel "$a" >/dev/null || fail "cancel a"
wait_state "$a" cancelled 30
wait_steps "$b" 60
# (a may have been cancelled before its first checkpoint: b's is waited for)
until_agree "a ended, b runs" "$(has '^parle_jobs\{state="cancelled"\} 1$' '^parle_checkpoints_written_total [1-9]')"
grep -q "^parle_job_steps{.*id=\"$a\"" "$TMP/scrape" && fail "the ended job $a is still listed as running"
grep -q '^parle_scheduling_passes_total [1-9]' "$TMP/scrape" || fail "no scheduling passes counted"
promtool check metrics <"$PROM" >"$TMP/promtool" 2>&1 || fail "promtool check metrics: $(cat "$TMP/promtool")"

ctl cancel "$b" >/dev/null || fail "cancel b"
wait_state "$b" cancelled 30
until_agree "both ended" "$(has '^parle_jobs\{state="running"\} 0$')"
ls -a "$TMP/textfile" | grep -q tmp && fail "a temporary file was left in the textfile folder"
stop_daemon
[ ! -e "$PROM" ] || fail "parled left $PROM behind after its stop"
echo "ok"
