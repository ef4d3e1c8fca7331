#!/bin/bash
# Everything a GPU machine should check, in three phases that can run as
# separate commands (docs/gpu.md, "Checking on a GPU machine"):
#   scripts/gpu-check.sh --phase a|b|c [--out DIR] [--deps DIR] [--data DIR]
#                        [--build DIR] [--archive FILE] [--budget SECONDS]
#     --phase a     build, the gpu suite, the Fashion-MNIST SGD run, the shipped
#                   Parle job through parled + parlectl at fp32 and tf32
#     --phase b     bench/torch_gpu_step.py (ours beside PyTorch) and bench/gpu_sync
#     --phase c     compute-sanitizer memcheck and racecheck on our own kernels
#     --steps LIST  instead of --phase: any of build,test,learning,job,bench,sync,
#                   memcheck,racecheck
#     --out DIR     logs, summary.txt and env.sh (default ./gpu-check-out)
#     --deps DIR    .deb files from scripts/gpu-carry.sh, unpacked into OUT/deps
#                   (never /)
#     --data DIR    Fashion-MNIST IDX files (scripts/gpu-carry.sh), used as data.root
#     --build DIR   the build directory (default build-gpu); a later phase reuses it
#     --archive F   a .tar.gz of OUT's logs at the end, to take the results away
#     --budget S    wall-clock seconds for the whole phase (default 540), for a
#                   machine held for a limited time: each step is killed at what
#                   is left, and the summary is still written
#     --tree        print the digest of the tree's files and exit: the summary's
#                   "tree:" line, to match a run on a copied tree to a local one
# The build has warnings as warnings (-Dwerror=false), counted in the summary,
# so that a newer host compiler cannot cost the build. Every step leaves one
# summary line (pass, FAIL or skip). OUT/env.sh sets PATH, LD_LIBRARY_PATH and
# PKG_CONFIG_PATH as the build saw them: source it to run parled, parle-train
# or a bench by hand. Without a GPU the phase stops after the build, exit 0.
set -u
cd "$(dirname "$0")/.." || exit 2
start=$(date +%s)
out="gpu-check-out"
deps=""
data=""
build="build-gpu"
steps=""
archive=""
budget=540

usage() {
    sed -n '/^#   scripts/,/^# or a bench/p' "$0" | sed 's/^# \{0,1\}//'
}

# The tree's files (tracked and untracked, less the ignored), as one digest.
tree_digest() {
    git ls-files -z -co --exclude-standard | sort -z | xargs -0 sha1sum 2>/dev/null |
        sha1sum | cut -c1-12
}

while [ $# -gt 0 ]; do
    case $1 in
    --out | --deps | --data | --build | --steps | --phase | --archive | --budget)
        [ $# -ge 2 ] || { echo "gpu-check: $1 needs a value" >&2; usage >&2; exit 2; }
        case $1 in
        --out) out=$2 ;; --deps) deps=$2 ;; --data) data=$2 ;; --build) build=$2 ;;
        --steps) steps=$2 ;; --archive) archive=$2 ;; --budget) budget=$2 ;;
        --phase)
            case $2 in
            a) steps=build,test,learning,job ;;
            b) steps=build,bench,sync ;;
            c) steps=build,memcheck,racecheck ;;
            *) echo "gpu-check: --phase is a, b or c" >&2; exit 2 ;;
            esac ;;
        esac
        shift 2 ;;
    --tree) tree_digest; exit 0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done
[ -n "$steps" ] || { echo "gpu-check: give --phase or --steps" >&2; usage >&2; exit 2; }
for s in $(echo "$steps" | tr ',' ' '); do
    case $s in build | test | learning | job | bench | sync | memcheck | racecheck) ;;
    *) echo "gpu-check: unknown step $s" >&2; exit 2 ;;
    esac
done
case $budget in '' | *[!0-9]*) echo "gpu-check: --budget is whole seconds" >&2; exit 2 ;; esac
for d in "$deps" "$data"; do
    if [ -n "$d" ] && [ ! -d "$d" ]; then
        echo "gpu-check: $d is not a directory" >&2
        exit 2
    fi
done
[ -n "$data" ] && data=$(cd "$data" && pwd)
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

left() { # seconds of the budget left, less a margin for the summary
    echo $((budget - ($(date +%s) - start) - 10))
}

