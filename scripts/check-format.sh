#!/usr/bin/env bash
# The formatting checks `make lint` runs (and CI, through scripts/test.sh): swift format's lint of the Swift
# sources against the checked-in .swift-format, and js-beautify (jsbeautifier from PyPI, pinned in
# scripts/install-deps.sh) over the console's JavaScript modules. `make format` fixes both.
# Required in CI; elsewhere a missing js-beautify is reported and its check skipped.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

swift format lint -r -s Sources Tests Package.swift
echo "check-format: swift format lint OK"

js_beautify=.build-tools/venv/bin/js-beautify
if [[ ! -x "$js_beautify" ]]; then
    if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
        echo "check-format: js-beautify is required in CI (scripts/install-deps.sh --ci installs it)" >&2
        exit 1
    fi
    echo "check-format: js-beautify skipped, not installed (scripts/install-deps.sh --ci installs it)"
    exit 0
fi
# The options are the project's JavaScript style; keep them in step with the Makefile's format target.
read -r -a options < scripts/js-beautify.options
unformatted=()
for file in Sources/ActionHookConsole/Assets/*.js; do
    if ! "$js_beautify" "${options[@]}" "$file" | cmp -s - "$file"; then
        unformatted+=("$file")
    fi
done
if ((${#unformatted[@]} > 0)); then
    echo "check-format: not formatted (make format fixes it): ${unformatted[*]}" >&2
    exit 1
fi
echo "check-format: js-beautify OK"
