#!/usr/bin/env bash
# Sourced, not run: the live service the check scripts test against (check-openapi.sh, check-console.sh),
# and the free-port finder scripts/test.sh uses too.
#
# The sourcing script defines `note` and `die` and sets `binary` (the actionhook executable), `psql` and
# `server_log`, and has ACTIONHOOK_TEST_DATABASE_URL set. `live_service_start PREFIX [VAR=value ...]`
# creates a database named PREFIX_<random> on that server and serves the binary over it on a free
# port, with the extra settings given, until /readyz answers. It sets `database`, `database_url`,
# `admin_token`, `port`, `base_url` and `server_pid`. `live_service_stop` (for the script's EXIT trap)
# stops the server with SIGTERM (SIGKILL after 15 s) and drops the database.
#
# The variables it reads are the sourcing script's, and those it sets are for it to read:
# shellcheck disable=SC2154,SC2034

random_hex() {
    od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

# A port nothing listens on; the server's own bind decides in the end, so starting retries on a clash.
free_port() {
    local port tries=0
    while ((tries < 200)); do
        port=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
        tries=$((tries + 1))
    done
    echo "found no free port" >&2
    return 1
}

database=
database_created=0
server_pid=

live_service_stop() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        local waited=0
        while kill -0 "$server_pid" 2>/dev/null && ((waited < 150)); do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$server_pid" 2>/dev/null; then
            note "the server did not stop within 15 s of SIGTERM; killing it"
            kill -KILL "$server_pid" 2>/dev/null || true
        fi
        wait "$server_pid" 2>/dev/null || true
    fi
    if ((database_created)); then
        "$psql" -X -q -v ON_ERROR_STOP=1 -d "$ACTIONHOOK_TEST_DATABASE_URL" \
            -c "DROP DATABASE IF EXISTS \"$database\" WITH (FORCE)" >/dev/null 2>&1 ||
            note "could not drop the database $database"
    fi
}

live_service_start() {
    local prefix="$1"
    shift
    database="${prefix}_$(random_hex 6)"
    "$psql" -X -q -v ON_ERROR_STOP=1 -d "$ACTIONHOOK_TEST_DATABASE_URL" -c "CREATE DATABASE \"$database\"" >/dev/null ||
        die "could not create the database $database through ACTIONHOOK_TEST_DATABASE_URL"
    database_created=1

    # The same server and credentials, another database: a URI gets a new path, a conninfo a later dbname.
    database_url="$(python3 - "$ACTIONHOOK_TEST_DATABASE_URL" "$database" <<'PY'
import sys
from urllib.parse import urlsplit, urlunsplit

url, name = sys.argv[1], sys.argv[2]
if url.startswith(("postgresql://", "postgres://")):
    print(urlunsplit(urlsplit(url)._replace(path="/" + name)))
else:
    print(url + " dbname=" + name)
PY
)"
    admin_token="$(random_hex 16)"

    # Another port when the bind lost a race.
    local attempt waited
    for attempt in 1 2 3; do
        port="$(free_port)" || die "found no free port"
        env DATABASE_URL="$database_url" \
            ACTIONHOOK_HOST=127.0.0.1 \
            ACTIONHOOK_PORT="$port" \
            ACTIONHOOK_ADMIN_TOKEN="$admin_token" \
            ACTIONHOOK_LOG_LEVEL="${ACTIONHOOK_LOG_LEVEL:-notice}" \
            "$@" \
            "$binary" serve --migrate >"$server_log" 2>&1 &
        server_pid=$!
        waited=0
        while ((waited < 600)); do
            if curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port/readyz" 2>/dev/null; then
                base_url="http://127.0.0.1:$port"
                return 0
            fi
            if ! kill -0 "$server_pid" 2>/dev/null; then
                break
            fi
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$server_pid" 2>/dev/null; then
            tail -n 20 "$server_log" >&2 || true
            die "the server on port $port was not ready within 60 s"
        fi
        wait "$server_pid" 2>/dev/null || true
        server_pid=
        note "the server exited before it was ready (attempt $attempt of 3):"
        tail -n 20 "$server_log" >&2 || true
    done
    die "the server did not start"
}
