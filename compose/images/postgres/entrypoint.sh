#!/bin/sh
# The cluster (database `scalebench`) when the data directory has none: at
# image build time (SCALE_PG_INIT_ONLY=1, then exit), or on the first start
# of an image built without it. Then the server in the foreground.
set -e
PGDATA=/var/lib/postgresql/data
BIN=/usr/lib/postgresql/15/bin
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  su postgres -s /bin/sh -c "$BIN/initdb -D $PGDATA -U postgres -A trust -E UTF8 --locale=C" >/dev/null
  echo "host all all 0.0.0.0/0 trust" >> "$PGDATA/pg_hba.conf"
  # Single-user mode: no server listening anywhere while it is made.
  echo "CREATE DATABASE scalebench" | su postgres -s /bin/sh -c "$BIN/postgres --single -D $PGDATA postgres" >/dev/null
fi
[ "${SCALE_PG_INIT_ONLY:-0}" = 1 ] && exit 0
# The server is PID 1 (setpriv execs, su would stay as a parent), so a
# signal to the container reaches PostgreSQL itself.
exec setpriv --reuid=postgres --regid=postgres --init-groups "$BIN/postgres" -D "$PGDATA" \
  -c listen_addresses='*' -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=50 \
  -c jit=off "$@"
