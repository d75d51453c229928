#!/usr/bin/env bash
# Runs ActionHook on this machine: installs what is missing, builds the release binary, starts the
# development PostgreSQL cluster in .local/pg (port ACTIONHOOK_DEV_PG_PORT, default 5433; skipped when
# DATABASE_URL is already set), and serves with `actionhook serve --migrate` on ACTIONHOOK_PORT (default
# 8080). ACTIONHOOK_ADMIN_TOKEN, when unset, comes from .local/admin-token, generated on the first run.
# Extra arguments go to `actionhook serve`. Stop the cluster with `make clean-db` (deletes its data).
#
# Beside the service it runs `actionhook inbox` on ACTIONHOOK_INBOX_PORT (default 8081), which prints
# each webhook it receives with its signature checked, and sets up the demo app `demo` (a category, a
# rule, its webhook pointing at the inbox; secret in .local/inbox-secret, ingest key in
# .local/demo-ingest-key). Only this local instance gets ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1, so it may
# deliver to the inbox on this machine. ACTIONHOOK_DEMO=0 serves alone, as before.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

if ! command -v swift >/dev/null 2>&1 && [[ -x /opt/swift/usr/bin/swift ]]; then
    export PATH="$PATH:/opt/swift/usr/bin"
fi
command -v swift >/dev/null 2>&1 || {
    echo "run: swift is not on PATH" >&2
    exit 1
}

bash scripts/install-deps.sh
swift build -c release --product actionhook

if [[ -z "${DATABASE_URL:-}" ]]; then
    pg_port="${ACTIONHOOK_DEV_PG_PORT:-5433}"
    bash scripts/pg-local.sh start .local/pg "$pg_port"
    DATABASE_URL="$(bash scripts/pg-local.sh url .local/pg "$pg_port")"
    export DATABASE_URL
    echo "run: DATABASE_URL=$DATABASE_URL"
else
    echo "run: using DATABASE_URL from the environment; the local cluster is not started"
fi

if [[ -z "${ACTIONHOOK_ADMIN_TOKEN:-}" ]]; then
    token_file=.local/admin-token
    if [[ ! -s "$token_file" ]]; then
        mkdir -p .local
        (
            umask 077
            od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$token_file"
        )
    fi
    ACTIONHOOK_ADMIN_TOKEN="$(<"$token_file")"
    export ACTIONHOOK_ADMIN_TOKEN
    echo "run: admin token (from $token_file): $ACTIONHOOK_ADMIN_TOKEN"
fi

if [[ "${ACTIONHOOK_DEMO:-1}" == 0 ]]; then
    exec .build/release/actionhook serve --migrate "$@"
fi
exec bash scripts/run-demo.sh "$@"
