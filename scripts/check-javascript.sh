#!/usr/bin/env bash
# The console's JavaScript modules through a linter, beside the formatter that check-format.sh runs: oxlint
# (from PyPI, pinned in scripts/install-deps.sh) with the rules in scripts/oxlint.json (the correctness and
# suspicious categories, undefined names, loose equality). Any finding fails. `make lint` and CI run it.
# Required in CI; elsewhere a missing oxlint is reported and the check skipped.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

oxlint=.build-tools/venv/bin/oxlint
if [[ ! -x "$oxlint" ]]; then
    if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
        echo "check-javascript: oxlint is required in CI (scripts/install-deps.sh --ci installs it)" >&2
        exit 1
    fi
    echo "check-javascript: oxlint skipped, not installed (scripts/install-deps.sh --ci installs it)"
    exit 0
fi
"$oxlint" --config scripts/oxlint.json --deny-warnings Sources/ActionHookConsole/Assets
echo "check-javascript: oxlint OK"
