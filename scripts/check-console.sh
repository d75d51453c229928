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

# shellcheck source=scripts/live-service.sh
source scripts/live-service.sh

cleanup() {
    local status=$?
    live_service_stop
    if ((status != 0)); then
        note "FAILED after $((SECONDS - started))s (exit $status); server log: ${server_log#"$repo_root"/}, screenshots: .build/test-logs/console/"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

live_service_start console ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 ACTIONHOOK_RETRY_SCHEDULE=1 ACTIONHOOK_WORKER_POLL_MS=200
echo "check-console: server ready at $base_url (database $database)"

ACTIONHOOK_CONSOLE_BASE_URL="$base_url" \
    ACTIONHOOK_CONSOLE_ADMIN_TOKEN="$admin_token" \
    ACTIONHOOK_CONSOLE_SCREENSHOTS="$log_dir/console" \
    "$venv_python" Tests/Console/console_test.py || die "the browser test failed (see above)"

kill -0 "$server_pid" 2>/dev/null || die "the server died during the browser test"
echo "check-console: OK after $((SECONDS - started))s; screenshots in .build/test-logs/console/"
