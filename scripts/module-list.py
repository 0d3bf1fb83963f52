#!/usr/bin/env python3
"""The module list of Rust crates' src/, one line each: the module's path
and the first line of its `//!` header.

    scripts/module-list.py [SRC ...]                   # print the list
    scripts/module-list.py SRC ... --check DOC.md      # exit 1 when DOC's list is not this one
    scripts/module-list.py SRC ... --write DOC.md      # rewrite DOC's list

DOC holds the list between `<!-- modules: begin -->` and
`<!-- modules: end -->`; `make lint` checks docs/architecture.md, so a
module added without a line there fails the gate.
"""
import os
import sys

BEGIN, END = "<!-- modules: begin -->", "<!-- modules: end -->"


def header(path):
    lines = []
    for line in open(path, encoding="utf-8"):
        s = line.strip()
        if s.startswith("//!"):
            text = s[3:].strip()
            if not text and lines:
                break
            if text:
                lines.append(text)
            if text.endswith(".") or text.endswith(":"):
                break
        elif lines or s:
            break
    text = " ".join(lines) or "(no header)"
    # Its first sentence.
    cut = text.find(". ")
    return text[: cut + 1] if cut > 0 else text


def module_list(srcs):
    rows = []
    for src in srcs:
        rows += crate_rows(src)
    return "\n".join(rows)


def crate_rows(src):
    rows = []
    for root, dirs, names in os.walk(src):
        dirs.sort()
        for n in sorted(names):
            if not n.endswith(".rs"):
                continue
            p = os.path.join(root, n)
            rows.append(f"- `{os.path.normpath(p)}`: {header(p)}")
    rows.sort()
    return rows


def main():
    argv = sys.argv[1:]
    mode = next((a for a in argv if a in ("--check", "--write")), None)
    doc = None
    if mode:
        i = argv.index(mode)
        doc = argv[i + 1]
        del argv[i : i + 2]
    srcs = [a for a in argv if not a.startswith("--")] or [
        "host/scalebench/src", "host/engine/src", "host/report/src", "host/results/src"]
    src = " ".join(srcs)
    listing = module_list(srcs)
    if mode is None:
        print(listing)
        return
    text = open(doc, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{doc} has no {BEGIN} … {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{listing}\n{END}{tail}"
    if mode == "--write":
        open(doc, "w", encoding="utf-8").write(new)
    elif new != text:
        print(f"{doc}: its module list is not the modules of {src} (a module added, moved or renamed, or its //! header changed)")
        print(f"hint: run scripts/module-list.py {src} --write {doc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
