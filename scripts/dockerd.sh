#!/usr/bin/env bash
# Starts a Docker engine for scalebench's Docker stacks and tests when none
# is running, and stops only the one it started:
#
#   scripts/dockerd.sh start   # no-op when `docker info` already answers
#   scripts/dockerd.sh stop    # stops the engine this script started, nothing else
#
# The engine runs as these machines allow (verified): vfs storage, no
# iptables, data under $SCALE_DOCKER_ROOT (default /var/tmp/scalebench-docker).
set -euo pipefail
ROOT="${SCALE_DOCKER_ROOT:-/var/tmp/scalebench-docker}"
PIDFILE="$ROOT/dockerd.pid"
case "${1:-start}" in
  start)
    if docker info >/dev/null 2>&1; then
      exit 0
    fi
    command -v dockerd >/dev/null 2>&1 || { echo "dockerd: not installed (scripts/setup.sh installs docker.io)" >&2; exit 1; }
    mkdir -p "$ROOT"
    echo "dockerd: starting (vfs, no iptables, data in $ROOT/data)" >&2
    nohup dockerd --storage-driver vfs --iptables=false --data-root "$ROOT/data" --exec-root "$ROOT/exec" \
      --pidfile "$PIDFILE" -H unix:///var/run/docker.sock >"$ROOT/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do
      docker info >/dev/null 2>&1 && { touch "$ROOT/started-by-scalebench"; exit 0; }
      sleep 0.5
    done
    echo "dockerd: did not answer within 30 s; see $ROOT/dockerd.log" >&2
    exit 1
    ;;
  stop)
    if [ -f "$ROOT/started-by-scalebench" ] && [ -f "$PIDFILE" ]; then
      kill "$(cat "$PIDFILE")" 2>/dev/null || true
      for _ in $(seq 1 40); do [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break; sleep 0.5; done
      rm -f "$ROOT/started-by-scalebench"
    fi
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
