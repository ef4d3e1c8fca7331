#!/bin/bash
# --json on every parlectl command: the output parses as JSON (one document,
# or JSON lines for watch and logs -f), and every command's help offers it.
. "$(dirname "$0")/lib.sh"

# is_json FILE [lines]: FILE is one JSON document, or (lines) one per line.
is_json() {
    python3 - "$@" <<'PY' || fail "not JSON ($*): $(head -c 400 "$1")"
import json, sys
text = open(sys.argv[1]).read()
docs = [l for l in text.splitlines() if l.strip()] if len(sys.argv) > 2 else [text]
assert docs, "empty"
for d in docs:
    json.loads(d)
PY
}

for c in submit status list ls watch logs cancel resume wait export plot devices version shutdown; do
    ctl "$c" --help | head -n 1 | grep -q -- "--json" || fail "$c --help does not offer --json"
done

start_daemon
mlp_job "$TMP/quick.json" 1
mlp_job "$TMP/long.json" 500

ctl submit "$TMP/quick.json" --json >"$TMP/o" || fail "submit --json"; is_json "$TMP/o"
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$TMP/o")
ctl wait "$id" --json >"$TMP/o" || fail "wait --json"; is_json "$TMP/o"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["state"] == "done"' "$TMP/o" ||
    fail "wait --json does not show the job done"
ctl submit "$TMP/quick.json" --wait --json >"$TMP/o" || fail "submit --wait --json"; is_json "$TMP/o"
ctl submit "$TMP/quick.json" --watch --json >"$TMP/o" || fail "submit --watch --json"
tail -n 1 "$TMP/o" >"$TMP/o1"; is_json "$TMP/o1"  # the event lines after the job object
ctl status --json >"$TMP/o" || fail "status --json"; is_json "$TMP/o"
ctl status "$id" --json >"$TMP/o" || fail "status ID --json"; is_json "$TMP/o"
ctl list --json >"$TMP/o" || fail "list --json"; is_json "$TMP/o"
ctl ls --state done --json >"$TMP/o" || fail "ls --json"; is_json "$TMP/o"
ctl logs "$id" --json >"$TMP/o" || fail "logs --json"; is_json "$TMP/o"
ctl logs "$id" -f --json >"$TMP/o" || fail "logs -f --json"; is_json "$TMP/o" lines
ctl export "$id" -o "$TMP/m.safetensors" --json >"$TMP/o" || fail "export --json"; is_json "$TMP/o"
ctl plot "$id" -o "$TMP/c.svg" --json >"$TMP/o" || fail "plot --json"; is_json "$TMP/o"
ctl devices --json >"$TMP/o" || fail "devices --json"; is_json "$TMP/o"
ctl version --json >"$TMP/o" || fail "version --json"; is_json "$TMP/o"
long=$(ctl submit "$TMP/long.json" -q) || fail "submit long"
ctl cancel "$long" --json >"$TMP/o" || fail "cancel --json"; is_json "$TMP/o"
ctl shutdown --json >"$TMP/o" || fail "shutdown --json"; is_json "$TMP/o"
wait_exit 60 || fail "parled did not exit after shutdown"
echo "json_output: OK"
