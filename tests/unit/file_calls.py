#!/usr/bin/env python3
"""The calls between the files of a folder, drawn from their sources: no two
files may call each other, directly or round a longer circle.

  file_calls.py SOURCE_ROOT FOLDER... [--draw]

For each FOLDER (relative to SOURCE_ROOT), reads its .c and .h files (and
the headers under its impl/ subfolder) with
comments and strings blanked, and takes:
- the functions each file defines: a `name(...)` head followed by a body at
  the file's top level; a static one is its own file's, a header's (static
  inline) belongs to the files that include that header;
- the calls each file makes: `name(` inside its bodies, or a function's name
  passed as a value (a callback is a call too, made later).
A file A calls a file B when A calls a function only B defines (or B is
among the files defining it: alternative builds of one module), and A does
not define it itself. The calls must form no circle: each file is called
only by files above it. Fails printing each circle found as
`a.c -> b.c -> a.c`, with the function behind each arrow; --draw prints the
arrows too. The regexes read this project's C, not any C (no K&R heads,
no functions defined by macros)."""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_]\w*")
TYPE_HEAD = re.compile(r"\b(?:struct|union|enum)\s*\w*\s*$")
# A name used, not a member's (j->sweep_id, s.id: a field, never a call).
USED = re.compile(r"(?<![.>\w])[A-Za-z_]\w*")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "_Alignof", "alignof",
            "_Static_assert", "static_assert", "defined", "__attribute__", "_Generic",
            "do", "else", "case", "goto", "typeof", "__typeof__", "offsetof"}
HEAD = re.compile(r"\b([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def blank(text):
    """Comments, strings and characters replaced by spaces (lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_directives(text):
    """Preprocessor lines (with their continuations) blanked."""
    lines, out, cont = text.split("\n"), [], False
    for line in lines:
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def read(path):
    """(defined: {name: static?}, used: set of names, includes)."""
    source = open(path, encoding="utf-8", errors="replace").read()
    includes = [os.path.basename(p) for p in INCLUDE.findall(source)]
    text = without_directives(blank(source))
    defined, used = {}, set()
    depth, head_start, body_start, name = 0, 0, None, None
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                head = text[head_start:i]
                m = HEAD.search(head)
                words = IDENT.findall(head)
                if m and m.group(1) not in KEYWORDS and "=" not in head:
                    name = m.group(1)
                    defined[name] = "static" in words
                    body_start = i
                elif TYPE_HEAD.search(head):  # a struct's fields: names, never calls
                    name, body_start = None, None
                else:
                    name, body_start = None, i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if body_start is not None:
                    used |= set(USED.findall(text[body_start:i]))
                head_start = i + 1
        elif c == ";" and depth == 0:
            statement = text[head_start:i]
            if "=" in statement:  # an initialiser (a table of callbacks), not a prototype
                used |= set(USED.findall(statement.split("=", 1)[1]))
            head_start = i + 1
    used -= KEYWORDS
    return defined, used, includes


def graph(folder):
    """{file: {called file: sorted names}} for the folder's files, and the
    .c files in which no function was found (the reading failed there)."""
    where = {f: os.path.join(folder, f) for f in os.listdir(folder) if f.endswith((".c", ".h"))}
    # The folder's implementation headers: impl/ and its modules' subfolders.
    for top, _, names in os.walk(os.path.join(folder, "impl")):
        where.update({f: os.path.join(top, f) for f in names if f.endswith(".h")})
    files = sorted(where)
    info = {f: read(where[f]) for f in files}
    unread = [f for f in files if f.endswith(".c") and not info[f][0]]
    owners = {}
    for f, (defined, _, _) in info.items():
        for name, static in defined.items():
            if not static or f.endswith(".h"):
                owners.setdefault(name, set()).add(f)
    edges = {f: {} for f in files}
    for f, (defined, used, includes) in info.items():
        for name in sorted(used):
            if name in defined:
                continue
            for g in sorted(owners.get(name, ())):
                seen = g.endswith(".c") or g in includes or info[g][0].get(name) is False
                if g != f and seen:
                    edges[f].setdefault(g, []).append(name)
    return edges, unread


def circles(edges):
    """Each strongly connected set of two or more files, as one circle
    through them (Tarjan, then a path round the set)."""
    index, low, stack, on, sets = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                sets.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    found = []
    for part in sets:
        # The shortest way back to the set's first file, through the set.
        start, inside = part[0], set(part)
        paths, todo = {start: [start]}, [start]
        best = None
        while todo and best is None:
            nxt = []
            for v in todo:
                for w in sorted(edges[v]):
                    if w == start:
                        best = paths[v] + [start]
                        break
                    if w in inside and w not in paths:
                        paths[w] = paths[v] + [w]
                        nxt.append(w)
                if best:
                    break
            todo = nxt
        found.append((part, best))
    return found


def main(argv):
    draw = "--draw" in argv
    args = [a for a in argv[1:] if a != "--draw"]
    root, folders = args[0], args[1:]
    bad = 0
    for folder in folders:
        edges, unread = graph(os.path.join(root, folder))
        if draw:
            for f in sorted(edges):
                for g, names in sorted(edges[f].items()):
                    print(f"{folder}: {f} -> {g} ({', '.join(names[:4])}{' ...' if len(names) > 4 else ''})")
        arrows = sum(len(v) for v in edges.values())
        found = circles(edges)
        for part, path in found:
            steps = [f"{a} -> {b} ({', '.join(edges[a][b][:3])})" for a, b in zip(path, path[1:])]
            print(f"{folder}: circle {' -> '.join(path)}: " + "; ".join(steps)
                  + (f" [all of {', '.join(part)} call round]" if len(part) > len(path) - 1 else ""))
        print(f"{folder}: {len(edges)} files, {arrows} arrows, {len(found)} circle(s)")
        bad += len(found)
        for f in unread:
            print(f"{folder}: no function found in {f}: the reading is broken there")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
