#!/usr/bin/env bash
# The whole test suite, the way CI runs it (.ci/run → make test → this script).
#
# Installs what is missing (with CI's tools when CI=true or ACTIONHOOK_TEST_FULL=1), starts a throwaway
# PostgreSQL cluster on a free port (deleted on exit), exports ACTIONHOOK_TEST_DATABASE_URL, then stops at
# the first failure of: scripts/check-c-imports.sh; `docker-compose config -q` (required in CI);
# `swift build --build-tests`; `swift test` (the client package's suite in a run of its own); every other scripts/check-*.sh, in lexical order;
# the reliability faults in their short form (bench/faults.sh, FAULTS_SIZE=short) against the debug binary just built;
# the failovers of a Patroni cluster in their short form (bench/failover.sh, FAILOVER_SIZE=short: the primary
# crashed, then frozen), against the same binary.
# ACTIONHOOK_TEST_ARGS adds arguments to `swift test` (e.g. "--filter PostgresTests").
# ACTIONHOOK_TEST_STRESS=1 (`make test-stress`; CI does it too) runs `swift test` with two CPU hogs beside it
# (stress-ng --cpu 2), the load of a developer's busy laptop: the suite must pass on such a machine.
# Logs of the build and the tests: .build/test-logs/.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

if ! command -v swift >/dev/null 2>&1 && [[ -x /opt/swift/usr/bin/swift ]]; then
    export PATH="$PATH:/opt/swift/usr/bin"
fi

in_ci=0
if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
    in_ci=1
fi
full=0
if ((in_ci)) || [[ "${ACTIONHOOK_TEST_FULL:-}" == 1 ]]; then
    full=1
fi
stress=0
if [[ "${ACTIONHOOK_TEST_STRESS:-}" == 1 ]]; then
    stress=1
fi
log_dir="$repo_root/.build/test-logs"
started=$SECONDS
step_name=setup
passed=()
pg_dir=

joined() {
    local IFS=,
    echo "${*:-none}"
}

finish() {
    local status=$?
    stop_cpu_hogs
    if [[ -n "$pg_dir" ]]; then
        bash scripts/pg-local.sh destroy "$pg_dir" 2>/dev/null || echo "test: could not delete the test cluster in $pg_dir" >&2
    fi
    if ((status != 0)); then
        echo "==> test: FAILED at '$step_name' after $((SECONDS - started))s (exit $status); passed before it: $(joined "${passed[@]}")" >&2
    fi
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() {
    step_name="$1"
    shift
    echo "==> $step_name"
    local step_started=$SECONDS
    "$@"
    passed+=("$step_name ($((SECONDS - step_started))s)")
}

# free_port: a port nothing listens on (PostgreSQL's own bind decides in the end; starting retries).
# shellcheck source=scripts/live-service.sh
source scripts/live-service.sh

start_test_cluster() {
    pg_dir="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-test-pg.XXXXXX")"
    local attempt port
    for attempt in 1 2 3; do
        port="$(free_port)"
        # fsync=off only risks data on an OS crash, which a throwaway cluster does not care about; a
        # PostgreSQL crash or immediate restart still loses nothing that was committed.
        if bash scripts/pg-local.sh start "$pg_dir" "$port" max_connections=300 fsync=off; then
            export ACTIONHOOK_TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/postgres"
            echo "ACTIONHOOK_TEST_DATABASE_URL=$ACTIONHOOK_TEST_DATABASE_URL"
            return 0
        fi
        echo "test: starting the test cluster on port $port failed (attempt $attempt of 3)" >&2
    done
    return 1
}

check_compose() {
    if command -v docker-compose >/dev/null 2>&1; then
        # The file requires an admin token: valid with one, refused without.
        ACTIONHOOK_ADMIN_TOKEN=config-check-admin-token docker-compose config -q
        if env -u ACTIONHOOK_ADMIN_TOKEN docker-compose config -q >/dev/null 2>&1; then
            echo "test: docker-compose.yml accepts a missing ACTIONHOOK_ADMIN_TOKEN" >&2
            return 1
        fi
        echo "docker-compose.yml is valid and requires ACTIONHOOK_ADMIN_TOKEN"
    elif ((in_ci)); then
        echo "test: docker-compose is required in CI (scripts/install-deps.sh --ci installs it)" >&2
        return 1
    else
        echo "skipped: docker-compose is not installed (scripts/install-deps.sh --ci installs it)"
    fi
}

