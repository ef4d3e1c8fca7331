#!/usr/bin/env python3
"""Generate parle's installed docs from the one source each already has.

  gen-man.py help NAME SECTION PROGRAM OUT   man page from `PROGRAM --help`
                                             (parlectl: and each `COMMAND --help`)
  gen-man.py job CONFIG_MD OUT               parle-job(5) from docs/config.md
  gen-man.py completion PARLECTL OUT         bash completion from `parlectl --help`

Run by meson at build time (data/meson.build); nothing here restates the
text it converts.
"""
import re
import subprocess
import sys

VERSION_DATE = "parle"


def esc(text):
    """Escape plain text for roff (backslashes, leading control characters)."""
    text = text.replace("\\", "\\e")
    text = text.replace("\u0302", "^")  # x̂: groff has no combining circumflex
    text = text.replace("-", "\\-")
    return text


def line(text):
    text = esc(text)
    return "\\&" + text if text[:1] in (".", "'") else text


def md_inline(text):
    """Markdown inline code and emphasis to roff fonts."""
    out, parts = [], re.split(r"(`[^`]*`|\*\*[^*]+\*\*|\*[^*]+\*)", text)
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) >= 2:
            out.append("\\fB" + esc(p[1:-1]) + "\\fR")
        elif p.startswith("**") and p.endswith("**") and len(p) >= 4:
            out.append("\\fB" + esc(p[2:-2]) + "\\fR")
        elif p.startswith("*") and p.endswith("*") and len(p) >= 2:
            out.append("\\fI" + esc(p[1:-1]) + "\\fR")
        else:
            out.append(esc(p))
    s = "".join(out)
    return "\\&" + s if s[:1] in (".", "'") else s


def header(name, section, summary):
    return [
        f'.TH {name.upper()} {section} "" "{VERSION_DATE}" "parle manual"',
        ".SH NAME",
        f"{esc(name)} \\- {esc(summary)}",
    ]


def run_help(program, *args):
    return subprocess.run([program, *args, "--help"], check=True, capture_output=True,
                          text=True).stdout


def items(lines):
    """Indented help lines ("  TERM   text", continuations indented more) to
    (term, text) pairs."""
    out = []
    for ln in lines:
        body = ln.strip()
        indent = len(ln) - len(ln.lstrip(" "))
        m = re.match(r"^(\S.*?)(?:\s{2,}(.*))?$", body)
        if out and (indent > 2 or not m):
            out[-1][1].append(body)
        else:
            out.append([m.group(1), [m.group(2)] if m.group(2) else []])
    return out


def help_to_roff(name, section, text, details=None):
    blocks = [b.split("\n") for b in re.split(r"\n\s*\n", text.strip("\n"))]
    usage = blocks[0][0]
    assert usage.startswith("usage: "), f"{name} --help does not start with usage:"
    # The first clause of the description names the page.
    summary = re.split(r" \(|\. |\.$", " ".join(l.strip() for l in blocks[0][1:]) or name)[0]
    out = header(name, section, summary[0].lower() + summary[1:])
    out += [".SH SYNOPSIS", line(usage[len("usage: "):]), ".SH DESCRIPTION"]
    out += [line(" ".join(l.strip() for l in blocks[0][1:]))]
    for block in blocks[1:]:
        if block[0].startswith(" "):
            heading, body = "OPTIONS", block
        elif block[0].endswith(":") and len(block) > 1:
            heading, body = block[0][:-1].upper(), block[1:]
        else:
            out += [".PP", line(" ".join(l.strip() for l in block))]
            continue
        if heading == "COMMANDS" and details:
            out.append(".SH COMMANDS")
            for term, _ in items(body):
                cmd = term.split()[0]
                dl = details(cmd).rstrip("\n").split("\n")
                out += [".TP", "\\fB" + esc(dl[0][len("usage: parlectl "):]) + "\\fR"]
                # Further usage lines (indented), each a line of its own above
                # the description.
                more = 1
                while more < len(dl) and dl[more].startswith(" "):
                    out += ["\\fB" + esc(dl[more].strip()) + "\\fR", ".br"]
                    more += 1
                out += [line(l) for l in dl[more:]]
            continue
        out.append(".SH " + esc(heading))
        for term, text_lines in items(body):
            out += [".TP", "\\fB" + esc(term) + "\\fR"] + [line(t) for t in text_lines]
    return out