# bounded SECONDS CMD...: CMD under timeout, at most what the budget has left.
bounded() {
    t=$1
    shift
    l=$(left)
    [ "$l" -lt "$t" ] && t=$l
    [ "$t" -gt 0 ] || return 124
    timeout -k 5 "$t" "$@"
}

finish() {
    echo
    echo "==== gpu-check summary ($(($(date +%s) - start)) s, logs in $out) ===="
    printf '%s' "$summary" | while IFS='	' read -r name result detail; do
        printf '%-10s %-5s %s\n' "$name" "$result" "$detail"
    done | tee "$out/summary.txt"
    if [ -n "$archive" ]; then
        tar -czf "$archive" -C "$(dirname "$out")" --exclude deps "$(basename "$out")" &&
            echo "archive: $archive"
    fi
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
    # Absolute symbolic links (libz.so -> /lib/...): to the prefix's copy if
    # it has one, else to the machine's own library of that name.
    find "$root" -type l | while read -r link; do
        target=$(readlink "$link")
        case $target in
        /*)
            if [ -e "$root$target" ]; then
                ln -sfn "$root$target" "$link"
            elif [ ! -e "$target" ]; then
                base=$(basename "$target")
                for d in /lib/$multiarch /usr/lib/$multiarch /usr/lib64 /lib64; do
                    [ -e "$d/$base" ] && { ln -sfn "$d/$base" "$link"; break; }
                done
            fi ;;
        esac
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
# LD_LIBRARY_PATH also gets them, because cuDNN opens its sub-libraries
# itself. They are not put on CPATH, which would also put nvidia/cu13's copy
# of the CUDA runtime headers ahead of the toolkit's in every C file.
gpu_roots=""
find_pip_libs() {
    site=$(python3 -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))' \
        2>/dev/null) || return 0
    for d in "$site"/nvidia/*/ "$site"/nvidia/*/*/; do
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

write_env() { # OUT/env.sh: the environment the build and the steps saw
    {
        echo "# gpu-check.sh's environment: . $out/env.sh"
        for v in PATH LD_LIBRARY_PATH LIBRARY_PATH CPATH PKG_CONFIG_PATH PKG_CONFIG; do
            eval "val=\${$v:-}"
            # shellcheck disable=SC2154
            [ -n "$val" ] && printf 'export %s=%q\n' "$v" "$val"
        done
        printf 'PARLE_BUILD=%q\n' "$(cd "$build" 2>/dev/null && pwd || echo "$build")"
        [ -n "$data" ] && printf 'PARLE_FMNIST=%q\n' "$data"
    } >"$out/env.sh"
}

# The results of a meson test run: "ok fail skip".
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
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), steps $steps"
    # A tree copied onto the machine may sit in an older checkout, so its
    # HEAD says little: the digest of the files themselves names the tree
    # (the same command on the machine that sent it gives the same).
    echo "tree: $(tree_digest) (HEAD there $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    if [ -n "$deps" ]; then
        unpack_deps || env_ok=0
    elif [ -f "$out/env.sh" ] && [ -d "$out/deps/root" ]; then
        # A later phase: the packages an earlier one unpacked.
        # shellcheck disable=SC1091
        . "$out/env.sh" && echo "the environment of $out/env.sh (packages in $out/deps)"
    fi
    find_cuda_tools
    find_pip_libs
    find_build_tools || env_ok=0
    echo "nvcc: $(command -v nvcc || echo none) ($(nvcc --version 2>/dev/null | tail -1))"
    echo "gcc: $(gcc --version 2>/dev/null | head -1); compute-sanitizer: ${sanitizer:-none}"
    nvidia-smi 2>&1 | head -15
} >"$out/env.log" 2>&1
cat "$out/env.log"
write_env
if [ "$env_ok" = 0 ]; then
    record env FAIL "see $out/env.log"
    finish
fi
[ -n "$deps" ] && record deps pass "$out/deps/root"

# ---- build: warnings reported, not fatal ----
setup_args=(-Dcuda=enabled -Dwerror=false -Dbuildtype=release -Dmpi=disabled)
[ -n "$gpu_roots" ] && setup_args+=("-Dgpu_libs_root=$gpu_roots")
[ -f "$build/build.ninja" ] && setup_args+=(--reconfigure)
echo "== build: ${meson[*]} setup $build ${setup_args[*]}"
if ! bounded 120 "${meson[@]}" setup "$build" "${setup_args[@]}" >"$out/setup.log" 2>&1; then
    tail -30 "$out/setup.log"
    record build FAIL "meson setup: $out/setup.log"
    finish
