#!/usr/bin/env bash
# Checks the Dockerfile without a Docker engine: every file it copies from the build context exists, and
# hadolint finds nothing in it nor in the base-image stand-ins (scripts/base-images/*/Dockerfile). hadolint comes from .build-tools/venv (scripts/install-deps.sh --ci) or PATH;
# it is required in CI, and skipped with a message elsewhere when missing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# COPY sources from the context (not --from another stage) must exist, so the image never points at a
# script that was renamed or removed.
problems=0
while read -r -a words; do
    sources=()
    for word in "${words[@]:1}"; do
        case "$word" in
            --from=*) continue 2 ;;
            --*) ;;
            *) sources+=("$word") ;;
        esac
    done
    unset 'sources[-1]'
    for source in "${sources[@]}"; do
        if ! compgen -G "$source" >/dev/null; then
            echo "check-dockerfile: Dockerfile copies '$source', which does not exist" >&2
            problems=$((problems + 1))
        fi
    done
done < <(grep -E '^COPY[[:space:]]' Dockerfile)
((problems == 0)) || exit 1

hadolint=.build-tools/venv/bin/hadolint
if [[ ! -x "$hadolint" ]]; then
    hadolint="$(command -v hadolint || true)"
fi
if [[ -z "$hadolint" ]]; then
    if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
        echo "check-dockerfile: hadolint is required in CI (scripts/install-deps.sh --ci installs it)" >&2
        exit 1
    fi
    echo "check-dockerfile: COPY sources OK; hadolint skipped, not installed (scripts/install-deps.sh --ci installs it)"
    exit 0
fi
"$hadolint" --no-color Dockerfile scripts/base-images/*/Dockerfile
echo "check-dockerfile: OK"
