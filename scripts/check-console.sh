#!/usr/bin/env bash
# The console in a real browser: Tests/Console/console_test.py drives headless Chromium (selenium)
# against `actionhook serve --migrate` on a free port, over a fresh database `console_<random>` created
# beside ACTIONHOOK_TEST_DATABASE_URL (required) and dropped on exit. The service runs its delivery
# worker with loopback webhooks allowed and a one-retry schedule, so a follow-up to the test's receiver
# (which fails twice, then accepts) goes dead and is then retried from the page.
#
# Needs chromium, chromium-driver and selenium (scripts/install-deps.sh --ci): required in CI, installed
# here when missing elsewhere. Settings: ACTIONHOOK_BINARY (default .build/debug/actionhook).
# Logs in .build/test-logs/: console-server.log; screenshots of every page at desktop and phone width in
# .build/test-logs/console/.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

in_ci=0
if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
    in_ci=1
fi

note() { echo "check-console: $*" >&2; }
die() {
    note "$*"
    exit 1
}

venv_python="$repo_root/.build-tools/venv/bin/python"
log_dir="$repo_root/.build/test-logs"
server_log="$log_dir/console-server.log"
binary="${ACTIONHOOK_BINARY:-$repo_root/.build/debug/actionhook}"
started=$SECONDS

# --- the tools ---------------------------------------------------------------------------------------
have_tools() {
    [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver && -x "$venv_python" ]] &&
        "$venv_python" -c 'import selenium' >/dev/null 2>&1
}
if ! have_tools; then
    if ((in_ci)); then
        die "chromium, chromium-driver and selenium are required in CI (scripts/install-deps.sh --ci installs them)"
    fi
    note "installing chromium, chromium-driver and selenium (scripts/install-deps.sh --ci)"
    bash scripts/install-deps.sh --ci ||
        die "could not install the tools; run scripts/install-deps.sh --ci (needs apt and network access)"
    have_tools || die "scripts/install-deps.sh --ci did not install the tools"
fi

[[ -n "${ACTIONHOOK_TEST_DATABASE_URL:-}" ]] ||
    die "ACTIONHOOK_TEST_DATABASE_URL is not set (scripts/test.sh sets it)"
[[ -x "$binary" ]] || die "$binary is missing; build it first (swift build)"
command -v curl >/dev/null 2>&1 || die "curl is required"
psql="$(command -v psql || true)"
if [[ -z "$psql" ]]; then
    psql="${ACTIONHOOK_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"
    [[ -x "$psql" ]] || die "psql is required (scripts/install-deps.sh installs postgresql)"
fi
mkdir -p "$log_dir"

random_hex() {
    od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

database="console_$(random_hex 6)"
database_created=0
server_pid=

cleanup() {
    local status=$?
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
    if ((status != 0)); then
        note "FAILED after $((SECONDS - started))s (exit $status); server log: ${server_log#"$repo_root"/}, screenshots: .build/test-logs/console/"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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
    return 1
}

# Starts the server on a free port and waits for /readyz; another port when the bind lost a race.
start_server() {
    local attempt waited
    for attempt in 1 2 3; do
        port="$(free_port)" || die "found no free port"
        env DATABASE_URL="$database_url" \
            ACTIONHOOK_HOST=127.0.0.1 \
            ACTIONHOOK_PORT="$port" \
            ACTIONHOOK_ADMIN_TOKEN="$admin_token" \
            ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 \
            ACTIONHOOK_RETRY_SCHEDULE=1 \
            ACTIONHOOK_WORKER_POLL_MS=200 \
            ACTIONHOOK_LOG_LEVEL="${ACTIONHOOK_LOG_LEVEL:-notice}" \
            "$binary" serve --migrate >"$server_log" 2>&1 &
        server_pid=$!
        waited=0
        while ((waited < 600)); do
            if curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port/readyz" 2>/dev/null; then
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
start_server
echo "check-console: server ready at http://127.0.0.1:$port (database $database)"

ACTIONHOOK_CONSOLE_BASE_URL="http://127.0.0.1:$port" \
    ACTIONHOOK_CONSOLE_ADMIN_TOKEN="$admin_token" \
    ACTIONHOOK_CONSOLE_SCREENSHOTS="$log_dir/console" \
    "$venv_python" Tests/Console/console_test.py || die "the browser test failed (see above)"

kill -0 "$server_pid" 2>/dev/null || die "the server died during the browser test"
echo "check-console: OK after $((SECONDS - started))s; screenshots in .build/test-logs/console/"