fi
grep -A10 '^  Features' "$out/setup.log"
write_env
if ! bounded 300 ninja -C "$build" >"$out/build.log" 2>&1; then
    grep -E "error|warning" "$out/build.log" | head -40
    record build FAIL "ninja: $out/build.log"
    finish
fi
warnings=$(grep -c 'warning' "$out/build.log")
[ "$warnings" -gt 0 ] && grep 'warning' "$out/build.log" | sort -u | head -20
record build pass "$build, $warnings warning lines (build.log)"

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

# ---- the gpu suite, less the Fashion-MNIST run ----
if wants test; then
    bounded 330 "${meson[@]}" test -C "$build" --suite gpu --no-suite gpu-learning \
        --print-errorlogs --num-processes 4 --timeout-multiplier 0.3 \
        >"$out/test.log" 2>&1
    cp "$build/meson-logs/testlog.json" "$out/test.json" 2>/dev/null
    cp "$build/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null
    grep -E '^ *[0-9]+/[0-9]+ ' "$out/test.log"
    read -r ok fail skip <<<"$(test_counts "$out/test.json" 2>/dev/null || echo "0 1 0")"
    if [ "$fail" -gt 0 ]; then
        record test FAIL "$ok passed, $fail failed, $skip skipped: test.log"
    elif [ "$ok" = 0 ]; then
        record test skip "every test skipped: the backend sees no CUDA device"
    else
        record test pass "$ok passed, $skip skipped"
    fi
fi

# A job file with data.root at --data, for the Fashion-MNIST runs.
fmnist_job() { # fmnist_job IN OUT
    python3 - "$1" "$2" "$data" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))
if sys.argv[3]:
    job["data"]["root"] = sys.argv[3]
json.dump(job, open(sys.argv[2], "w"), indent=1)
PY
}

# ---- Fashion-MNIST: LeNet + SGD on the GPU (test_gpu_job fmnist) ----
if wants learning; then
    fmnist_job configs/lenet-fmnist-sgd.json "$out/lenet-fmnist-sgd.json"
    bounded 200 "$build/tests/gpu/test_gpu_job" fmnist "$out/lenet-fmnist-sgd.json" \
        >"$out/learning.log" 2>&1
    rc=$?
    tail -5 "$out/learning.log"
    case $rc in
    0) record learning pass "$(grep -i 'error' "$out/learning.log" | tail -1)" ;;
    77) record learning skip "$(tail -1 "$out/learning.log")" ;;
    *) record learning FAIL "exit $rc: learning.log" ;;
    esac
fi

# ---- the shipped Parle job through parled + parlectl, fp32 and tf32 at once ----
# Two daemons, each with its own socket and state, share the GPU, so that
# both precisions take the time of one.
run_job() { # run_job PRECISION: parled, submit, watch, final error into OUT/job-P.*
    p=$1 dir=$out/job-$p
    rm -rf "$dir"
    mkdir -p "$dir"
    export PARLE_SOCKET=$dir/parled.sock
    "$build/daemon/parled" --socket "$PARLE_SOCKET" --state-dir "$dir/state" \
        >"$dir/parled.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q ready "$dir/parled.log" && break; sleep 0.1; done
    ctl=$build/client/parlectl
    fmnist_job configs/lenet-fmnist-parle.json "$dir/job.json"
    if ! id=$("$ctl" submit -q "$dir/job.json" --set devices=gpu --set precision="$p" 2>&1); then
        "$ctl" shutdown >/dev/null 2>&1
        wait "$pid"
        echo "submit refused: $id"
        return 1
    fi
    echo "job $id: devices gpu, precision $p"
    "$ctl" watch "$id" >"$dir/watch.log" 2>&1
    "$ctl" status "$id" --json >"$dir/status.json"
    "$ctl" devices >"$dir/devices.txt" 2>&1
    "$ctl" shutdown >/dev/null 2>&1
    wait "$pid"
    python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
err = s.get("test_error")
print("state %s, test error %s, %s s, replicas on %s%s" % (s.get("state"),
      "%.2f%%" % (100 * err) if err is not None else "-", s.get("elapsed_s", "?"),
      s.get("replica_devices"), ", error: " + s["error"] if s.get("error") else ""))
sys.exit(0 if s.get("state") == "done" else 1)' "$dir/status.json"
}
if wants job; then
    for p in fp32 tf32; do
        bounded 300 bash -c "$(declare -f run_job fmnist_job); out=$out build=$build data=$data run_job $p" \
            >"$out/job-$p.log" 2>&1 &
        eval "job_$p=\$!"
    done
    for p in fp32 tf32; do
        eval "wait \$job_$p"
        rc=$?
        cat "$out/job-$p.log"
        if [ "$rc" = 0 ]; then
            record "job-$p" pass "$(tail -1 "$out/job-$p.log")"
        else
            record "job-$p" FAIL "exit $rc: $(tail -1 "$out/job-$p.log")"
        fi
    done
