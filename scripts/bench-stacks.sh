#!/usr/bin/env bash
# Benchmark (prints, asserts nothing): the same short ladder on the local
# stack and on the Docker stack, one after the other, and what containers
# cost side by side: stored/s, p95 lag, CPU per service.
#
#   scripts/bench-stacks.sh [--steps 1k,2.5k] [--soak 30s] ...
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${SCALEBENCH:-${CARGO_TARGET_DIR:-target}/release/scalebench}"
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--steps 1k,2.5k --warmup 10s --soak 30s)
out=$(mktemp -d)
./scripts/dockerd.sh start
./scripts/docker-images.sh "$BIN"
for stack in local docker; do
  "$BIN" run --target baler --model plant-shaped --stack "$stack" --results-dir "$out/$stack" --continue-on-fail "${ARGS[@]}" >/dev/null
done
python3 - "$out" <<'PY'
import glob, json, sys
rows = {}
for stack in ("local", "docker"):
    r = json.load(open(glob.glob(f"{sys.argv[1]}/{stack}/*-ladder.json")[0]))
    for s in r["steps"]:
        cpu = " ".join(f"{k} {v['cpu_percent']:.0f}%" for k, v in sorted(s["resources"].items()))
        rows.setdefault(s["points"], {})[stack] = (s["status"], s["ingest"]["stored_rps"], s["lag"]["p95_s"], cpu)
print(f"{'points':>8} | {'stack':<6} | {'status':<12} | {'stored/s':>9} | {'p95 lag':>8} | CPU per service (100 = one core)")
for pts, by in sorted(rows.items()):
    for stack, (st, rps, p95, cpu) in by.items():
        f = lambda x, fmt: fmt.format(x) if x is not None else "n/m"
        print(f"{pts:>8} | {stack:<6} | {st:<12} | {f(rps, '{:9.0f}'):>9} | {f(p95, '{:.2f} s'):>8} | {cpu}")
PY
rm -rf "$out"
