#!/usr/bin/env python3
"""Fetch the CIFAR-10 or CIFAR-100 binary version, check it, unpack it where
the shipped job files look for it (configs/*cifar*.json: data.root), readable
by the group that may run jobs.

    fetch-cifar.py [--archive FILE] [--md5 SUM] [--dest DIR] [--group G]
                   [--proxy URL] [--url URL] cifar10|cifar100

Without --archive, downloads the archive from its authors' page
(https://www.cs.toronto.edu/~kriz/cifar.html), or --url, printing the bytes
received and the rate every few seconds. The download goes to
.ARCHIVE.part beside DIR and stays there when cut short: the next run
resumes it where it stopped (an HTTP range request), and removes it once
the set is unpacked. --proxy URL sends it through a proxy (sudo drops the
https_proxy of the environment, which urllib uses otherwise). The archive's MD5 must be the
published one; --md5 SUM expects SUM instead, for a mirror's copy repacked
(the layout is checked all the same). The archive must hold exactly the
folder the authors ship (cifar-10-batches-bin/ or cifar-100-binary/) with
regular files only, every data file a whole number of records. It is
unpacked into a new folder beside DIR (default /var/lib/parle/data/cifar10
or /cifar100), which then replaces DIR: a job never sees half a set. The
files get mode 0640 and the folders 0750, group G (default parle, the
group of the installed units); the folders above DIR that this makes, 0755
whatever the umask.
"""
import argparse
import grp
import gzip
import hashlib
import http.client
import os
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zlib

URL = "https://www.cs.toronto.edu/~kriz/"
RECORD_PIXELS = 3 * 32 * 32
SETS = {
    "cifar10": {
        "archive": "cifar-10-binary.tar.gz",
        "md5": "c32a1d4ab5d03f1284b67883e8d87530",
        "folder": "cifar-10-batches-bin",
        "data": ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"],
        "other": ["batches.meta.txt", "readme.html"],
        "record": 1 + RECORD_PIXELS,
    },
    "cifar100": {
        "archive": "cifar-100-binary.tar.gz",
        "md5": "03b5dce01913d631647c71ecec9e9cb8",
        "folder": "cifar-100-binary",
        "data": ["train.bin", "test.bin"],
        "other": ["coarse_label_names.txt", "fine_label_names.txt"],
        "record": 2 + RECORD_PIXELS,
    },
}


class Refused(Exception):
    pass


