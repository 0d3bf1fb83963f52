#!/usr/bin/env bash
# Every benchmark, each writing its figures (figure, baseline, ratio, goal,
# machine) to <dir>/<benchmark>.json. Ratios are printed and recorded, never
# asserted: a benchmark fails only when it cannot run.
#
#   scripts/bench.sh [short]   a few minutes, the figures the README quotes (`make bench`)
#   scripts/bench.sh smoke     tiny sizes, seconds each (`.ci/run`): a broken benchmark fails CI
#
# BENCH_DIR sets where the records go (default results/bench); SCALEBENCH the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-short}"
BIN="${SCALEBENCH:-${CARGO_TARGET_DIR:-target}/release/scalebench}"
dir="${BENCH_DIR:-results/bench}"
mkdir -p "$dir"

case "$mode" in
  short)
    gen=(--tags 10000 --samples 1000)
    generator=(--points 100k,1m --interval 5s --seconds 10 --stall 5s --tls --metrics-listen)
    nats=(--seconds 4 --repeats 3 --tls)
    http=(--tls)
    prefill=(--points 20k)
    stacks=(--steps 1k --warmup 5s --soak 15s)
    workers=()
    soak=(--duration 2m --every 15s --points 5k)
    coordinator=(--faults)
    ;;
  smoke)
    gen=(--tags 200 --samples 50)
    generator=(--points 2k --interval 1s --seconds 2 --tls --metrics-listen)
    nats=(--points 5k --seconds 1 --repeats 1 --tls)
    http=(--points 200 --messages 300 --batch 20 --tls)
    prefill=(--points 500 --days 0.25)
    stacks=(--steps 200 --warmup 1s --soak 3s)
    workers=(--workers 2 --points 2k --interval 1s --seconds 3 --cpus 0.2)
    soak=(--duration 12s --every 3s --points 200)
    coordinator=(--workers 2,4 --step 20s --seconds 2s --faults)
    ;;
  *) echo "usage: scripts/bench.sh [short|smoke]" >&2; exit 2 ;;
esac

run() {
  local name="$1"; shift
  echo "== $name" >&2
  local t0=$SECONDS
  "$BIN" "$@" --record "$dir"
  echo "== $name: $((SECONDS - t0)) s" >&2
}

run "gen --bench" gen --bench "${gen[@]}"
run "report --bench" report --bench
run "bench generator" bench generator "${generator[@]}"
run "bench nats" bench nats "${nats[@]}"
run "bench http" bench http "${http[@]}"
run "bench prefill" bench prefill "${prefill[@]}"
run "bench soak" bench soak "${soak[@]}"
run "bench coordinator" bench coordinator "${coordinator[@]}"
./scripts/dockerd.sh start >/dev/null
./scripts/docker-images.sh "$BIN" >&2
run "bench stacks" bench stacks "${stacks[@]}"
# Workers run as a Swarm service: a single-node swarm on this engine if it
# is in none, left again afterwards.
made_swarm=0
if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" != active ]; then
  docker swarm init --advertise-addr 127.0.0.1 >/dev/null
  made_swarm=1
fi
trap '[ "$made_swarm" = 1 ] && docker swarm leave --force >/dev/null' EXIT
run "bench workers" bench workers "${workers[@]}"

# The release binary's size against its goal (unoptimised plugin-compiler
# code is larger: see the release profile in Cargo.toml).
python3 - "$BIN" "$dir" <<'PY'
import json, os, pathlib, sys
mb = os.path.getsize(sys.argv[1]) / 1e6
fig = {"name": "release binary size", "value": round(mb, 1), "unit": "MB", "goal": "<= 100 MB", "goal_met": mb <= 100}
pathlib.Path(sys.argv[2], "binary-size.json").write_text(json.dumps({"benchmark": "binary size", "figures": [fig]}, indent=1))
PY

# Every benchmark left a whole record with finite figures.
python3 - "$dir" <<'PY'
import json, math, sys, pathlib
names = ["gen-bench", "report-bench", "bench-generator", "bench-nats", "bench-http", "bench-prefill", "bench-stacks", "bench-workers", "bench-soak", "bench-coordinator", "binary-size"]
bad = []
for n in names:
    p = pathlib.Path(sys.argv[1]) / f"{n}.json"
    try:
        r = json.loads(p.read_text())
    except Exception as e:
        bad.append(f"{p}: {e}"); continue
    figs = r.get("figures") or []
    if not figs or not all(isinstance(f.get("value"), (int, float)) and math.isfinite(f["value"]) for f in figs):
        bad.append(f"{p}: no finite figures"); continue
    for f in figs:
        ratio = f"  ratio {f['ratio']:.2f} vs {f['baseline_name']}" if f.get("ratio") is not None else ""
        goal = f"  goal {f['goal']}: {'met' if f.get('goal_met') else 'NOT met'}" if f.get("goal") else ""
        print(f"{r['benchmark']:<16} {f['name']:<52} {f['value']:>14,.2f} {f['unit']}{ratio}{goal}")
if bad:
    print("benchmarks without a record:\n  " + "\n  ".join(bad), file=sys.stderr); sys.exit(1)
PY
