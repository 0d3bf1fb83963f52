#!/usr/bin/env python3
"""Print the N slowest tests of a cargo-nextest JUnit report.

    scripts/slowest.py path/to/junit.xml [N]

`make test` calls it at the end of the suite, failed or not, so the tests
that set the suite's length are in front of whoever makes it longer.
"""
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"slowest tests: no report to read at {path} ({e})", file=sys.stderr)
        return 0
    cases = []
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            failed = case.find("failure") is not None or case.find("error") is not None
            cases.append((float(case.get("time", "0")), suite.get("name", ""), case.get("name", ""), failed))
    cases.sort(reverse=True)
    total = float(root.get("time", "0") or 0)
    print(f"\nthe {min(n, len(cases))} slowest of {len(cases)} tests (suite wall time {total:.0f} s):")
    for t, suite, name, failed in cases[:n]:
        print(f"  {t:8.1f} s  {suite} {name}{'  (failed)' if failed else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
