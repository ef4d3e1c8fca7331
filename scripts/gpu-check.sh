#!/bin/bash
# Everything a GPU machine should check, in one command (docs/gpu.md):
#   build    the CUDA variant: meson setup BUILD -Dcuda=enabled -Dwerror=true
#            -Dbuildtype=release, then ninja
#   test     meson test --suite gpu
#   memcheck the gpu suite (less the Fashion-MNIST run) under compute-sanitizer
#   racecheck the CUDA ops test under compute-sanitizer --tool racecheck
#   bench    bench/torch_gpu_step.py: our GPU step beside PyTorch's
# and ends with one line per step (pass, FAIL or skip) and the logs under OUT.
# Without a GPU (nvidia-smi absent or listing none) it stops after the build
# with a SKIP line and exit status 0.
#
#   scripts/gpu-check.sh [--out DIR] [--deps DIR] [--build DIR] [--steps LIST]
#     --out DIR     logs and the summary (default ./gpu-check-out)
#     --deps DIR    Debian .deb files for a machine without package access
#                   (libuv1 libuv1-dev libcjson1 libcjson-dev libdnnl2 libdnnl-dev
#                   pkgconf pkgconf-bin libpkgconf3, zlib1g-dev if zlib.h is
#                   missing): unpacked with dpkg -x into OUT/deps/root, never /
#     --build DIR   the build directory (default build-gpu)
#     --steps LIST  comma-separated subset of test,memcheck,racecheck,bench
#                   (default all; the build always runs), e.g. to split the
#                   work over several calls with the same --out and --build
# cuDNN, cuBLAS and NCCL are found wherever installed, pip's layout
# (site-packages/nvidia/*) included; meson and ninja may be pip's too.
set -u
cd "$(dirname "$0")/.." || exit 2
out="gpu-check-out"
deps=""
build="build-gpu"
steps=test,memcheck,racecheck,bench

usage() {
    sed -n '/^#   scripts/,/^# cuDNN/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case $1 in
    --out | --deps | --build | --steps)
        [ $# -ge 2 ] || { echo "gpu-check: $1 needs a value" >&2; usage >&2; exit 2; }
        case $1 in
        --out) out=$2 ;; --deps) deps=$2 ;; --build) build=$2 ;; --steps) steps=$2 ;;
        esac
        shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done
for s in $(echo "$steps" | tr ',' ' '); do
    case $s in test | memcheck | racecheck | bench) ;;
    *) echo "gpu-check: unknown step $s (test, memcheck, racecheck, bench)" >&2; exit 2 ;;
    esac
done
if [ -n "$deps" ] && [ ! -d "$deps" ]; then
    echo "gpu-check: --deps $deps is not a directory" >&2
    exit 2
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
summary=""     # lines "step<TAB>result<TAB>detail"
failed=0

record() {
    summary="$summary$1	$2	$3
"
    [ "$2" = FAIL ] && failed=1
    echo "== $1: $2${3:+ ($3)}"
}

wants() {
    case ",$steps," in *",$1,"*) return 0 ;; esac
    return 1
}

finish() {
    echo
    echo "==== gpu-check summary (logs in $out) ===="
    printf '%s' "$summary" | while IFS='	' read -r name result detail; do
        printf '%-10s %-5s %s\n' "$name" "$result" "$detail"
    done | tee "$out/summary.txt"
    exit "$failed"
}

prepend() { # prepend VAR DIR: DIR first on the colon list VAR
    eval "cur=\${$1:-}"
    # shellcheck disable=SC2154
    export "$1=$2${cur:+:$cur}"
}

multiarch=$(gcc -print-multiarch 2>/dev/null || true)
[ -n "$multiarch" ] || multiarch=x86_64-linux-gnu