fi

# ---- benchmarks ----
if wants bench; then
    bounded 300 python3 bench/torch_gpu_step.py --ours "$build/bench/gpu_step" \
        >"$out/bench.txt" 2>&1
    rc=$?
    sed -n '/^GPU step/,$p' "$out/bench.txt" | grep -v '^SUMMARY'
    case $rc in
    0) record bench pass "bench.txt" ;;
    77) record bench skip "no CUDA device for gpu_step" ;;
    *) tail -20 "$out/bench.txt"; record bench FAIL "exit $rc: bench.txt" ;;
    esac
fi
if wants sync; then
    bounded 200 "$build/bench/gpu_sync" >"$out/sync.txt" 2>&1
    rc=$?
    cat "$out/sync.txt"
    case $rc in
    0) record sync pass "sync.txt" ;;
    77) record sync skip "no CUDA device" ;;
    *) record sync FAIL "exit $rc: sync.txt" ;;
    esac
fi

# ---- compute-sanitizer on our own kernels (the op tests) ----
# API errors are not reported: cuDNN and cuBLAS probe the driver with calls
# that fail by design, and our own failures already fail the tests.
# The sanitizer's verdict is its own (exit 99, or errors and hazards in its
# summaries); a test that fails its own checks under it is reported beside.
sanitize() { # sanitize NAME TOOL SECONDS TEST...
    name=$1 tool=$2 secs=$3
    shift 3
    log=$out/$name.log
    : >"$log"
    found=0 timed_out="" test_failed=""
    for t in "$@"; do
        echo "---- $t" >>"$log"
        bounded "$secs" "$sanitizer" --tool "$tool" --error-exitcode 99 \
            --report-api-errors no "$build/tests/gpu/$t" >>"$log" 2>&1
        rc=$?
        echo "---- $t: exit $rc" >>"$log"
        case $rc in
        0 | 77) ;;
        99) found=1 ;;
        124 | 137) timed_out="$timed_out $t" ;;
        *) test_failed="$test_failed $t" ;;
        esac
    done
    errors=$(grep -ho 'ERROR SUMMARY: [0-9]* error' "$log" |
        awk '{ n++; e += $3 } END { printf "%d programs, %d errors", n, e }')
    hazards=$(grep -ho 'RACECHECK SUMMARY: [0-9]* hazard' "$log" |
        awk '{ n++; e += $3 } END { printf "%d programs, %d hazards", n, e }')
    [ "$tool" = racecheck ] && errors=$hazards
    case $errors in *", 0 "*) ;; *) found=1 ;; esac
    detail="$errors${test_failed:+; failing their own checks:$test_failed}"
    if grep -q "Device not supported" "$log"; then
        record "$name" skip "compute-sanitizer does not support this device here"
    elif [ "$found" = 1 ]; then
        record "$name" FAIL "$detail: $name.log"
    elif [ -n "$timed_out" ]; then
        record "$name" FAIL "timed out:$timed_out; $detail: $name.log"
    else
        record "$name" pass "$detail"
    fi
}
if wants memcheck || wants racecheck; then
    if [ -z "$sanitizer" ]; then
        record sanitizer skip "compute-sanitizer not found"
    else
        wants memcheck && sanitize memcheck memcheck 150 test_gpu_vecops test_gpu_ops test_gpu_errors
        wants racecheck && sanitize racecheck racecheck 240 test_gpu_ops
    fi
fi
finish
