#!/usr/bin/env python3
"""Checks the suite's nextest configuration (.config/nextest.toml) for
settings nextest accepts but does not carry out as written.

- threads-required on tests of a test group: nextest 0.9.143 never started
  two Docker tests given threads-required = 5 in a group of max-threads 1,
  nor the three queued behind them; the run ended with "5/460 tests were
  not run" and no failure. Hold such tests apart by group and priority.

Usage: nextest-config.py [path]   (default .config/nextest.toml)
Exit status 1, each problem named, if any is found.
"""
import sys
import tomllib


def problems(config):
    out = []
    groups = config.get("test-groups", {})
    for name, profile in config.get("profile", {}).items():
        for i, o in enumerate(profile.get("overrides", [])):
            group = o.get("test-group")
            if group is not None and "threads-required" in o:
                out.append(
                    f"profile.{name}.overrides[{i}] ({o.get('filter', '?')}): threads-required = "
                    f"{o['threads-required']} in test group {group!r} "
                    f"(max-threads {groups.get(group, {}).get('max-threads', '?')}): nextest may never start "
                    "these tests nor those queued behind them; hold them apart by group and priority instead"
                )
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else ".config/nextest.toml"
    with open(path, "rb") as f:
        config = tomllib.load(f)
    found = problems(config)
    for p in found:
        print(f"{path}: {p}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