# --deps: unpack every .deb into a prefix of our own. The .pc files say
# prefix=/usr; rather than PKG_CONFIG_SYSROOT_DIR (which pkgconf applies to
# every -I and -L, also those of system .pc files, and not to all variables)
# copies of them get the prefix's own paths.
unpack_deps() {
    root=$out/deps/root
    rm -rf "$out/deps"
    mkdir -p "$root" "$out/deps/pkgconfig"
    command -v dpkg >/dev/null || { echo "dpkg is needed to unpack $deps"; return 1; }
    n=0
    for deb in "$deps"/*.deb; do
        [ -f "$deb" ] || continue
        dpkg -x "$deb" "$root" || { echo "dpkg -x $deb failed"; return 1; }
        n=$((n + 1))
    done
    [ "$n" -gt 0 ] || { echo "no .deb files in $deps"; return 1; }
    # Absolute symbolic links (libz.so -> /lib/...) to the copy in the prefix, if it has one.
    find "$root" -type l | while read -r link; do
        target=$(readlink "$link")
        case $target in /*) [ -e "$root$target" ] && ln -sfn "$root$target" "$link" ;; esac
    done
    find "$root" -name '*.pc' -path '*/pkgconfig/*' | while read -r pc; do
        sed -e "s#^\([A-Za-z_][A-Za-z0-9_]*\)=/usr\(/\|\$\)#\1=$root/usr\2#" \
            -e "s#\([[:space:]]-[IL]\)/usr/#\1$root/usr/#g" \
            "$pc" >"$out/deps/pkgconfig/$(basename "$pc")"
    done
    unset PKG_CONFIG_SYSROOT_DIR
    prepend PKG_CONFIG_PATH "$out/deps/pkgconfig"
    for d in "$root/usr/include" "$root/usr/include/$multiarch"; do
        [ -d "$d" ] && prepend CPATH "$d"
    done
    for d in "$root/usr/lib" "$root/usr/lib/$multiarch" "$root/lib/$multiarch"; do
        [ -d "$d" ] && { prepend LIBRARY_PATH "$d"; prepend LD_LIBRARY_PATH "$d"; }
    done
    # pkg-config itself, if the machine has none.
    if ! command -v pkg-config >/dev/null && [ -x "$root/usr/bin/pkgconf" ]; then
        export PKG_CONFIG="$root/usr/bin/pkgconf"
        prepend PATH "$root/usr/bin"
    fi
    echo "unpacked $n packages into $root"
    ls "$out/deps/pkgconfig"
}

# nvcc and compute-sanitizer: on PATH, else the toolkit's usual places.
find_cuda_tools() {
    for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
        if ! command -v nvcc >/dev/null && [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then
            prepend PATH "$d/bin"
        fi
    done
    sanitizer=$(command -v compute-sanitizer || true)
    nvcc_dir=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
    for c in "$nvcc_dir/compute-sanitizer" "$nvcc_dir/../compute-sanitizer/compute-sanitizer"; do
        [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer=$c
    done
}

# pip's NVIDIA wheels: site-packages/nvidia/<lib>/{include,lib}. Meson finds
# cuDNN, cuBLAS and NCCL under -Dgpu_libs_root and links them with an rpath;
# they are not put on CPATH, which would also put nvidia/cu13's copy of the
# CUDA runtime headers ahead of the toolkit's in every C file.
gpu_roots=""
find_pip_libs() {
    site=$(python3 -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))' \
        2>/dev/null) || return 0
    for d in "$site"/nvidia/*/; do
        d=${d%/}
        [ -d "$d/lib" ] || continue
        case $d in *,*) continue ;; esac # meson splits array options at commas
        gpu_roots="$gpu_roots${gpu_roots:+,}$d"
        prepend LD_LIBRARY_PATH "$d/lib"
    done
    [ -n "$gpu_roots" ] && echo "pip's NVIDIA libraries: $gpu_roots"
}

# meson and ninja: on PATH, else pip's (python3 -m mesonbuild.mesonmain, ninja.BIN_DIR).
find_build_tools() {
    prepend PATH "$HOME/.local/bin"
    if command -v meson >/dev/null; then
        meson=(meson)
    elif python3 -c 'import mesonbuild' 2>/dev/null; then
        meson=(python3 -m mesonbuild.mesonmain)
    else
        echo "meson not found (pip install meson, or put it on PATH)"
        return 1
    fi
    if ! command -v ninja >/dev/null; then
        nbin=$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null) || {
            echo "ninja not found"; return 1; }
        prepend PATH "$nbin"
    fi
}

# The results of the last meson test run: "ok fail skip".
test_counts() {
    python3 - "$1" <<'PY'
import json, sys
ok = fail = skip = 0
for line in open(sys.argv[1]):
    r = json.loads(line).get("result")
    if r in ("OK", "EXPECTEDFAIL"):
        ok += 1
    elif r == "SKIP":
        skip += 1
    else:
        fail += 1
print(ok, fail, skip)
PY
}

# ---- environment ----
env_ok=1
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    if [ -n "$deps" ]; then
        unpack_deps || env_ok=0
    fi
    find_cuda_tools
    find_pip_libs
    find_build_tools || env_ok=0
    echo "nvcc: $(command -v nvcc || echo none); compute-sanitizer: ${sanitizer:-none}"
} >"$out/env.log" 2>&1
cat "$out/env.log"
if [ "$env_ok" = 0 ]; then
    record env FAIL "see $out/env.log"
    finish
fi
if [ -n "$deps" ]; then
    record deps pass "$out/deps/root"
fi

# ---- build ----
setup_args=(-Dcuda=enabled -Dwerror=true -Dbuildtype=release)
if grep -q "option('gpu_libs_root'" meson_options.txt && [ -n "$gpu_roots" ]; then
    setup_args+=("-Dgpu_libs_root=$gpu_roots")
