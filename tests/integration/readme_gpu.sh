#!/bin/bash
# The README's "Train on a GPU" section, followed where no GPU is needed. Its
# commands must be the ones below (a changed command fails here until this
# test follows it too), and docs/gpu.md must give the same ones. Then: the
# build's options exist; the group the commands add a user to is the one the
# sysusers.d entry makes and the socket unit serves (systemd.sh runs them);
# the data script on an archive the test makes (no network); and the user's
# parlectl commands verbatim against a parled of the test's, the job made
# tiny and on the CPU by --set options added after the README's own, with the
# job file installed by `meson install` of this build: as root, then (as
# root, with useradd and setpriv) as a member of the group who is not root,
# from a home of her own that only she may enter. The CUDA build command
# runs in gpu_build_path.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/users_lib.sh"
[ -n "${PARLE_BUILD_ROOT:-}" ] || fail "PARLE_BUILD_ROOT is not set (tests/integration/meson.build)"
README=$PARLE_SOURCE_ROOT/README.md

cat >"$TMP/expected" <<'EOF'
./scripts/setup-gpu.sh build-gpu && ninja -C build-gpu
meson install -C build-gpu
systemd-sysusers
systemctl enable --now parled.socket parled.service
usermod -aG parle alice
./scripts/fetch-cifar.py cifar10
parlectl devices
parlectl submit /usr/local/share/parle/configs/wrn-16-4-cifar10-parle.json --set devices=gpu:1
parlectl watch j0001
parlectl status j0001
parlectl plot j0001 -o wrn-16-4.svg
parlectl export j0001 -o wrn-16-4.safetensors
EOF
awk '/^## /{on = ($0 == "## Train on a GPU")} on && /^```/{code = !code; next} on && code' "$README" \
    >"$TMP/readme"
diff "$TMP/expected" "$TMP/readme" >"$TMP/diff" ||
    fail "the README's GPU section changed; follow it in tests/integration/readme_gpu.sh too: $(cat "$TMP/diff")"
while IFS= read -r cmd; do
    grep -qxF "$cmd" "$PARLE_SOURCE_ROOT/docs/gpu.md" || fail "docs/gpu.md lacks the README's '$cmd'"
done <"$TMP/expected"

# The build: -Dcuda is an option of this build; CUDA found or not, it says which.
meson introspect "$PARLE_BUILD_ROOT" --buildoptions | python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
assert "cuda" in opts and "gpu_libs_root" in opts, "no cuda or gpu_libs_root option"
print("build: -Dcuda is an option (this build: %s)" % opts["cuda"])' || fail "meson options"

# The group: the one usermod adds to, the sysusers.d entry makes, the socket unit serves.
grep -qx "g parle -" "$PARLE_SOURCE_ROOT/data/parle-sysusers.conf" || fail "no group parle in data/parle-sysusers.conf"
grep -qx "SocketGroup=parle" "$PARLE_SOURCE_ROOT/data/parled.socket" || fail "parled.socket's group is not parle"

[ -x "$PARLE_SOURCE_ROOT/scripts/setup-gpu.sh" ] || fail "scripts/setup-gpu.sh is not executable"
grep -qx "WantedBy=multi-user.target" "$PARLE_SOURCE_ROOT/data/parled.service.in" ||
    fail "parled.service cannot be enabled to start at boot"

# The job files as `meson install` puts them (the README names them under /usr/local).
meson install -C "$PARLE_BUILD_ROOT" --destdir "$TMP/root" --no-rebuild >"$TMP/install.log" 2>&1 ||
    fail "meson install: $(tail -n 20 "$TMP/install.log")"
