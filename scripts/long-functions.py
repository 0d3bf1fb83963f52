#!/usr/bin/env python3
"""Functions over 120 lines, outside tests, that do not say why.

A long function is usually several phases wanting names. One that is long
on purpose says so in its doc comment: a line starting
`/// Long on purpose:` and the reason. Exit 1 naming each one that does
not (`make lint`).

Usage: long-functions.py SRC_DIR ...
"""
import os
import re
import sys

LIMIT = 120
FN = re.compile(r"^(\s*)(pub(\([a-z]+\))? )?(async )?fn (\w+)")


def functions(path):
    """(first line, lines, name, doc comment) of each function before the file's test module."""
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        if line.startswith("#[cfg(test)]"):
            break
        m = FN.match(line)
        if not m:
            continue
        indent = m.group(1)
        # A declaration without a body (a trait's method) ends at its `;`.
        sig_end = next((j for j in range(i, len(lines)) if lines[j].rstrip().endswith(("{", ";"))), None)
        if sig_end is None or lines[sig_end].rstrip().endswith(";"):
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == indent + "}"), None)
        if end is None:
            continue
        k = i
        while k > 0 and lines[k - 1].strip().startswith(("#[", "///")):
            k -= 1
        yield i + 1, end - i + 1, m.group(5), "\n".join(lines[k:i])


def main():
    bad = []
    for src in sys.argv[1:]:
        for root, _, names in os.walk(src):
            for n in sorted(names):
                if n.endswith(".rs"):
                    p = os.path.join(root, n)
                    for line, length, name, doc in functions(p):
                        if length > LIMIT and "/// Long on purpose:" not in doc:
                            bad.append(f"{p}:{line}: `{name}` is {length} lines: name its phases, or say why in a `/// Long on purpose:` line")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
