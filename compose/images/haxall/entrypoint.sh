#!/bin/sh
# First start: create the database with the superuser from the password file
# (never an environment variable or the command line, so it stays out of
# `docker inspect`). Then run Haxall headless on port 8080. The superuser is
# what the haxall adapter logs in as: `commit` needs su rights.
set -eu
DB=/var/haxall/db
SU_USER="${HAXALL_SU_USER:-su}"
PW_FILE="${HAXALL_PASSWORD_FILE:-/run/secrets/haxall_password}"
if [ ! -d "$DB" ]; then
    [ -r "$PW_FILE" ] || { echo "haxall: no password file at $PW_FILE" >&2; exit 2; }
    /opt/haxall/bin/hx init -headless -httpPort 8080 -suUser "$SU_USER" -suPass "$(cat "$PW_FILE")" "$DB"
fi
exec /opt/haxall/bin/hx run "$DB"
