#!/usr/bin/env python3
"""A library's one owner and its helpers' order, read from its objects:

  lib_owner.py LIB.a OWNER.c [--calls-none-of DIR PREFIX]...

Checks, with nm on the archive's members (per member, the symbols it defines
and the ones it needs):
- no member but OWNER.c's uses a symbol OWNER.c defines: nothing calls back
  into the owner (it is its helpers' one caller from above);
- the helpers' calls among themselves have no circle: each calls only those
  below it, in the order printed;
- with each --calls-none-of, no member uses a symbol that the objects
  DIR/PREFIX*.o define (the library reaches nothing of them; at least one
  must be there, else the check would say nothing).
Fails naming each member and symbol that breaks a rule, or the circle."""
import glob
import os
import subprocess
import sys
from collections import defaultdict


def symbols(paths):
    """Per object (an archive's member or a file): defined, needed."""
    out = subprocess.run(["nm", "-A", *paths], check=True, capture_output=True,
                         text=True).stdout
    defined, needed = defaultdict(set), defaultdict(set)
    for line in out.splitlines():
        where, _, rest = line.rpartition(":")
        member = os.path.basename(where.rpartition(":")[2] if ":" in where else where)
        parts = rest.split()
        if len(parts) == 2 and parts[0] == "U":
            needed[member].add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBR":
            defined[member].add(parts[2])
    return defined, needed


def circle(edges):
    """A list of members that call round in a circle, or None."""
    state = {}

    def visit(m, path):
        state[m] = "open"
        for n in sorted(edges[m]):
            if state.get(n) == "open":
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n, path + [n])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def order(edges):
    """The helpers, each before those it calls (edges has no circle)."""
    done, out = set(), []

    def visit(m):
        if m in done:
            return
        done.add(m)
        for n in sorted(edges[m]):
            visit(n)
        out.append(m)

    for m in sorted(edges):
        visit(m)
    return out[::-1]


def main(argv):
    lib, owner_src = argv[1], argv[2]
    defined, needed = symbols([lib])
    owner = [m for m in defined if m == owner_src + ".o"]
    assert len(owner) == 1, f"no single {owner_src} object among {sorted(defined)}"
    owner = owner[0]
    helpers = sorted(m for m in set(defined) | set(needed) if m != owner)
    assert len(helpers) >= 5, f"only {helpers}: not a library with helpers"
    bad = [f"{m} calls back into {owner_src}: {s}"
           for m in helpers for s in sorted(needed[m] & defined[owner])]
    edges = {m: {n for n in helpers if n != m and needed[m] & defined[n]} for m in helpers}
    found = circle(edges)
    if found:
        bad.append("the helpers call round in a circle: " + " -> ".join(found))
    rest = argv[3:]
    assert len(rest) % 3 == 0 and all(a == "--calls-none-of" for a in rest[::3]), \
        f"expected --calls-none-of DIR PREFIX pairs, got {rest}"
    for k in range(0, len(rest), 3):
        others = sorted(glob.glob(os.path.join(rest[k + 1], rest[k + 2] + "*.o")))
        assert others, f"no {rest[k + 2]}*.o in {rest[k + 1]}: nothing to check against"
        theirs, _ = symbols(others)
        for o in sorted(theirs):
            bad += [f"{m} calls into {o}: {s}" for m in sorted(defined.keys() | needed.keys())
                    for s in sorted(needed[m] & theirs[o])]
    for line in bad:
        print(line)
    if not found:
        print(f"{owner_src}, then: " + ", ".join(m.removesuffix(".o") for m in order(edges)))
    print(f"{len(helpers)} objects besides {owner_src}, {len(bad)} problem(s)")
    return 1 if bad else 0


sys.exit(main(sys.argv))
