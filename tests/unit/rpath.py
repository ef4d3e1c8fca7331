#!/usr/bin/env python3
"""The programs load the GPU libraries meson found, with no LD_LIBRARY_PATH:
each names in its RUNPATH (or RPATH) the folder of every library it links
from outside the dynamic linker's default folders (pip's NVIDIA wheels, a
CUDA toolkit, -Dgpu_libs_root), and `ldd` finds every one of them.

    rpath.py CUDA_BUILT PROGRAM... -- NAME=FOLDER...
"""
import os
import re
import subprocess
import sys

built, rest = sys.argv[1], sys.argv[2:]
if built != "true":
    print("SKIP: the CUDA backend is not built (meson -Dcuda): no GPU libraries to find")
    sys.exit(77)
split = rest.index("--")
programs, found = rest[:split], dict(a.split("=", 1) for a in rest[split + 1:])
env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
failures = []
for prog in programs:
    dyn = subprocess.run(["readelf", "-d", prog], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
    paths = [p for m in re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.*)\]", dyn) for p in m.split(":")]
    name = os.path.basename(prog)
    for lib, folder in sorted(found.items()):
        if not any(n.startswith("lib%s.so" % lib) for n in needed):
            failures.append("%s does not link lib%s (NEEDED: %s)" % (name, lib, ", ".join(needed)))
        elif folder not in paths:
            failures.append("%s: rpath %s lacks %s, where meson found lib%s"
                            % (name, ":".join(paths) or "(none)", folder, lib))
    ldd = subprocess.run(["ldd", prog], capture_output=True, text=True, env=env).stdout
    for line in ldd.splitlines():
        lib = line.strip().split(" ")[0]
        if "not found" in line and any(lib.startswith("lib%s" % g) for g in
                                       ("cudnn", "cublas", "cudart", "nccl")):
            failures.append("%s: %s not found without LD_LIBRARY_PATH" % (name, lib))
    print("%s: rpath %s" % (name, ":".join(paths) or "(none)"))
if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print("rpath: every GPU library found where meson found it (%s)"
      % (", ".join("lib%s in %s" % kv for kv in sorted(found.items())) or "all in default folders"))
