#!/usr/bin/env python3
"""The build enforces the map (docs/architecture.md, "The map"): each folder's
sources are compiled with the include paths of their own folder and of the
folders below them, and no other. Reads the build's compile_commands.json and
fails naming each folder that sees a folder the map does not put below it (an
upward include would then build), or a folder the map does not know.

A folder's `impl/` subfolder (or its subfolders, one per module) holds its
implementation headers: its own sources may see them, no other folder may
(a module's door is its folder's other headers). And, read from the sources themselves, no file includes an
implementation header (`*_impl.h`, or any header of an `impl/` subfolder)
of another folder: the door check holds even where an include path would
let such an include build.

  layers.py BUILD/compile_commands.json SOURCE_ROOT

Tests and benches sit above everything and are not checked (for the
include paths; the door check covers them too)."""
import json
import os
import re
import sys

# Each folder and the folders it uses directly; what those use, it may use too.
MAP = {
    "kernels": [], "kernels/cpu": ["kernels"], "kernels/cuda": ["kernels"],
    "models": ["kernels"],
    "daemon/proto": [],
    "daemon/store": ["models"],
    "daemon/comm": ["kernels"],
    "daemon/job": ["models", "daemon/proto"],
    "daemon/coupling": ["daemon/comm", "daemon/job"],
    "daemon/data": ["daemon/job"],
    "daemon/jobfile": ["daemon/coupling", "daemon/data"],
    "daemon/runner": ["daemon/jobfile", "daemon/store"],
    "daemon/sched": [],
    "daemon/mpi": ["daemon/runner"],
    "daemon/usage": ["daemon/store", "daemon/sched"],
    "daemon/queue": ["daemon/runner", "daemon/sched", "daemon/mpi", "daemon/usage"],
    "daemon/sweep": ["daemon/queue"],
    "daemon/metrics": ["daemon/queue"],
    "daemon/server": ["daemon/sweep", "daemon/metrics"],
    "client": ["daemon/proto"],
}
ABOVE_ALL = ("tests/", "bench/")  # targets built there are not checked


def below(folder, seen=None):
    """The folders `folder` may see: itself and, transitively, what it uses."""
    seen = set() if seen is None else seen
    if folder not in seen:
        seen.add(folder)
        for lower in MAP[folder]:
            below(lower, seen)
    return seen


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".c", ".h", ".cu", ".cuh")
SKIP_DIRS = ("build", ".git", "subprojects")


def owner(folder):
    """The folder whose implementation headers `folder` holds (itself, or
    the one above its impl/, impl/<module>/)."""
    parts = folder.split("/")
    return "/".join(parts[:parts.index("impl")]) if "impl" in parts else folder


def doors(root):
    """Each include of an implementation header (*_impl.h, or any header
    under an impl/ subfolder) from a file of another folder than the
    header's (what lies under its impl/ counts as its folder), as problems."""
    where, files = {}, []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(SKIP_DIRS)]
        for n in names:
            if n.endswith(SOURCES):
                rel = os.path.relpath(os.path.join(top, n), root)
                files.append(rel)
                home = owner(os.path.dirname(rel))
                if n.endswith("_impl.h") or home != os.path.dirname(rel):
                    where.setdefault(n, set()).add(home)
    problems = []
    for rel in files:
        folder = owner(os.path.dirname(rel))
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            name = os.path.basename(inc)
            if name in where and folder not in where[name]:
                problems.append(f"{rel} includes {name}, behind the door of "
                                f"{' or '.join(sorted(where[name]))}/")
    return problems


def main(path, root):
    build = os.path.realpath(os.path.dirname(path))
    root = os.path.realpath(root)
    problems = []
    checked = 0
    for entry in json.load(open(path)):
        out = entry.get("output", "")
        if out.startswith(ABOVE_ALL):
            continue
        src = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        paths = re.findall(r"-I\s*(\S+)", entry["command"])
        dirs = {os.path.realpath(os.path.join(entry["directory"], p)) for p in paths}
        folder = os.path.relpath(os.path.dirname(src), root)
        if folder.startswith(ABOVE_ALL):
            continue
        if folder not in MAP:
            problems.append(f"{folder}: not in the map (tests/unit/layers.py, docs/architecture.md)")
            continue
        allowed = below(folder)
        for d in sorted(dirs):
            if d.startswith(build + os.sep) or not (d + os.sep).startswith(root + os.sep):
                continue  # the build's own folders (parle_config.h), system headers
            seen = os.path.relpath(d, root)
            if seen == "config":
                continue  # holds only the meson file that generates parle_config.h
            if seen not in allowed and owner(seen) != folder:
                problems.append(f"{folder} ({os.path.basename(src)}) sees {seen}/")
        checked += 1
    problems += doors(root)
    for p in sorted(set(problems)):
        print(p)
    print(f"{checked} compilations checked against the map, {len(set(problems))} problem(s)")
    return 1 if problems or checked < 50 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
