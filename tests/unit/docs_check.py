#!/usr/bin/env python3
"""The docs name what the code has, and the code has nothing the docs omit:

- every `parlectl COMMAND` in README.md and docs/*.md is a command of parlectl
  (its command table in client/parlectl.c), and every command is in
  `parlectl --help` and named as `parlectl COMMAND` somewhere in the docs;
- every job state parled shows is in docs/protocol.md and taken by
  `parlectl list --state`, and no other, and `parlectl list --help` (and
  `ls --help`) names each;
- the exit statuses of `parlectl --help` and the --help of wait, watch and
  submit say, as docs/protocol.md's table does, that a job ended `timeout`
  exits 1;
- every job field of the job-file validator's table (daemon/jobfile/jobfile_fields.c,
  `fields[]`) has a row in docs/config.md's tables, every row is such a field,
  and every dotted field (`optim.lr`, ...) the docs name in backquotes exists.

    docs_check.py SOURCE_ROOT PARLECTL
"""
import glob
import os
import re
import subprocess
import sys

root, parlectl = sys.argv[1], sys.argv[2]
problems = []


def read(rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


docs = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md"))
                              if not p.endswith("CHANGELOG.md"))
text = {d: read(d) for d in docs}

# ---- parlectl commands ----
commands = set(re.findall(r'^\s*\{"([a-z]+)",\s*cmd_', read("client/parlectl.c"), re.M))
if len(commands) < 10:
    problems.append("found only %d commands in client/parlectl.c's table" % len(commands))
helptext = subprocess.run([parlectl, "--help"], capture_output=True, text=True, check=True).stdout
for c in sorted(commands):
    if not re.search(r"(^  |\| |alias: )%s\b" % c, helptext, re.M):
        problems.append("parlectl --help does not list the command %s" % c)
# Named: `parlectl WORD` in backquotes, or a line of a fenced block that runs
# parlectl WORD; and each command of docs/protocol.md's `--json` table.
named = {}
for d, t in text.items():
    fenced = False
    for n, line in enumerate(t.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        pattern = r"(?:^|[\s$;&|(])parlectl +" if fenced else r"`parlectl +"
        for word in re.findall(pattern + r"(?:--socket[ =]\S+ +)?([a-z][a-z-]*)", line):
            named.setdefault(word, "%s:%d" % (d, n))
proto = text["docs/protocol.md"]
json_table = proto[proto.index("| command | stdout |"):]
json_table = json_table[:json_table.index("\n\n")]
for line in json_table.splitlines()[2:]:
    for word in re.findall(r"`([a-z]+)", line.split("|")[1]):
        named.setdefault(word, "docs/protocol.md (parlectl --json)")
for word, where in sorted(named.items()):
    if word not in commands:
        problems.append("%s names `parlectl %s`, which is no parlectl command (client/parlectl.c)"
                        % (where, word))
for c in sorted(commands - set(named)):
    problems.append("the parlectl command %s is not documented: no `parlectl %s` in README.md or docs/"
                    % (c, c))

# ---- job states: parled's, docs/protocol.md's and `parlectl list --state`'s ----
record = read("daemon/queue/job_record.c")
daemon_states = set(re.findall(r'"([a-z]+)"', record[record.index("state_names[]"):].split(";")[0]))
shown = read("daemon/queue/job_sched_status.c")  # the words a queued job is shown under
daemon_states |= set(re.findall(r'"([a-z]+)"', shown[shown.index("*job_queued_shown_as("):]
                                .split("}")[0]))
row = next(l for l in proto.splitlines() if l.startswith("| `state` "))
doc_states = set(re.findall(r"`([a-z]+)`", re.sub(r"\([^)]*\)", "", row.split("|")[3])))
ctl = read("client/jobs.c")
ctl_states = set(re.findall(r'"([a-z]+)"', ctl[ctl.index("states[] = {"):].split(";")[0]))
for state in sorted(daemon_states | doc_states | ctl_states):
    for where, have in (("parled (daemon/queue/job_record.c, job_sched_status.c)", daemon_states),
                        ("docs/protocol.md's state row", doc_states),
                        ("parlectl list --state (client/jobs.c)", ctl_states)):
        if state not in have:
            problems.append("the job state %s is not in %s" % (state, where))
for cmd in ("list", "ls"):
    out = subprocess.run([parlectl, cmd, "--help"], capture_output=True, text=True).stdout
    m = re.search(r"--state keeps those in state S\s*\(([^)]*)\)", out)
    listed = set(re.split(r",\s*", m.group(1))) if m else set()
    for state in sorted(ctl_states ^ listed):
        problems.append("parlectl %s --help %s the state %s" %
                        (cmd, "lists" if state in listed else "does not list", state))

# ---- exit statuses: a job ended timeout exits 1 ----
exit_row = next((l for l in proto.splitlines() if l.startswith("| 1 |")), "")
if "`timeout`" not in exit_row:
    problems.append("docs/protocol.md's exit status 1 row does not name `timeout`")
top = helptext[helptext.index("Exit statuses:"):] if "Exit statuses:" in helptext else ""
if not re.search(r"^  1 .*timeout", top, re.M):
    problems.append("parlectl --help's exit status 1 does not name timeout")
for cmd in ("wait", "watch", "submit"):
    out = subprocess.run([parlectl, cmd, "--help"], capture_output=True, text=True).stdout
    if not re.search(r"1 [^,]*(timeout|timed out)", " ".join(out.split())):
        problems.append("parlectl %s --help does not say that a job ended timeout exits 1" % cmd)

# ---- job fields ----
jobfile = read("daemon/jobfile/jobfile_fields.c")
table = jobfile[jobfile.index("fields[] = {"):]
table = table[:table.index("};")]
fields = set(re.findall(r'^\s*[A-Z]+\(\s*"([A-Za-z0-9_.]+)"', table, re.M))
if len(fields) < 40:
    problems.append("found only %d fields in daemon/jobfile/jobfile_fields.c's fields[]" % len(fields))
rows = set()
section = ""
for n, line in enumerate(text["docs/config.md"].splitlines(), 1):
    m = re.match(r"^## (?:`([a-z_]+)`|Top level)", line)
    if m:
        section = m.group(1) or ""
    elif line.startswith("## "):
        section = None
    m = re.match(r"^\| `([A-Za-z0-9_]+)` \|", line)
    if m and section is not None:
        path = section + "." + m.group(1) if section else m.group(1)
        rows.add(path)
        if path not in fields:
            problems.append("docs/config.md:%d documents the job field %s, which the validator "
                            "(daemon/jobfile/jobfile_fields.c) does not know" % (n, path))
for f in sorted(fields - rows):
    problems.append("the job field %s (daemon/jobfile/jobfile_fields.c) has no row in docs/config.md" % f)
sections = {f.split(".")[0] for f in fields if "." in f}
for d, t in text.items():
    for n, line in enumerate(t.splitlines(), 1):
        for path in re.findall(r"`((?:%s)\.[A-Za-z_][A-Za-z0-9_]*)" % "|".join(sorted(sections)), line):
            if path.rsplit(".", 1)[1] in ("c", "h", "md", "py", "sh", "json", "jsonl"):
                continue  # a file, not a field
            if path not in fields:
                problems.append("%s:%d names the job field %s, which the validator does not know"
                                % (d, n, path))

if problems:
    print("\n".join("FAIL: " + p for p in problems))
    sys.exit(1)
print("docs_check: %d parlectl commands, %d job states and %d job fields, each in the docs and the code"
      % (len(commands), len(daemon_states), len(fields)))
