#!/bin/sh
# Makes the offline bundle for a GPU machine without network access
# (docs/gpu.md), on a Debian 12 machine whose package registry is reachable:
#   scripts/gpu-carry.sh [DIR]
#     DIR  a folder inside the checkout that git ignores (default .gpu-carry):
#          DIR/debs/*.deb            the Debian packages the build links
#          DIR/fashion-mnist/*.gz    the Fashion-MNIST IDX files
# About 37 MiB; refused over 56 MiB, so that bundle and tree copy in under
# 64 MiB. Prints the folder to copy. On the GPU machine, gpu-check.sh --deps
# DIR/debs unpacks the packages into a prefix of its own (never /) and --data
# DIR/fashion-mnist points the Fashion-MNIST runs at the copy.
set -eu
cd "$(dirname "$0")/.."
case ${1:-} in -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
dir=${1:-.gpu-carry}
limit_mib=64 # bundle and source tree together, with 8 MiB for the tree
# zlib1g-dev only for zlib.h (its libz.so is an absolute link; gpu-check.sh
# points it into the prefix, and the machine has libz.so.1 itself).
# libdnnl2 loads libOpenCL.so.1 (ocl-icd-libopencl1) at start.
pkgs="libuv1 libuv1-dev libcjson1 libcjson-dev libdnnl2 libdnnl-dev ocl-icd-libopencl1
      pkgconf pkgconf-bin libpkgconf3 zlib1g-dev"
fmnist=/usr/share/datasets/fashion-mnist

if ! git check-ignore -q "$dir/x"; then
    echo "gpu-carry: $dir is not ignored by git; use a folder git ignores (.gpu-carry is)" >&2
    exit 2
fi
if [ ! -d "$fmnist" ]; then
    echo "gpu-carry: $fmnist is absent (apt-get install dataset-fashion-mnist)" >&2
    exit 2
fi
rm -rf "$dir"
mkdir -p "$dir/debs" "$dir/fashion-mnist"
# apt-get download writes into the current directory, as the _apt user where it can.
chmod 0777 "$dir/debs"
# shellcheck disable=SC2086
(cd "$dir/debs" && apt-get download -q $pkgs) >/dev/null || {
    echo "gpu-carry: apt-get download failed (run apt-get update first)" >&2
    exit 1
}
cp "$fmnist"/*-ubyte* "$dir/fashion-mnist/"
kib=$(du -sk "$dir" | cut -f1)
echo "gpu-carry: $(ls "$dir/debs" | wc -l) packages, $(ls "$dir/fashion-mnist" | wc -l) data files, $((kib / 1024)) MiB in $dir"
if [ "$kib" -gt $((limit_mib * 1024 - 8 * 1024)) ]; then
    echo "gpu-carry: $dir is over $((limit_mib - 8)) MiB, leaving too little of $limit_mib MiB for the tree" >&2
    exit 1
fi
echo "carry: $dir"
