#!/bin/bash
# The README's "Train on a GPU" section, followed where no GPU is needed. Its
# commands must be the ones below (a changed command fails here until this
# test follows it too), and docs/gpu.md must give the same ones. Then: the
# build's options exist; the group the commands add a user to is the one the
# sysusers.d entry makes and the socket unit serves (systemd.sh runs them);
# the data script on an archive the test makes (no network); and the user's
# parlectl commands verbatim against a parled of the test's, the job made
# tiny and on the CPU by --set options added after the README's own.
. "$(dirname "$0")/lib.sh"
[ -n "${PARLE_BUILD_ROOT:-}" ] || fail "PARLE_BUILD_ROOT is not set (tests/integration/meson.build)"
README=$PARLE_SOURCE_ROOT/README.md

cat >"$TMP/expected" <<'EOF'
meson setup build-gpu -Dcuda=enabled && ninja -C build-gpu
meson install -C build-gpu
systemd-sysusers
systemctl enable --now parled.socket
usermod -aG parle alice
./scripts/fetch-cifar.py cifar10
parlectl devices
parlectl submit configs/wrn-16-4-cifar10-parle.json --set devices=gpu:1
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

# The data, unpacked where the shipped config looks, here under $TMP.
root=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"]["root"])' \
    "$PARLE_SOURCE_ROOT/configs/wrn-16-4-cifar10-parle.json")
[ "$root" = /var/lib/parle/data/cifar10 ] || fail "the config reads $root, not where fetch-cifar.py unpacks"
python3 "$(dirname "$0")/fake_cifar.py" "$TMP/cifar.tar.gz" cifar10
(cd "$PARLE_SOURCE_ROOT" && ./scripts/fetch-cifar.py cifar10 --archive "$TMP/cifar.tar.gz" \
    --md5 "$(md5sum "$TMP/cifar.tar.gz" | cut -d' ' -f1)" --dest "$TMP/cifar10" --group "$(id -gn)") \
    >"$TMP/fetch.out" 2>&1 || fail "fetch-cifar.py: $(cat "$TMP/fetch.out")"

# The user's commands, as written, in the source tree (configs/ relative).
start_daemon
export PARLE_SOCKET=$SOCK
cd "$PARLE_SOURCE_ROOT" || fail "cd"
parlectl() { "$PARLECTL" "$@"; }
parlectl devices >"$TMP/devices" || fail "parlectl devices"
grep -Eq "^cpu +[0-9]+ cores +idle$" "$TMP/devices" || fail "parlectl devices printed: $(cat "$TMP/devices")"
id=$(parlectl submit configs/wrn-16-4-cifar10-parle.json --set devices=gpu:1 -q --set devices=cpu \
    --set data.root="$TMP/cifar10" --set model.depth=10 --set model.width=1 --set optim.batch=8 \
    --set algorithm.L=1 --set epochs=1 --set checkpoint.every_epochs=0 \
    --set data.normalize=channel) || fail "parlectl submit" # ZCA's 3072x3072 set-up takes minutes
[ "$id" = j0001 ] || fail "the first job of a fresh state dir is $id, not the README's j0001"
parlectl watch j0001 >"$TMP/watch" || fail "parlectl watch: $(cat "$TMP/watch")"
parlectl status j0001 >"$TMP/status" || fail "parlectl status"
grep -q "done" "$TMP/status" || fail "the job did not end done: $(cat "$TMP/status")"
cd "$TMP" || fail "cd"
parlectl plot j0001 -o wrn-16-4.svg >/dev/null || fail "parlectl plot"
grep -q "<svg" wrn-16-4.svg || fail "plot wrote no SVG"
parlectl export j0001 -o wrn-16-4.safetensors >/dev/null || fail "parlectl export"
[ -s wrn-16-4.safetensors ] || fail "export wrote nothing"
stop_daemon
echo "readme_gpu: the README's GPU section's commands, as far as they run without a GPU: OK"
