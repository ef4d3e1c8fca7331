#!/bin/sh
# Configures a CUDA build of parle: `meson setup BUILD -Dcuda=enabled OPTIONS...`
# with an nvcc found where NVIDIA installs it. NVIDIA's Debian packages
# (cuda-toolkit-12-x, cuda-toolkit-13-x) put nvcc in /usr/local/cuda-X.Y/bin and
# nothing on PATH, and meson looks for nvcc on PATH only. The nvcc taken, first
# found of:
#   $NVCC                       (a path to nvcc, to choose one toolkit of several)
#   nvcc on PATH
#   /usr/local/cuda/bin/nvcc    (the link NVIDIA's packages point at a toolkit)
#   /usr/local/cuda-X.Y/bin/nvcc, the newest X.Y
# is written, by its full path, to BUILD/cuda-native.ini, the meson native file
# the build is configured with, so that ninja and a later reconfigure use that
# compiler whatever PATH they run with.
#   scripts/setup-gpu.sh build-gpu [-Dnccl=disabled ...]
set -eu
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: $0 BUILD-DIR [MESON-OPTIONS...]" >&2
    exit 2
fi
build=$1
shift
src=$(cd "$(dirname "$0")/.." && pwd)

nvcc=""
how=""
if [ -n "${NVCC:-}" ]; then
    nvcc=$NVCC
    how="NVCC"
elif command -v nvcc >/dev/null 2>&1; then
    nvcc=$(command -v nvcc)
    how="PATH"
elif [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
    how="NVIDIA's default place"
else
    # /usr/local/cuda-12.4 before /usr/local/cuda-12.10: by version, newest last.
    for d in $(ls -d /usr/local/cuda-[0-9]*.[0-9]* 2>/dev/null | sort -V); do
        [ -x "$d/bin/nvcc" ] && nvcc=$d/bin/nvcc
    done
    how="the newest of /usr/local/cuda-X.Y"
fi
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
    echo "setup-gpu: no nvcc (${nvcc:-none found}): not on PATH, nor in /usr/local/cuda/bin or" \
        "/usr/local/cuda-X.Y/bin. Install the CUDA toolkit (docs/gpu.md, \"Installing CUDA\")" \
        "or name its compiler: NVCC=/path/to/nvcc $0 $build" >&2
    exit 1
fi
case $nvcc in
/*) ;;
*) nvcc=$(pwd)/$nvcc ;;
esac
# nvcc compiles host code with g++ (scripts/install-deps.sh installs it).
if ! command -v g++ >/dev/null 2>&1; then
    echo "setup-gpu: nvcc needs g++ as its host compiler and there is none on PATH:" \
        "apt-get install g++ (scripts/install-deps.sh installs it)" >&2
    exit 1
fi
toolkit=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
echo "setup-gpu: CUDA toolkit $toolkit (nvcc $nvcc, release ${version:-unknown}; found by $how)"

mkdir -p "$build"
native=$(cd "$build" && pwd)/cuda-native.ini
tmp=$native.tmp
printf "# written by scripts/setup-gpu.sh: the CUDA compiler this build uses\n[binaries]\ncuda = '%s'\n" \
    "$nvcc" >"$tmp"
mv "$tmp" "$native"
exec meson setup "$build" "$src" -Dcuda=enabled --native-file "$native" "$@"
