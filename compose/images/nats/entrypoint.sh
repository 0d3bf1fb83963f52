#!/bin/sh
# nats-server with the compose file's flags. JetStream's sync_interval has
# no flag, only a config key: when SCALE_NATS_SYNC is set (`always` or a
# duration such as 10s; scalebench checks it first) it goes into a config
# file of its own, and the flags, given after -c, still apply (-sd, -n …).
set -eu
if [ -n "${SCALE_NATS_SYNC:-}" ]; then
  case "$SCALE_NATS_SYNC" in
    always) value=always ;;
    *[!0-9a-z.]*) echo "scale-nats: SCALE_NATS_SYNC=$SCALE_NATS_SYNC is not always or a duration" >&2; exit 2 ;;
    *) value="\"$SCALE_NATS_SYNC\"" ;;
  esac
  printf 'jetstream {\n  sync_interval: %s\n}\n' "$value" >/tmp/scale-nats.conf
  exec nats-server -c /tmp/scale-nats.conf "$@"
fi
exec nats-server "$@"
