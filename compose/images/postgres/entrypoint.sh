#!/bin/sh
# initdb on first start (database `scalebench`), then the server in the foreground.
set -e
PGDATA=/var/lib/postgresql/data
BIN=/usr/lib/postgresql/15/bin
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  su postgres -s /bin/sh -c "$BIN/initdb -D $PGDATA -U postgres -A trust -E UTF8 --locale=C" >/dev/null
  echo "host all all 0.0.0.0/0 trust" >> "$PGDATA/pg_hba.conf"
  su postgres -s /bin/sh -c "$BIN/postgres -D $PGDATA -c listen_addresses=127.0.0.1 -p 5433" &
  for i in $(seq 1 50); do su postgres -s /bin/sh -c "$BIN/pg_isready -q -h 127.0.0.1 -p 5433" && break; sleep 0.2; done
  su postgres -s /bin/sh -c "psql -h 127.0.0.1 -p 5433 -qc 'CREATE DATABASE scalebench'"
  su postgres -s /bin/sh -c "$BIN/pg_ctl -D $PGDATA -m fast -w stop" >/dev/null
fi
# The server is PID 1 (setpriv execs, su would stay as a parent), so a
# signal to the container reaches PostgreSQL itself.
exec setpriv --reuid=postgres --regid=postgres --init-groups "$BIN/postgres" -D "$PGDATA" \
  -c listen_addresses='*' -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=50 "$@"