swift_build() {
    swift build --build-tests 2>&1 | tee "$log_dir/swift-build.log"
}

# The client package's suite runs on its own, after the rest: its client is driven by Swift concurrency
# (URLSession callbacks, the send loop's tasks), and beside suites that hold the concurrency pool's few
# threads with blocking calls it would be starved for seconds on a two-core machine. It is the only suite of
# the ClientIntegrationTests target, and the target's name selects it.
client_suite=ClientIntegrationTests

stress_pid=
start_cpu_hogs() {
    stress-ng --cpu 2 --quiet >/dev/null 2>&1 &
    stress_pid=$!
    echo "two CPU hogs (stress-ng --cpu 2) run beside the suite"
}
stop_cpu_hogs() {
    if [[ -n "$stress_pid" ]]; then
        kill "$stress_pid" 2>/dev/null || true
        wait "$stress_pid" 2>/dev/null || true
        stress_pid=
    fi
}

# A failing suite ends the script (set -e) and `finish` stops the hogs.
swift_test() {
    if ((stress)); then start_cpu_hogs; fi
    swift_test_suites
    stop_cpu_hogs
}

# One `swift test` run into log $1 (the rest are its arguments). On a failure the failing tests and what they
# recorded are printed again at the end, so that the last lines of a long run name them.
run_suites() {
    local log="$1"
    shift
    if ! swift test --skip-build --disable-xctest "$@" 2>&1 | tee "$log"; then
        echo "==> swift test failed; the failing tests and what they recorded (all of it in $log):"
        grep -E '^(✘|↳)' "$log" | cut -c1-600 | head -n 60
        return 1
    fi
}

swift_test_suites() {
    local extra=()
    read -r -a extra <<<"${ACTIONHOOK_TEST_ARGS:-}"
    if ((${#extra[@]})); then
        run_suites "$log_dir/swift-test.log" "${extra[@]}"
        return
    fi
    run_suites "$log_dir/swift-test.log" --skip "$client_suite"
    run_suites "$log_dir/swift-test-client.log" --filter "$client_suite"
}

command -v swift >/dev/null 2>&1 || {
    echo "test: swift is not on PATH" >&2
    exit 1
}
mkdir -p "$log_dir"

install_args=()
if ((full)); then install_args+=(--ci); fi
if ((stress)); then install_args+=(--with stress-ng); fi
step "install dependencies" bash scripts/install-deps.sh "${install_args[@]}"
step "start test cluster" start_test_cluster
step "check-c-imports" bash scripts/check-c-imports.sh
step "docker-compose config" check_compose
step "swift build --build-tests" swift_build
step "swift test" swift_test

LC_COLLATE=C
for check in scripts/check-*.sh; do
    if [[ -f "$check" && "$check" != scripts/check-c-imports.sh ]]; then
        name="${check#scripts/}"
        step "${name%.sh}" bash "$check"
    fi
done

# The faults of quality.md (R1-R10, F3) in their short form, about two minutes: the debug binary is the one the
# tests ran against, and a release build would cost minutes more (`make faults` runs them at full size).
step "faults (short)" env FAULTS_SIZE=short FAULTS_BINARY="$(swift build --show-bin-path)/actionhook" bash bench/faults.sh

# Quality R14 in its short form, about four minutes: the primary crashed and frozen under load (`make failover`
# runs every fault).
step "failover (short)" env FAILOVER_SIZE=short FAILOVER_BINARY="$(swift build --show-bin-path)/actionhook" \
    bash bench/failover.sh

echo "==> test: OK after $((SECONDS - started))s, ${#passed[@]} steps: $(joined "${passed[@]}"); logs in .build/test-logs/"
