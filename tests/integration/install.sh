#!/bin/bash
# `meson install --destdir`: the programs, the example job files, the man
# pages and the bash completion land in their places, and the installed
# parled and parlectl run a short job (plot, export -o) from there.
. "$(dirname "$0")/lib.sh"
[ -n "${PARLE_BUILD_ROOT:-}" ] || fail "PARLE_BUILD_ROOT is not set (tests/integration/meson.build)"

# --no-rebuild: meson test has built everything, and other tests run beside this one.
meson install -C "$PARLE_BUILD_ROOT" --destdir "$TMP/root" --no-rebuild >"$TMP/install.log" 2>&1 ||
    fail "meson install: $(tail -n 20 "$TMP/install.log")"
prefix=$(meson introspect "$PARLE_BUILD_ROOT" --buildoptions |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
ROOT=$TMP/root$prefix
for f in bin/parled bin/parlectl bin/parle-train; do
    [ -x "$ROOT/$f" ] || fail "$f was not installed"
done
for f in "$PARLE_SOURCE_ROOT"/configs/*.json; do
    cmp -s "$f" "$ROOT/share/parle/configs/$(basename "$f")" ||
        fail "configs/$(basename "$f") is not in share/parle/configs"
done
comp=$ROOT/share/bash-completion/completions/parlectl
[ -f "$comp" ] || fail "no bash completion"
# The systemd units, ExecStart pointing at the installed parled.
for u in parled.service parled.socket; do
    [ -f "$ROOT/lib/systemd/system/$u" ] || fail "$u was not installed in lib/systemd/system"
done
grep -q "^ExecStart=$prefix/bin/parled " "$ROOT/lib/systemd/system/parled.service" ||
    fail "parled.service: $(grep ExecStart "$ROOT/lib/systemd/system/parled.service")"
PAGES="$ROOT/share/man/man8/parled.8 $ROOT/share/man/man1/parlectl.1 $ROOT/share/man/man5/parle-job.5"
for p in $PAGES; do
    [ -s "$p" ] || fail "$p was not installed"
done

# The completion offers every command of `parlectl --help`, and a command's options.
cmds=$("$ROOT/bin/parlectl" --help | sed -n '/^commands:$/,/^$/s/^  \([a-z]\+\) .*/\1/p')
[ -n "$cmds" ] || fail "no commands in parlectl --help"
offered=$(bash -c '. "$1"; COMP_WORDS=(parlectl ""); COMP_CWORD=1; _parlectl; echo "${COMPREPLY[*]}"' _ "$comp")
for c in $cmds ls; do
    echo " $offered " | grep -q " $c " || fail "the completion does not offer $c: $offered"
done
offered=$(bash -c '. "$1"; COMP_WORDS=(parlectl submit --w); COMP_CWORD=2; _parlectl; echo "${COMPREPLY[*]}"' _ "$comp")
[ "$offered" = "--wait --watch" ] || fail "submit --w completes to '$offered'"

# Every job field of docs/config.md is in parle-job(5), and every parled option in parled(8).
fields=$(sed -n 's/^| `\([a-z_A-Z0-9]*\)` |.*/\1/p' "$PARLE_SOURCE_ROOT/docs/config.md")
[ "$(echo "$fields" | wc -l)" -gt 40 ] || fail "few fields found in docs/config.md"
for f in $fields; do
    grep -q "^\\\\fB\(.*\.\)\?$f\\\\fR\$" "$ROOT/share/man/man5/parle-job.5" ||
        fail "parle-job(5) lacks the field $f"
done
for o in $("$ROOT/bin/parled" --help | sed -n 's/^  \(--[a-z-]*\).*/\1/p'); do
    grep -qF -- "\\fB${o//-/\\-}" "$ROOT/share/man/man8/parled.8" || fail "parled(8) lacks $o"
done

if command -v man >/dev/null; then
    for p in $PAGES; do
        MANWIDTH=100 man -l "$p" >"$TMP/man.txt" 2>"$TMP/man.err" || fail "man -l $p: $(cat "$TMP/man.err")"
        grep -q "^NAME" "$TMP/man.txt" || fail "man -l $p shows no NAME section"
        [ ! -s "$TMP/man.err" ] || fail "man -l $p warned: $(cat "$TMP/man.err")"
    done
    MANWIDTH=100 man -l "$ROOT/share/man/man1/parlectl.1" | grep -q "connection was lost" ||
        fail "parlectl(1) lacks the exit statuses"
else
    echo "SKIP: man -l (no man; scripts/install-deps.sh installs man-db)"
fi

# The installed programs through a short job.
PARLED=$ROOT/bin/parled PARLECTL=$ROOT/bin/parlectl
start_daemon
mlp_job "$TMP/job.json" 1
id=$(ctl submit "$TMP/job.json" -q --wait) || fail "installed parlectl submit --wait exited $?"
ctl ls --state done | grep -q "^$id .*done" || fail "installed parlectl ls --state done"
ctl plot "$id" -o "$TMP/curves.svg" >/dev/null || fail "installed parlectl plot"
grep -q "<svg" "$TMP/curves.svg" || fail "plot wrote no SVG"
ctl export "$id" -o "$TMP/model.safetensors" >/dev/null || fail "installed parlectl export -o"
[ -s "$TMP/model.safetensors" ] || fail "export -o wrote nothing"
"$ROOT/bin/parle-train" --eval "$TMP/model.safetensors" "$TMP/job.json" >/dev/null ||
    fail "installed parle-train --eval"
stop_daemon
echo PASS