prefix=$(meson introspect "$PARLE_BUILD_ROOT" --buildoptions |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
readme_conf=/usr/local/share/parle/configs/wrn-16-4-cifar10-parle.json
conf=$TMP/root$prefix/share/parle/configs/wrn-16-4-cifar10-parle.json
[ -f "$conf" ] || fail "meson install put no $prefix/share/parle/configs/wrn-16-4-cifar10-parle.json"

# A member who is not root, where the test may make one.
trap 'rc=$?; remove_users; (exit $rc); cleanup' EXIT
try_users rg

# The data, unpacked where the shipped config looks, here under $TMP.
root=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"]["root"])' "$conf")
[ "$root" = /var/lib/parle/data/cifar10 ] || fail "the config reads $root, not where fetch-cifar.py unpacks"
python3 "$(dirname "$0")/fake_cifar.py" "$TMP/cifar.tar.gz" cifar10
(cd "$PARLE_SOURCE_ROOT" && ./scripts/fetch-cifar.py cifar10 --archive "$TMP/cifar.tar.gz" \
    --md5 "$(md5sum "$TMP/cifar.tar.gz" | cut -d' ' -f1)" --dest "$TMP/cifar10" --group "$GROUP") \
    >"$TMP/fetch.out" 2>&1 || fail "fetch-cifar.py: $(cat "$TMP/fetch.out")"

# user_commands WHO: the README's parlectl commands, as written but for the
# job file's place and the --set options after the README's own, in the
# current folder (WHO's home), against a fresh state dir.
user_commands() {
    local who=$1 run=()
    [ "$who" = root ] || run=(as "$who" env HOME="$PWD")
    parlectl() { "${run[@]}" "$PARLECTL" --socket "$SOCK" "$@"; }
    parlectl devices >"$TMP/devices" 2>&1 || fail "$who: parlectl devices: $(cat "$TMP/devices")"
    grep -Eq "^cpu +[0-9]+ cores +idle$" "$TMP/devices" || fail "$who: parlectl devices printed: $(cat "$TMP/devices")"
    id=$(parlectl submit "${conf}" --set devices=gpu:1 -q --set devices=cpu \
        --set data.root="$TMP/cifar10" --set model.depth=10 --set model.width=1 --set optim.batch=8 \
        --set algorithm.L=1 --set epochs=1 --set checkpoint.every_epochs=0 \
        --set data.normalize=channel) || fail "$who: parlectl submit" # ZCA's 3072x3072 set-up takes minutes
    [ "$id" = j0001 ] || fail "the first job of a fresh state dir is $id, not the README's j0001"
    parlectl watch j0001 >"$TMP/watch" 2>&1 || fail "$who: parlectl watch: $(cat "$TMP/watch")"
    parlectl status j0001 >"$TMP/status" || fail "$who: parlectl status"
    grep -q "done" "$TMP/status" || fail "$who: the job did not end done: $(cat "$TMP/status")"
    parlectl plot j0001 -o wrn-16-4.svg >/dev/null || fail "$who: parlectl plot"
    grep -q "<svg" wrn-16-4.svg || fail "$who: plot wrote no SVG"
    parlectl export j0001 -o wrn-16-4.safetensors >/dev/null || fail "$who: parlectl export"
    [ -s wrn-16-4.safetensors ] || fail "$who: export wrote nothing"
    [ "$(stat -c %U wrn-16-4.safetensors)" = "$who" ] || fail "$who: the export is not $who's"
}
grep -qF "parlectl submit $readme_conf --set devices=gpu:1" "$TMP/expected" || fail "the README's job file moved"

if [ "$members" = 1 ]; then start_daemon --group "$GROUP"; else start_daemon; fi
mkdir -m 700 "$TMP/roothome"
(cd "$TMP/roothome" && user_commands root) || exit 1
stop_daemon
if [ "$members" = 1 ]; then
    STATE=$TMP/state-member SOCK=$TMP/member.sock
    start_daemon --group "$GROUP"
    home=$TMP/home-$alice
    mkdir -m 700 "$home" && chown "$alice:$GROUP" "$home"
    (cd "$home" && user_commands "$alice") || exit 1
    stop_daemon
    echo "readme_gpu: the user's commands as root and as $alice, a member, from her home"
else
    echo "SKIP (part): the user's commands as a member who is not root (needs root, useradd, setpriv)"
fi
echo "readme_gpu: the README's GPU section's commands, as far as they run without a GPU: OK"
