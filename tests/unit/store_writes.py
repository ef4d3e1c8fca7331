#!/usr/bin/env python3
"""The job store's record is written by the store alone: the files of
daemon/queue/ outside the store's library (read from meson.build) change a
field of `struct job` or `struct jobs` (read from the store's header) only
through the store's functions (job_set_waiting, job_place, job_set_error,
job_request_cancel...). Fails naming each file:line that assigns to one,
increments it, or hands it to a writing call (snprintf, strcpy, strcat,
memset, memcpy) as `j->field` or `js->field` (the names the queue gives a
job and the queue throughout).

  store_writes.py SOURCE_ROOT"""
import os
import re
import sys

STRUCT = re.compile(r"^struct (job|jobs) \{\n(.*?)^\};", re.M | re.S)
MEMBER = re.compile(r"[\s\*]([a-z_][a-z0-9_]*)\s*(?:\[[^\]]*\])?\s*[;,]")
STORE_LIB = re.compile(r"queue_store_lib = static_library\(.*?files\((.*?)\)", re.S)


def fields(header):
    """The member names of struct job and struct jobs (nested structs'
    members too: a nested struct is written as its field)."""
    text = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
    names = set()
    for _, body in STRUCT.findall(text):
        for line in body.split(";"):
            line = re.sub(r"\([^)]*\)\s*\([^)]*\)", "", line)  # function pointers
            m = re.search(r"([a-z_][a-z0-9_]*)\s*(?:\[[^\]]*\])*\s*$", line.strip())
            if m:
                names.add(m.group(1))
            for extra in re.findall(r",\s*\**([a-z_][a-z0-9_]*)", line):
                names.add(extra)
    return names


def main():
    root = sys.argv[1]
    queue = os.path.join(root, "daemon", "queue")
    build = open(os.path.join(queue, "meson.build")).read()
    store = set(re.findall(r"'([a-z_]+\.c)'", STORE_LIB.search(build).group(1)))
    store.add("log.c")
    names = fields(os.path.join(queue, "impl", "store", "jobs_impl.h"))
    if len(names) < 40 or "waiting" not in names or "after_epoch" not in names:
        sys.exit(f"store_writes: read only {len(names)} fields from jobs_impl.h")
    field = r"\b(?:j|js)->(" + "|".join(sorted(names)) + r")\b(?:\[[^\]]*\]|\.[a-z_]+)*"
    writes = [re.compile(field + r"\s*(?:[-+*/|&]?=(?!=)|\+\+|--)"),
              re.compile(r"(?:\+\+|--)\s*" + field),
              re.compile(r"\b(?:v?snprintf|strn?cpy|strn?cat|memset|memcpy|memmove)\(\s*&?" + field)]
    bad = []
    files = sorted(f for f in os.listdir(queue) if f.endswith(".c") and f not in store)
    for f in files:
        for n, line in enumerate(open(os.path.join(queue, f)), 1):
            code = line.split("//")[0]
            for w in writes:
                m = w.search(code)
                if m:
                    bad.append(f"daemon/queue/{f}:{n}: writes the store's field {m.group(1)}: "
                               f"{line.strip()}")
                    break
    for b in bad:
        print(b)
    print(f"store_writes: {len(files)} files above the store, {len(names)} fields, "
          f"{len(bad)} write(s) outside the store")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
