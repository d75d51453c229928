#!/usr/bin/env bash
# Runs shellcheck over the project's shell scripts: scripts/*.sh, .ci/run, bench/*.sh, bench/lib/*.sh
# and the postgres stand-in's entrypoint. Required in CI; elsewhere it says so and passes when shellcheck is not installed
# (scripts/install-deps.sh --ci installs it).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v shellcheck >/dev/null 2>&1; then
    if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
        echo "check-shell: shellcheck is required in CI" >&2
        exit 1
    fi
    echo "check-shell: skipped, shellcheck is not installed (scripts/install-deps.sh --ci installs it)"
    exit 0
fi

files=(scripts/*.sh .ci/run bench/*.sh bench/lib/*.sh scripts/base-images/postgres/docker-entrypoint.sh)
shellcheck --external-sources "${files[@]}"
echo "check-shell: OK (${#files[@]} scripts)"
