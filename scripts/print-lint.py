#!/usr/bin/env python3
"""Where a scalebench source may write to the terminal itself.

Results and tables go to stdout from the command layer (commands/,
main.rs); progress from progress.rs; everything else on stderr is a log
event (`tracing`), so `-q`, `-v`, RUST_LOG and `--log-format json` govern it.
So: `println!`/`print!` only in commands/, main.rs and progress.rs;
`eprintln!`/`eprint!` only in progress.rs and main.rs (an error before the
log exists). Test modules (`#[cfg(test)] mod tests`) may print.

Usage: print-lint.py SRC_DIR ...   (exit 1 naming each line that breaks this)
"""
import pathlib
import re
import sys

STDOUT = re.compile(r"\b(println|print)!\s*\(")
STDERR = re.compile(r"\b(eprintln|eprint)!\s*\(")


def code_lines(text):
    """The file's lines up to its test module."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#[cfg(test)]") and i + 1 < len(lines) and lines[i + 1].startswith("mod tests"):
            return lines[:i]
    return lines


def main():
    bad = []
    paths = [(src, path) for src in map(pathlib.Path, sys.argv[1:]) for path in sorted(src.rglob("*.rs"))]
    for src, path in paths:
        rel = path.relative_to(src).as_posix()
        stdout_ok = rel.startswith("commands/") or rel in ("main.rs", "progress.rs")
        stderr_ok = rel in ("main.rs", "progress.rs")
        for n, line in enumerate(code_lines(path.read_text()), 1):
            code = line.split("//", 1)[0]
            if STDOUT.search(code) and not stdout_ok:
                bad.append(f"{path}:{n}: prints to stdout outside the command layer: {line.strip()}")
            if STDERR.search(code) and not stderr_ok:
                bad.append(f"{path}:{n}: writes to stderr past the log: {line.strip()}")
    for b in bad:
        print(b)
    if bad:
        print(
            "fix: results and tables are printed by commands/; everything else on stderr is "
            "tracing::info!/warn!/error! (see host/engine/src/logging.rs)"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
