#!/usr/bin/env python3
"""A CIFAR binary archive laid out as the authors ship it, with a few random
records per file, for the tests of scripts/fetch-cifar.py.

    fake_cifar.py OUT.tar.gz cifar10|cifar100 [--omit NAME] [--extra NAME] [--short]

--omit leaves out a data file, --extra adds a member (e.g. "../x"), --short
cuts one byte off the first data file.
"""
import argparse
import io
import random
import tarfile

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("set", choices=["cifar10", "cifar100"])
ap.add_argument("--omit")
ap.add_argument("--extra")
ap.add_argument("--short", action="store_true")
a = ap.parse_args()
if a.set == "cifar10":
    folder, files = "cifar-10-batches-bin", ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]
else:
    folder, files = "cifar-100-binary", ["train.bin", "test.bin"]
rng = random.Random(a.out)


def record():
    if a.set == "cifar10":
        label = bytes([rng.randrange(10)])
    else:
        label = bytes([rng.randrange(20), rng.randrange(100)])
    return label + rng.randbytes(3072)


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


with tarfile.open(a.out, "w:gz") as tar:
    info = tarfile.TarInfo(folder)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)
    for i, f in enumerate(files):
        if f != a.omit:
            data = b"".join(record() for _ in range(8))
            add(tar, folder + "/" + f, data[:-1] if a.short and i == 0 else data)
    if a.extra:
        add(tar, a.extra, b"x")
