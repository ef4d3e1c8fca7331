#!/bin/sh
# The CUDA build on a stock NVIDIA install: nvcc in /usr/local/cuda*/bin and
# nothing on PATH. With PATH holding only the system folders (no nvcc wrapper
# in /usr/local/bin, no toolkit bin/), plain meson must say where the toolkit
# is and what to run; scripts/setup-gpu.sh must find it there, say which one
# it took, and the build must compile CUDA with it, ninja included, under the
# same PATH. Skips where no toolkit (with cuDNN, which -Dcuda=enabled needs)
# is installed in NVIDIA's places.
set -u
TMP=$(mktemp -d "${TMPDIR:-/tmp}/parle-gpubuild.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
SRC=${PARLE_SOURCE_ROOT:?}
SYSPATH=/usr/sbin:/usr/bin:/sbin:/bin
clean() { env -i HOME="$TMP" PATH=$SYSPATH "$@"; }

toolkit=""
for d in /usr/local/cuda /usr/local/cuda-[0-9]*.[0-9]*; do
    [ -x "$d/bin/nvcc" ] && { toolkit=$d; break; }
done
[ -n "$toolkit" ] || { echo "SKIP: no CUDA toolkit in /usr/local/cuda*"; exit 77; }
cudnn=$(ls "$toolkit"/lib*/libcudnn.so.9 /usr/lib/*-linux-gnu/libcudnn.so.9 2>/dev/null | head -n 1)
[ -n "$cudnn" ] || { echo "SKIP: CUDA toolkit in $toolkit but no cuDNN 9"; exit 77; }
clean sh -c 'command -v meson && command -v ninja' >/dev/null ||
    { echo "SKIP: no meson or ninja in $SYSPATH"; exit 77; }
clean sh -c '! command -v nvcc' >/dev/null || fail "nvcc is on $SYSPATH: this test cannot hide it"

# Plain meson cannot find nvcc; it must name the toolkit and the script.
clean meson setup "$TMP/plain" "$SRC" -Dcuda=enabled >"$TMP/plain.out" 2>&1 &&
    fail "meson found a CUDA compiler with PATH=$SYSPATH"
grep -q "a CUDA toolkit is installed (.*/usr/local/cuda.*): configure with scripts/setup-gpu.sh" \
    "$TMP/plain.out" || fail "plain meson's error names no toolkit or fix: $(tail -n 5 "$TMP/plain.out")"

clean "$SRC/scripts/setup-gpu.sh" "$TMP/b" >"$TMP/setup.out" 2>&1 ||
    fail "setup-gpu.sh: $(tail -n 20 "$TMP/setup.out")"
grep -q "^setup-gpu: CUDA toolkit /usr/local/cuda.* (nvcc /usr/local/cuda.*/bin/nvcc, release [0-9]" \
    "$TMP/setup.out" || fail "setup-gpu.sh did not say which toolkit: $(head -n 3 "$TMP/setup.out")"
grep -Eq "CUDA +: (True|YES)" "$TMP/setup.out" || fail "the build has CUDA off: $(grep -A8 Features "$TMP/setup.out")"
# ninja, with the same PATH, compiles CUDA and C against the CUDA headers.
clean ninja -C "$TMP/b" kernels/cuda/libparle_kernels_cuda.a.p/device.cu.o \
    kernels/cuda/libparle_kernels_cuda.a.p/backend_cuda.c.o >"$TMP/ninja.out" 2>&1 ||
    fail "ninja: $(tail -n 20 "$TMP/ninja.out")"
# A reconfigure keeps the compiler (the native file names it by its path).
clean meson setup --reconfigure "$TMP/b" "$SRC" >"$TMP/re.out" 2>&1 ||
    fail "reconfigure: $(tail -n 20 "$TMP/re.out")"
echo "gpu_build_path: $(head -n 1 "$TMP/setup.out"); compiled with PATH=$SYSPATH: OK"
