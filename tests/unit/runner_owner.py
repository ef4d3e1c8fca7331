#!/usr/bin/env python3
"""runner.c is its helpers' one owner (daemon/runner/runner_impl.h): none of
the runner library's other objects uses a symbol that runner.c defines, so
nothing calls back into it; they reach the job through run_state.c.

  runner_owner.py LIBPARLE_RUNNER.a

Reads the archive's symbol table with nm: per member, the symbols it defines
and the ones it needs; fails naming each member and symbol that needs
runner.c."""
import subprocess
import sys
from collections import defaultdict

out = subprocess.run(["nm", "-A", sys.argv[1]], check=True, capture_output=True,
                     text=True).stdout
defined, needed = defaultdict(set), defaultdict(set)
for line in out.splitlines():
    where, _, rest = line.rpartition(":")
    member = where.rpartition(":")[2] if ":" in where else where
    parts = rest.split()
    if len(parts) == 2 and parts[0] == "U":
        needed[member].add(parts[1])
    elif len(parts) == 3 and parts[1] in "TDBR":
        defined[member].add(parts[2])
owner = [m for m in defined if m.endswith("runner.c.o")]
assert len(owner) == 1, f"no single runner.c object among {sorted(defined)}"
owner = owner[0]
helpers = [m for m in needed if m != owner]
assert len(helpers) >= 5, f"only {helpers}: not the runner library"
bad = [(m, s) for m in sorted(helpers) for s in sorted(needed[m] & defined[owner])]
for m, s in bad:
    print(f"{m} calls back into runner.c: {s}")
print(f"{len(helpers)} objects besides runner.c, {len(bad)} call(s) back into it")
sys.exit(1 if bad else 0)