fi
[ -f "$build/build.ninja" ] && setup_args+=(--reconfigure)
echo "== build: ${meson[*]} setup $build ${setup_args[*]}"
if ! "${meson[@]}" setup "$build" "${setup_args[@]}" >"$out/setup.log" 2>&1; then
    tail -30 "$out/setup.log"
    record build FAIL "meson setup: $out/setup.log"
    finish
fi
grep -A8 '^  Features' "$out/setup.log"
if ! ninja -C "$build" >"$out/build.log" 2>&1; then
    grep -E "error|warning" "$out/build.log" | head -40
    record build FAIL "ninja: $out/build.log"
    finish
fi
record build pass "$build"

ngpus=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1; then
    ngpus=$(grep -c '^GPU ' "$out/nvidia-smi.txt")
fi
if [ "$ngpus" = 0 ]; then
    echo "SKIP: no GPU on this machine (nvidia-smi absent or lists none): built only"
    record gpu skip "no GPU: nothing run"
    finish
fi
cat "$out/nvidia-smi.txt"

# ---- the gpu suite ----
device_seen=1
if wants test; then
    "${meson[@]}" test -C "$build" --suite gpu --print-errorlogs --num-processes 1 \
        >"$out/test.log" 2>&1
    cp "$build/meson-logs/testlog.json" "$out/test.json" 2>/dev/null
    grep -E '^ *[0-9]+/[0-9]+ ' "$out/test.log"
    read -r ok fail skip <<<"$(test_counts "$out/test.json" 2>/dev/null || echo "0 1 0")"
    if [ "$fail" -gt 0 ]; then
        record test FAIL "$ok passed, $fail failed, $skip skipped: $out/test.log"
    elif [ "$ok" = 0 ]; then
        device_seen=0
        record test skip "every test skipped: the backend sees no CUDA device"
    else
        record test pass "$ok passed, $skip skipped"
    fi
fi

# ---- compute-sanitizer ----
# API errors are not reported: cuDNN and cuBLAS probe the driver with calls
# that fail by design, and our own failures already fail the tests.
# meson test keeps the output of passing tests in its own log
# (meson-logs/NAME-*.txt for --logbase NAME): it is added to LOG.
sanitize() { # sanitize NAME LOG CMD...: run CMD, judge LOG
    name=$1 log=$2
    shift 2
    rm -f "$build/meson-logs/$name"*
    "$@" >"$log" 2>&1
    rc=$?
    for f in "$build/meson-logs/$name"*.txt; do
        [ -f "$f" ] && cat "$f" >>"$log"
    done
    errors=$(grep -ho 'ERROR SUMMARY: [0-9]* error' "$log" |
        awk '{ n++; e += $3 } END { printf "%d programs checked, %d errors", n, e }')
    if grep -q "Device not supported" "$log"; then
        record "$name" skip "compute-sanitizer does not support this device here: $log"
    elif [ "$rc" = 77 ]; then
        record "$name" skip "no CUDA device"
    elif [ "$rc" = 0 ]; then
        record "$name" pass "$errors"
    else
        record "$name" FAIL "exit $rc, $errors: $log"
    fi
}
if wants memcheck || wants racecheck; then
    if [ -z "$sanitizer" ]; then
        record sanitizer skip "compute-sanitizer not found"
    elif [ "$device_seen" = 0 ]; then
        record sanitizer skip "the backend sees no CUDA device"
    else
        if wants memcheck; then
            # The Fashion-MNIST run (suite gpu-learning) would take hours under memcheck.
            sanitize memcheck "$out/memcheck.log" "${meson[@]}" test -C "$build" --suite gpu \
                --no-suite gpu-learning --num-processes 1 --timeout-multiplier 20 \
                --print-errorlogs --logbase memcheck \
                --wrapper "$sanitizer --tool memcheck --error-exitcode 99 --report-api-errors no"
        fi
        if wants racecheck && [ -x "$build/tests/gpu/test_gpu_ops" ]; then
            sanitize racecheck "$out/racecheck.log" timeout 1200 "$sanitizer" --tool racecheck \
                --error-exitcode 99 --report-api-errors no "$build/tests/gpu/test_gpu_ops"
        fi
    fi
fi

# ---- benchmark ----
if wants bench; then
    if [ "$device_seen" = 0 ]; then
        record bench skip "the backend sees no CUDA device"
    else
        python3 bench/torch_gpu_step.py --ours "$build/bench/gpu_step" >"$out/bench.txt" 2>&1
        rc=$?
        sed -n '/^GPU step/,$p' "$out/bench.txt" | grep -v '^SUMMARY'
        case $rc in
        0) record bench pass "$out/bench.txt" ;;
        77) record bench skip "no CUDA device for gpu_step" ;;
        *) tail -20 "$out/bench.txt"; record bench FAIL "exit $rc: $out/bench.txt" ;;
        esac
    fi
fi
finish