def md5_of(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


MAX_BYTES = 512 << 20  # the archives are 163 and 161 MiB
PROGRESS_S = 3.0


def makedirs_0755(path):
    """Each missing folder of path made 0755, whatever the umask."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    makedirs_0755(os.path.dirname(path))
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    os.chmod(path, 0o755)


def mib(n):
    return "%.1f MiB" % (n / 1048576.0)


def resume_from(r, have):
    """The offset the response continues the partial file at: have (206
    from there), or 0 (the whole file again)."""
    if r.status != 206:
        return 0
    rng = r.headers.get("Content-Range", "")  # bytes START-END/TOTAL
    try:
        start = int(rng.split(" ", 1)[1].split("-", 1)[0])
    except (IndexError, ValueError):
        raise Refused("the server answered a range request with Content-Range %r" % rng)
    if start != have:
        raise Refused("the server resumed at byte %d, not %d" % (start, have))
    return have


def download(url, part, proxy):
    """url into part, resuming what part already holds."""
    handlers = [urllib.request.ProxyHandler({"http": proxy, "https": proxy})] if proxy else []
    opener = urllib.request.build_opener(*handlers)
    have = os.path.getsize(part) if os.path.isfile(part) else 0
    req = urllib.request.Request(url)
    if have:
        req.add_header("Range", "bytes=%d-" % have)
    try:
        r = opener.open(req, timeout=60)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing after what part holds: it is whole
            return
        raise Refused("cannot download %s: %s (or give a copy with --archive FILE)" % (url, e))
    except OSError as e:
        raise Refused("cannot download %s: %s (or give a copy with --archive FILE%s)"
                      % (url, e, "" if proxy else "; --proxy URL for a proxy"))
    with r:
        have = resume_from(r, have)
        size = r.headers.get("Content-Length")
        total = have + int(size) if size and size.isdigit() else None
        if total is not None and total > MAX_BYTES:
            raise Refused("%s is %d bytes, more than any CIFAR archive" % (url, total))
        print("downloading %s%s%s" % (url, " (%s)" % mib(total) if total else "",
                                       ", resuming at %s" % mib(have) if have else ""), file=sys.stderr)
        start = last = time.monotonic()
        got = have
        with open(part, "ab" if have else "wb") as f:
            while True:
                try:
                    block = r.read(1 << 20)
                except (OSError, http.client.HTTPException) as e:  # IncompleteRead: cut short
                    block, cut = b"", e
                else:
                    cut = None
                if block:
                    f.write(block)
                    got += len(block)
                    if got > MAX_BYTES:
                        raise Refused("%s: more than %d bytes, more than any CIFAR archive" % (url, MAX_BYTES))
                now = time.monotonic()
                if not block or now - last >= PROGRESS_S:
                    last = now
                    rate = (got - have) / max(now - start, 1e-6)
                    print("  %s%s, %.2f MiB/s" % (mib(got), " of %s" % mib(total) if total else "",
                                                  rate / 1048576.0), file=sys.stderr)
                if not block:
                    break
            f.flush()
            os.fsync(f.fileno())
    if cut is not None or (total is not None and got < total):
        raise Refused("the download of %s stopped at %d of %s bytes (%s): run the same command "
                      "again to resume it" % (url, got, total or "?", cut or "connection closed"))


def check_members(tar, spec, archive):
    """The members, each a regular file or the one folder, named as shipped."""
    folder = spec["folder"]
    known = set(spec["data"] + spec["other"])
    seen = set()
    for m in tar.getmembers():
        name = m.name.rstrip("/")
        if name == folder and m.isdir():
            continue
        parent, _, base = name.rpartition("/")
        if parent != folder or base not in known:
            raise Refused("%s: unexpected member %r: not the %s archive (it holds %s/ with %s)"
                          % (archive, m.name, spec["archive"], folder, ", ".join(spec["data"])))
        if not m.isfile():
            raise Refused("%s: member %r is not a regular file" % (archive, m.name))
        if base in spec["data"] and (m.size == 0 or m.size % spec["record"] != 0):
            raise Refused("%s: %s is %d bytes, not a whole number of %d-byte records"
                          % (archive, m.name, m.size, spec["record"]))
        seen.add(base)
    missing = [f for f in spec["data"] if f not in seen]
    if missing:
        raise Refused("%s: lacks %s" % (archive, ", ".join(folder + "/" + f for f in missing)))


def unpack(archive, spec, dest, gid):
    """Into a new folder beside dest, which then takes dest's place."""
    parent = os.path.dirname(os.path.abspath(dest))
    makedirs_0755(parent)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(dest) + ".", dir=parent)
    try:
        try:
            with tarfile.open(archive, "r:gz") as tar:
                check_members(tar, spec, archive)
                for m in tar.getmembers():
                    if m.isfile():
                        src = tar.extractfile(m)
                        out = os.path.join(tmp, m.name)
                        os.makedirs(os.path.dirname(out), exist_ok=True)
                        with open(out, "wb") as f:
                            shutil.copyfileobj(src, f, 1 << 20)
                            f.flush()
                            os.fsync(f.fileno())
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise Refused("%s: not a readable .tar.gz (%s): a corrupt or wrong archive" % (archive, e))
        for d, _, files in os.walk(tmp):
            os.chown(d, -1, gid)
            os.chmod(d, 0o750)
            for f in files:
                os.chown(os.path.join(d, f), -1, gid)
                os.chmod(os.path.join(d, f), 0o640)
        old = None
        if os.path.lexists(dest):
            old = tmp + ".old"
            os.rename(dest, old)
        os.rename(tmp, dest)
        if old:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("set", choices=sorted(SETS))
    ap.add_argument("--archive", metavar="FILE", help="a copy of the archive (no download)")
    ap.add_argument("--md5", metavar="SUM",
                    help="the MD5 to expect instead of the published one (a mirror's repacked copy)")
    ap.add_argument("--dest", metavar="DIR", help="default /var/lib/parle/data/SET")
    ap.add_argument("--group", metavar="G", default="parle",
                    help="the group that may read the set (default parle)")
    ap.add_argument("--proxy", metavar="URL",
                    help="an HTTP proxy for the download, e.g. http://proxy:3128 (sudo drops https_proxy)")
    ap.add_argument("--url", metavar="URL", help="where to download the archive (default the authors' page)")
    args = ap.parse_args()
    spec = SETS[args.set]
    dest = args.dest or "/var/lib/parle/data/" + args.set
    try:
        try:
            gid = grp.getgrnam(args.group).gr_gid
        except KeyError:
            raise Refused("no group %s (systemd-sysusers makes parle from the installed "
                          "sysusers.d/parle.conf; or name one with --group G)" % args.group)
        archive = args.archive
        part = None
        if not archive:
            makedirs_0755(os.path.dirname(os.path.abspath(dest)))
            part = archive = os.path.join(os.path.dirname(os.path.abspath(dest)),
                                          "." + spec["archive"] + ".part")
            download(args.url or URL + spec["archive"], part, args.proxy)
        if not os.path.isfile(archive):
            raise Refused("%s: no such file" % archive)
        expected = (args.md5 or spec["md5"]).lower()
        got = md5_of(archive)
        if got != expected:
            if part:  # not worth resuming: the next run starts over
                os.unlink(part)
            raise Refused("%s: MD5 %s, expected %s (%s): a corrupt or wrong archive, refused"
                          % (archive, got, expected,
                             "--md5" if args.md5 else "the published MD5 of " + spec["archive"]))
        unpack(archive, spec, dest, gid)
        if part:
            os.unlink(part)
    except (Refused, OSError) as e:  # OSError: a file or folder we may not write or chown
        print("fetch-cifar: %s" % e, file=sys.stderr)
        return 1
    print("%s unpacked in %s (group %s); the shipped configs read data.root %s"
          % (args.set, os.path.join(dest, spec["folder"]), args.group, dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