def config_to_roff(md):
    lines = md.split("\n")
    title = lines[0].lstrip("# ").strip()
    out = header("parle-job", 5, "parle " + title.lower() + ", the jobs parled trains")
    out += [".SH DESCRIPTION"]
    section, i, para = None, 1, []

    def flush():
        if para:
            out.extend([".PP", md_inline(" ".join(para))])
            para.clear()

    while i < len(lines):
        ln = lines[i]
        s = ln.strip()
        if ln.startswith("## "):
            flush()
            section = ln[3:].strip().strip("`")
            out.append(".SH " + esc(section.upper() if section[0].isupper() else "FIELDS: " + section))
        elif ln.startswith("### "):
            flush()
            out.append(".SS " + esc(ln[4:].strip().strip("`")))
        elif s.startswith("```"):
            flush()
            out += [".PP", ".nf", ".RS 4"]
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                out.append(line(lines[i].strip("\n")[len(ln) - len(ln.lstrip()):]))
                i += 1
            out += [".RE", ".fi"]
        elif s.startswith("|"):
            flush()
            head = [c.strip() for c in s.strip("|").split("|")]
            i += 2  # the header and its |---| line
            prefix = "" if section in (None, "Top level") else section + "."
            while i < len(lines) and lines[i].strip().startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                row = dict(zip(head, cells))
                field = row.pop("field").strip("`")
                meaning = row.pop("meaning", "")
                out += [".TP", "\\fB" + esc(prefix + field) + "\\fR"]
                out.append(md_inline("; ".join(f"{k}: {v}" for k, v in row.items() if v)))
                out += [".br", md_inline(meaning)]
                i += 1
            continue
        elif s.startswith("- "):
            flush()
            item = [s[2:]]
            while i + 1 < len(lines) and lines[i + 1].startswith("  ") and \
                    not lines[i + 1].strip().startswith("```"):
                i += 1
                item.append(lines[i].strip())
            out += [".IP \\(bu 2", md_inline(" ".join(item))]
        elif not s:
            flush()
        else:
            para.append(s)
        i += 1
    flush()
    out += [".SH SEE ALSO", "\\fBparlectl\\fR(1), \\fBparled\\fR(8)"]
    return out


def completion(program):
    text = run_help(program)
    block = text.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0].split("\n")
    cmds, opts = [], {}
    for term, rest in items(block):
        cmd = term.split()[0]
        aliases = re.findall(r"alias: (\w+)", " ".join(rest) + " " + term)
        for c in [cmd] + aliases:
            usage = run_help(program, c).split("\n", 1)[0]
            cmds.append(c)
            opts[c] = sorted(set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", usage)) | {"--help"})
    cases = "\n".join(f'        {c}) opts="{" ".join(o)}" ;;' for c, o in opts.items())
    return f"""# bash completion for parlectl, generated from `parlectl --help` by scripts/gen-man.py
_parlectl() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} cmd= i opts
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in
        --socket) ((i++)) ;;
        -*) ;;
        *) cmd=${{COMP_WORDS[i]}}; break ;;
        esac
    done
    if [ -z "$cmd" ]; then
        if [ "${{COMP_WORDS[COMP_CWORD-1]}}" = --socket ]; then
            COMPREPLY=($(compgen -f -- "$cur"))
        elif [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--socket --help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "{" ".join(cmds)}" -- "$cur"))
        fi
        return
    fi
    case $cmd in
{cases}
        *) opts= ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -F _parlectl parlectl
"""


def main(argv):
    if len(argv) == 6 and argv[1] == "help":
        name, section, program, dest = argv[2:]
        details = (lambda c: run_help(program, c)) if name == "parlectl" else None
        text = "\n".join(help_to_roff(name, section, run_help(program), details)) + "\n"
        if name == "parlectl":
            text += ".SH SEE ALSO\n\\fBparled\\fR(8), \\fBparle\\-job\\fR(5)\n"
        else:
            text += ".SH SEE ALSO\n\\fBparlectl\\fR(1), \\fBparle\\-job\\fR(5)\n"
    elif len(argv) == 4 and argv[1] == "job":
        with open(argv[2], encoding="utf-8") as f:
            text = "\n".join(config_to_roff(f.read())) + "\n"
        dest = argv[3]
    elif len(argv) == 4 and argv[1] == "completion":
        text, dest = completion(argv[2]), argv[3]
    else:
        sys.exit(__doc__)
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv)
