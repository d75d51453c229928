#!/bin/sh
# Entrypoint of the postgres:15 stand-in (scripts/base-images/postgres/Dockerfile): what the official
# image's entrypoint does with POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB and PGDATA, in POSIX sh.
# Nothing more: no /docker-entrypoint-initdb.d, no POSTGRES_INITDB_ARGS, no other authentication methods.
set -eu

: "${PGDATA:=/var/lib/postgresql/data}"

if [ "${1:-}" = postgres ] && [ "$(id -u)" = 0 ]; then
    # A new volume belongs to root; the server runs as postgres.
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec env HOME=/var/lib/postgresql setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?the postgres image needs POSTGRES_PASSWORD}"
    user="${POSTGRES_USER:-postgres}"
    database="${POSTGRES_DB:-$user}"
    password_file="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$password_file"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$password_file" \
        --auth-local=trust --auth-host=scram-sha-256
    rm -f "$password_file"
    printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    # As in the official image, the set-up server listens on the Unix socket only: nothing connects over
    # TCP before the database exists.
    pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait start
    if [ "$database" != postgres ]; then
        psql -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres \
            --command="CREATE DATABASE \"$database\""
    fi
    pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop
    echo "postgres stand-in: initialised $PGDATA with user $user and database $database"
fi

if [ "${1:-}" = postgres ]; then
    shift
    exec postgres -c listen_addresses='*' "$@"
fi
exec "$@"
