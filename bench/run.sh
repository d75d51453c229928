#!/usr/bin/env bash
# ActionHook's performance benchmark (the figures P1-P5 and P2b of docs/benchmarks.md), in one invocation:
# `make bench`.
#
# Installs what is missing (wrk, gcc, libmicrohttpd-dev, libpq-dev, libjson-c-dev, PostgreSQL with pgbench,
# curl, python3), builds the contenders, starts a throwaway PostgreSQL (fsync and synchronous_commit on)
# and measures each contender for a warm-up plus BENCH_RUNS runs of BENCH_DURATION seconds at
# BENCH_CONNECTIONS connections, one after the other on this machine:
#   bare          bench/bare/bare.c: libmicrohttpd set up as ActionHook's, 202 without work (the ceiling)
#   pgbench-*     the same rows inserted by pgbench -M prepared: one response (and its idempotency key) per
#                 transaction, a response and its follow-up per transaction, and the latter at 32 clients (P2:
#                 the rows ActionHook writes for the benchmark's request, one request per transaction)
#   peer          bench/peer: the same endpoint with Hummingbird 2 + PostgresNIO (release build), measured at
#                 each pool size of BENCH_PEER_POOLS (peer-poolN); the best median is the reference "peer"
#   reference     bench/reference/reference.c: a C server on libmicrohttpd + libpq that answers the same
#                 requests as ActionHook and writes exactly its rows (response, idempotency key, follow-up)
#                 with group commit, one statement per batch (P2b: the limit of this stack on this machine)
#   actionhook    ActionHook's release build, the full ingest path on a realistic app (bench/setup-app.sh)
#   *-mixed       reference-mixed, actionhook-mixed and pgbench-p2-mixed: the same with 1 reply in 4 making a
#                 follow-up (an "accept"; the others a "maybe", recorded only), for P2-mixed and P2b-mixed
#   actionhook-reject    a request ActionHook refuses with 422 before the database (P3)
#   actionhook-unauthorized  the same body without a key, refused with 401 before parsing it: the
#                        HTTP layer alone, to tell its cost from the validation's (no figure)
#   actionhook-identity  the same requests to an app with identity `required` (ES256), each carrying the user
#                        token of one of BENCH_CONNECTIONS users (P11: / actionhook, same run)
#   actionhook-signed    the same requests, each signed by one of 256 registered devices and verified (P11:
#                        / actionhook, its runs alternating with actionhook's); bench/signed_replies.py signs
#                        them before the runs, as phones sign on their own CPUs
#   actionhook-plain, actionhook-delivering   the real mix (P13): ActionHook with its worker on and the app's
#                        webhooks going to the bare server; replies that make no follow-up, against 1 in 4
#                        making a webhook that the worker delivers during the run (runs alternating), with the
#                        backlog left after each delivering run
#   actionhook-half      ActionHook paced at half its measured peak (P4), see bench/lua/ingest.lua
#   actionhook-soak      ActionHook at full load for one long run of BENCH_SOAK seconds (P5's drift)
# The load comes from wrk with bench/lua/ingest.lua. Server memory is read from /proc/PID/status
# (VmRSS) every 0.5 s under load, and the CPU the server and PostgreSQL used in each run from /proc/PID/stat
# (bench/lib/cpu.sh). The figures go to bench/results/latest.json (and a copy under bench/results/<run>/), the
# table to stdout; the exit status is non-zero when a figure falls short.
#
# Environment: BENCH_DURATION (15 s), BENCH_RUNS (3), BENCH_WARMUP (5 s), BENCH_SOAK (300 s), BENCH_CONNECTIONS (64),
# BENCH_P2_CLIENTS (32), BENCH_PEER_POOLS ("8 16 32 64"), BENCH_WRK_THREADS (2), BENCH_PG_PORT (55432), BENCH_ALLOW_FAIL=1 (report only,
# exit 0), BENCH_SKIP_BUILD=1 (use the binaries already built), BENCH_ONLY (space-separated contender
# names to run; the figures that need others are then reported as missing), BENCH_PG_EXTRA (more
# name=value settings for the throwaway PostgreSQL, for experiments: e.g. "backend_flush_after=256kB").
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench_dir="$repo_root/bench"
cd "$repo_root"

duration="${BENCH_DURATION:-15}"
runs="${BENCH_RUNS:-3}"
warmup="${BENCH_WARMUP:-5}"
soak="${BENCH_SOAK:-300}"
connections="${BENCH_CONNECTIONS:-64}"
p2_clients="${BENCH_P2_CLIENTS:-32}"
wrk_threads="${BENCH_WRK_THREADS:-2}"
pg_port="${BENCH_PG_PORT:-55432}"
allow_fail="${BENCH_ALLOW_FAIL:-0}"
skip_build="${BENCH_SKIP_BUILD:-0}"
only="${BENCH_ONLY:-}"
bare_port=18090
peer_port=18091
actionhook_port=18092
reference_port=18093
sink_port=18094
http_threads=8 # ActionHook's default ACTIONHOOK_HTTP_THREADS; the bare server uses the same
peer_pools="${BENCH_PEER_POOLS:-8 16 32 64}"
app_id=bench

for number in "$duration" "$runs" "$warmup" "$soak" "$connections" "$p2_clients" "$wrk_threads" "$pg_port"; do
    [[ "$number" =~ ^[0-9]+$ && "$number" -gt 0 ]] || {
        echo "bench: BENCH_* settings must be positive integers (got '$number')" >&2
        exit 2
    }
done

log() { echo "bench: $*" >&2; }
# shellcheck source=bench/lib/cpu.sh
source "$bench_dir/lib/cpu.sh"

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
results_dir="$bench_dir/results"
run_dir="$results_dir/$stamp"
raw="$run_dir/raw"
mkdir -p "$raw"
build_dir="$bench_dir/.build"
actionhook_bin="$repo_root/.build-bench/release/actionhook"
peer_bin="$bench_dir/peer/.build/release/Peer"
bare_bin="$build_dir/bare"
reference_bin="$build_dir/reference"

# --- Install -------------------------------------------------------------------------------------

install_missing() {
    bash "$repo_root/scripts/install-deps.sh" --with wrk gcc libc6-dev make libjson-c-dev postgresql-contrib curl python3 \
        procps
}

pg_bin_dir() {
    if [[ -x /usr/lib/postgresql/15/bin/pgbench ]]; then
        echo /usr/lib/postgresql/15/bin
    else
        dirname "$(find /usr/lib/postgresql -path '*/bin/pgbench' 2>/dev/null | sort -V | tail -n 1)"
    fi
}

# --- Processes started here, stopped on exit ------------------------------------------------------

pg_dir=""
server_pid=""
sampler_pid=""

stop_server() {
    if [[ -n "$server_pid" ]]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        local waited=0
        while kill -0 "$server_pid" 2>/dev/null && ((waited < 100)); do
            sleep 0.1
            waited=$((waited + 1))
        done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}

stop_sampler() {
    if [[ -n "$sampler_pid" ]]; then
        kill "$sampler_pid" 2>/dev/null || true
        wait "$sampler_pid" 2>/dev/null || true
        sampler_pid=""
    fi
}

# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
    stop_sampler
    stop_server
    if [[ -n "$pg_dir" ]]; then
        bash "$repo_root/scripts/pg-local.sh" destroy "$pg_dir" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# VmRSS of $1 every 0.5 s into $2 ("<unix ms> <kB>" per line) until killed or the process ends.
sample_rss() {
    local pid="$1" file="$2" rss
    while kill -0 "$pid" 2>/dev/null; do
        rss="$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)"
        if [[ -n "$rss" ]]; then
            echo "$(date +%s%3N) $rss" >>"$file"
        fi
        sleep 0.5
    done
}

start_sampler() {
    stop_sampler
    if [[ -n "$server_pid" ]]; then
        sample_rss "$server_pid" "$1" &
        sampler_pid=$!
    fi
}

# Waits until $1 answers 2xx, or with "any" as $2 until it answers at all.
wait_http() {
    local url="$1" fail=-f tries=0
    if [[ "${2:-}" == any ]]; then fail=-s; fi
    until curl "$fail" -sS -o /dev/null "$url" 2>/dev/null; do
        tries=$((tries + 1))
        if ((tries > 300)) || { [[ -n "$server_pid" ]] && ! kill -0 "$server_pid" 2>/dev/null; }; then
            log "no answer from $url"
            return 1
        fi
        sleep 0.1
    done
}

# --- Build ----------------------------------------------------------------------------------------

build_all() {
    mkdir -p "$build_dir"
    log "building the bare C server"
    # shellcheck disable=SC2046 # pkg-config prints several words on purpose
    gcc -O2 -Wall -Wextra -o "$bare_bin" "$bench_dir/bare/bare.c" $(pkg-config --cflags --libs libmicrohttpd)
    log "building the C reference server"
    # shellcheck disable=SC2046
    gcc -O2 -Wall -Wextra -pthread -o "$reference_bin" "$bench_dir/reference/reference.c" \
        $(pkg-config --cflags --libs libmicrohttpd libpq json-c libcrypto) -lm
    log "building ActionHook (release, .build-bench)"
    swift build -c release --scratch-path "$repo_root/.build-bench" --product actionhook
    log "building the peer (release, bench/peer/.build)"
    (cd "$bench_dir/peer" && swift build -c release)
}

# --- Database -------------------------------------------------------------------------------------

psql_bench() {
    "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d actionhook "$@"
}

# Each database contender starts from empty tables and a checkpoint.
reset_tables() {
    psql_bench -c "TRUNCATE responses, idempotency_keys, followups, delivery_attempts" -c "CHECKPOINT"
}

# --- Load -----------------------------------------------------------------------------------------

wants() { [[ -z "$only" || " $only " == *" $1 "* ]]; }

# The machine may be shared: the share of the CPU busy in the second before each contender starts
# (when nothing of the benchmark runs) goes into the results.
note_load() {
    local before after
    before="$(awk '/^cpu / { print $2 + $3 + $4 + $6 + $7 + $8, $5 }' /proc/stat)"
    sleep 1
    after="$(awk '/^cpu / { print $2 + $3 + $4 + $6 + $7 + $8, $5 }' /proc/stat)"
    echo "$1 $(echo "$before $after" | awk '{ busy = $3 - $1; idle = $4 - $2; printf "%.1f", (busy + idle > 0) ? 100 * busy / (busy + idle) : 0 }')" \
        >>"$raw/busy.txt"
}

# CPU seconds the server and PostgreSQL have used so far: "server postgres" (bench/lib/cpu.sh).
cpu_used() {
    local server=0
    if [[ -n "$server_pid" ]]; then server="$(process_cpu_seconds "$server_pid")"; fi
    echo "$server $(postgres_cpu_seconds "$postmaster_pid")"
}

# One wrk phase: contender $1, phase $2, $3 seconds against $4 (extra environment for the Lua script
# in the remaining arguments), with the server's memory sampled meanwhile and the CPU the server and
# PostgreSQL used in it written to NAME-PHASE.cpu ("server_seconds postgres_seconds").
wrk_phase() {
    local name="$1" phase="$2" seconds="$3" url="$4" before after
    shift 4
    start_sampler "$raw/$name-$phase.rss"
    before="$(cpu_used)"
    env "$@" BENCH_THREADS="$wrk_threads" BENCH_NONCE="$stamp-$name-$phase" BENCH_OUT="$raw/$name-$phase.json" \
        wrk -t"$wrk_threads" -c"$connections" -d"${seconds}s" --timeout 10s -s "$bench_dir/lua/ingest.lua" \
        "$url" >"$raw/$name-$phase.wrk.txt"
    after="$(cpu_used)"
    stop_sampler
    echo "$before $after" | awk '{ printf "%.3f %.3f\n", $3 - $1, $4 - $2 }' >"$raw/$name-$phase.cpu"
    log "$name $phase: $(cat "$raw/$name-$phase.json") cpu $(cat "$raw/$name-$phase.cpu")"
}

# wrk against $2 as contender $1: a warm-up, then BENCH_RUNS measured runs.
run_wrk() {
    local name="$1" url="$2"
    shift 2
    local phase
    note_load "$name"
    wrk_phase "$name" warmup "$warmup" "$url" "$@"
    for phase in $(seq 1 "$runs"); do
        wrk_phase "$name" "$phase" "$duration" "$url" "$@"
    done
}

# run_pgbench NAME "SCRIPT[@WEIGHT] ..." CLIENTS: each transaction runs one of the scripts, chosen by weight.
run_pgbench() {
    local name="$1" scripts="$2" clients="$3" phase script
    local common=(-h 127.0.0.1 -p "$pg_port" -U postgres -n -M prepared -c "$clients" -j "$wrk_threads")
    for script in $scripts; do common+=(-f "$bench_dir/pgbench/$script"); done
    reset_tables
    note_load "$name"
    for phase in warmup $(seq 1 "$runs"); do
        if [[ "$phase" == warmup ]]; then
            "$pg_bin/pgbench" "${common[@]}" -T "$warmup" actionhook >"$raw/$name-$phase.txt" 2>&1
        else
            # Per-transaction latencies for p50/p99 (a fifth of them, to keep the client light).
            (cd "$raw" && "$pg_bin/pgbench" "${common[@]}" -T "$duration" -l --sampling-rate=0.2 \
                --log-prefix="$name-$phase.log" actionhook >"$raw/$name-$phase.txt" 2>&1)
        fi
        log "$name $phase: $(grep -E '^tps' "$raw/$name-$phase.txt" || echo 'no tps line')"
    done
}

# sign_replies RESULT: signed replies for actionhook-signed (bench/signed_replies.py), as many as it can send: the
# rate of the run RESULT (raw/RESULT.json, or 15,000/s) for every second it runs, and three fifths more; never
# sent twice (a replay would answer 200).
sign_replies() {
    local lines
    lines="$(python3 - "$raw/$1.json" "$(( warmup + runs * duration ))" <<'PY'
import json, sys
try:
    rate = json.load(open(sys.argv[1]))["good_rps"]
except (OSError, KeyError, ValueError):
    rate = 15000
print(int(max(rate, 1000) * int(sys.argv[2]) * 1.6))
PY
)"
    log "signing $lines replies for actionhook-signed"
    rm -f "$raw"/signed-*.txt "$raw"/signed-*.pos
    "$repo_root/.build-tools/venv/bin/python3" "$bench_dir/signed_replies.py" generate "$raw/signed-keys.json" \
        "$app_id" "$lines" "$wrk_threads" "$raw/signed"
}

log_signed_rows() {
    log "stored: $(psql_bench -tAc "SELECT (SELECT count(*) FROM responses) || ' responses (' ||
        (SELECT count(*) FROM responses WHERE signature = 'valid') || ' signed and valid, ' ||
        (SELECT count(*) FROM responses WHERE signature = 'invalid') || ' invalid), ' ||
        (SELECT count(*) FROM followups) || ' follow-ups'")"
    rm -f "$raw"/signed-*.txt "$raw"/signed-*.pos
}

# Starts ActionHook (the worker off), with more NAME=value settings in the arguments.
start_actionhook() {
    env DATABASE_URL="postgresql://postgres@127.0.0.1:$pg_port/actionhook" \
        ACTIONHOOK_HOST=127.0.0.1 ACTIONHOOK_PORT="$actionhook_port" ACTIONHOOK_ADMIN_TOKEN="$admin_token" \
        ACTIONHOOK_RATE_LIMIT_PER_SECOND=10000000 ACTIONHOOK_DEVICE_RATE_LIMIT_PER_SECOND=10000000 \
        ACTIONHOOK_WORKER=0 ACTIONHOOK_HTTP_MAX_CONNECTIONS_PER_IP=0 ACTIONHOOK_LOG_LEVEL=warning \
        ACTIONHOOK_HTTP_THREADS="$http_threads" ACTIONHOOK_SHUTDOWN_GRACE_SECONDS=2 "$@" \
        "$actionhook_bin" serve --migrate >>"$raw/actionhook.log" 2>&1 &
    server_pid=$!
    wait_http "http://127.0.0.1:$actionhook_port/readyz"
}

# --- Main -----------------------------------------------------------------------------------------

install_missing
pg_bin="$(pg_bin_dir)"
[[ -x "$pg_bin/pgbench" ]] || {
    log "pgbench not found under /usr/lib/postgresql"
    exit 1
}
if [[ "$skip_build" == 1 ]]; then
    log "BENCH_SKIP_BUILD=1: using the binaries already built"
else
    build_all
fi
binaries=("$bare_bin" "$actionhook_bin")
if wants peer; then binaries+=("$peer_bin"); fi
if wants reference; then binaries+=("$reference_bin"); fi
for binary in "${binaries[@]}"; do
    [[ -x "$binary" ]] || {
        log "$binary is missing (run without BENCH_SKIP_BUILD)"
        exit 1
    }
done

pg_dir="$(mktemp -d /tmp/actionhook-bench-pg.XXXXXX)"
rmdir "$pg_dir" # pg-local.sh creates it
# fsync and synchronous_commit stay on (durable numbers); a large max_wal_size keeps checkpoints out
# of the measured runs (each contender starts after an explicit CHECKPOINT).
# BENCH_PG_EXTRA: more settings, space-separated (name=value each).
read -r -a pg_extra <<<"${BENCH_PG_EXTRA:-}"
bash "$repo_root/scripts/pg-local.sh" start "$pg_dir" "$pg_port" max_connections=300 max_wal_size=8GB "${pg_extra[@]}" \
    >"$raw/pg-local.log" 2>&1 || {
    cat "$raw/pg-local.log" >&2
    exit 1
}
# As root the cluster may live elsewhere (pg-local.sh says where); destroy on exit finds it either way.
log "PostgreSQL $("$pg_bin/postgres" --version | awk '{ print $3 }') on port $pg_port (fsync $(psql_bench -tAc 'SHOW fsync'), synchronous_commit $(psql_bench -tAc 'SHOW synchronous_commit'))"
# Whose CPU (and its children's) each run counts as PostgreSQL's.
postmaster_pid="$(head -1 "$(psql_bench -tAc 'SHOW data_directory')/postmaster.pid")"

# ActionHook migrates the schema; its admin API creates the app every contender writes for.
admin_token="bench-admin-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
start_actionhook
ingest_key="$(bash "$bench_dir/setup-app.sh" "http://127.0.0.1:$actionhook_port" "$admin_token" "$app_id")"
if wants actionhook-identity; then
    # The same app again, with identity required: its backend's ES256 key, and a token per user (as many
    # users as connections, valid for the whole run), minted by the README's example.
    identity_key="$(bash "$bench_dir/setup-app.sh" "http://127.0.0.1:$actionhook_port" "$admin_token" "$app_id-identity")"
    openssl ecparam -name prime256v1 -genkey -noout -out "$raw/identity-private.pem" 2>/dev/null
    openssl ec -in "$raw/identity-private.pem" -pubout -out "$raw/identity-public.pem" 2>/dev/null
    python3 - "$raw/identity-public.pem" >"$raw/identity-patch.json" <<'PY'
import json, sys
pem = open(sys.argv[1]).read()
print(json.dumps({"identity": {"mode": "required", "keys": [{"kid": "bench", "algorithm": "ES256", "publicKey": pem}]}}))
PY
    curl -fsS -o /dev/null -X PATCH -H "Authorization: Bearer $admin_token" -H "Content-Type: application/json" \
        --data-binary "@$raw/identity-patch.json" "http://127.0.0.1:$actionhook_port/v1/apps/$app_id-identity"
    "$repo_root/.build-tools/venv/bin/python3" - "$repo_root/examples/identity" "$raw/identity-private.pem" \
        "$app_id-identity" "$connections" >"$raw/identity-tokens.txt" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from mint_user_token import mint_user_token
key = open(sys.argv[2]).read()
for user in range(int(sys.argv[4])):
    print(mint_user_token(sys.argv[3], f"user-{user}", "bench", key, lifetime_seconds=6 * 3600))
PY
fi
if wants actionhook-signed; then
    # Devices of the same app, each registered with its own P-256 key.
    "$repo_root/.build-tools/venv/bin/python3" "$bench_dir/signed_replies.py" register \
        "http://127.0.0.1:$actionhook_port" "$admin_token" "$app_id" 256 "$raw/signed-keys.json"
fi
log "app '$app_id' set up: $(psql_bench -tAc "SELECT count(*) FROM categories WHERE app_id = '$app_id'") categories, $(psql_bench -tAc "SELECT count(*) FROM rules WHERE app_id = '$app_id'") rules"
stop_server

if wants bare; then
    log "--- bare C libmicrohttpd server"
    "$bare_bin" "$bare_port" "$http_threads" 2>"$raw/bare.log" &
    server_pid=$!
    sleep 0.3
    run_wrk bare "http://127.0.0.1:$bare_port/v1/responses" BENCH_MODE=ingest BENCH_KEY="$ingest_key" BENCH_EXPECT=202
    stop_server
fi

if wants pgbench-response; then
    log "--- pgbench: one response per transaction, $connections clients"
    run_pgbench pgbench-response response.sql "$connections"
fi
if wants pgbench-response-followup; then
    log "--- pgbench: a response and its follow-up per transaction, $connections clients"
    run_pgbench pgbench-response-followup response-followup.sql "$connections"
fi
if wants pgbench-p2; then
    log "--- pgbench: a response and its follow-up per transaction, $p2_clients clients (P2's reference)"
    run_pgbench pgbench-p2 response-followup.sql "$p2_clients"
fi
if wants pgbench-p2-mixed; then
    log "--- pgbench: a response per transaction, 1 in 4 with its follow-up, $p2_clients clients (P2-mixed's reference)"
    run_pgbench pgbench-p2-mixed "response.sql@3 response-followup.sql@1" "$p2_clients"
fi

if wants peer; then
    # The peer as a competent deployment would size it: each pool size of BENCH_PEER_POOLS is measured
    # (contender peer-poolN), and the best median is "peer", the reference of P1.
    best_pool="" best_rps=0
    for pool in $peer_pools; do
        log "--- peer: Hummingbird 2 + PostgresNIO, pool of $pool connections"
        reset_tables
        env PEER_PORT="$peer_port" PEER_DB_PORT="$pg_port" PEER_APP_ID="$app_id" PEER_INGEST_KEY="$ingest_key" \
            PEER_POOL_SIZE="$pool" "$peer_bin" >"$raw/peer-pool$pool.log" 2>&1 &
        server_pid=$!
        wait_http "http://127.0.0.1:$peer_port/" any
        run_wrk "peer-pool$pool" "http://127.0.0.1:$peer_port/v1/responses" BENCH_MODE=ingest BENCH_KEY="$ingest_key" \
            BENCH_EXPECT=202
        stop_server
        rps="$(python3 "$bench_dir/report.py" --median-rps "$raw" "peer-pool$pool")"
        if [[ -z "$best_pool" ]] || (($(echo "$rps > $best_rps" | bc))); then
            best_pool="$pool" best_rps="$rps"
        fi
    done
    log "peer: best pool $best_pool ($best_rps req/s median)"
    for file in "$raw/peer-pool$best_pool"-*; do
        cp "$file" "$raw/peer-${file#"$raw/peer-pool$best_pool"-}"
    done
    echo "$best_pool" >"$raw/peer.pool"
fi

if wants reference || wants reference-mixed; then
    # The same database, schema and app as ActionHook's (its migrations and setup-app.sh ran above); the
    # reference loads the app's ingest key from api_keys.
    log "--- C reference: libmicrohttpd + libpq, group commit"
    reset_tables
    "$reference_bin" "$reference_port" "$http_threads" "postgresql://postgres@127.0.0.1:$pg_port/actionhook" \
        2>"$raw/reference.log" &
    server_pid=$!
    wait_http "http://127.0.0.1:$reference_port/" any
    if wants reference; then
        run_wrk reference "http://127.0.0.1:$reference_port/v1/responses" BENCH_MODE=ingest BENCH_KEY="$ingest_key" \
            BENCH_EXPECT=202
        psql_bench -tAc "SELECT 'stored: ' || (SELECT count(*) FROM responses) || ' responses, ' ||
            (SELECT count(*) FROM idempotency_keys) || ' keys, ' || (SELECT count(*) FROM followups) || ' follow-ups'" \
            >"$raw/reference-rows.txt"
        log "reference $(cat "$raw/reference-rows.txt")"
    fi
    if wants reference-mixed; then
        reset_tables
        run_wrk reference-mixed "http://127.0.0.1:$reference_port/v1/responses" BENCH_MODE=mixed \
            BENCH_KEY="$ingest_key" BENCH_EXPECT=202
        log "reference-mixed stored: $(psql_bench -tAc "SELECT (SELECT count(*) FROM responses) || ' responses, ' ||
            (SELECT count(*) FROM followups) || ' follow-ups'")"
    fi
    stop_server
fi

if wants actionhook || wants actionhook-identity || wants actionhook-signed || wants actionhook-mixed ||
    wants actionhook-reject ||
    wants actionhook-unauthorized || wants actionhook-half || wants actionhook-soak; then
    log "--- ActionHook (release)"
    reset_tables
    start_actionhook
    ingest_url="http://127.0.0.1:$actionhook_port/v1/responses"
    unsigned=(BENCH_MODE=ingest BENCH_KEY="$ingest_key" BENCH_EXPECT=202)
    signed=(BENCH_MODE=ingest BENCH_KEY="$ingest_key" BENCH_EXPECT=202 BENCH_SIGNED="$raw/signed")
    if wants actionhook && wants actionhook-signed; then
        # P11-signed's pair runs alternately (actionhook 1, actionhook-signed 1, actionhook 2, …), so that a
        # machine whose speed drifts over the invocation weighs on both alike.
        note_load actionhook
        wrk_phase actionhook warmup "$warmup" "$ingest_url" "${unsigned[@]}"
        sign_replies actionhook-warmup
        wrk_phase actionhook-signed warmup "$warmup" "$ingest_url" "${signed[@]}"
        for phase in $(seq 1 "$runs"); do
            wrk_phase actionhook "$phase" "$duration" "$ingest_url" "${unsigned[@]}"
            wrk_phase actionhook-signed "$phase" "$duration" "$ingest_url" "${signed[@]}"
        done
        log_signed_rows
    elif wants actionhook; then
        run_wrk actionhook "$ingest_url" "${unsigned[@]}"
        log "actionhook stored: $(psql_bench -tAc "SELECT (SELECT count(*) FROM responses) || ' responses, ' ||
            (SELECT count(*) FROM followups) || ' follow-ups'")"
    elif wants actionhook-signed; then
        sign_replies none
        run_wrk actionhook-signed "$ingest_url" "${signed[@]}"
        log_signed_rows
    fi
    if wants actionhook-identity; then
        reset_tables
        run_wrk actionhook-identity "http://127.0.0.1:$actionhook_port/v1/responses" \
            BENCH_MODE=ingest BENCH_KEY="$identity_key" BENCH_EXPECT=202 BENCH_USER_TOKENS="$raw/identity-tokens.txt"
        log "actionhook-identity stored: $(psql_bench -tAc "SELECT (SELECT count(*) FROM responses) || ' responses (' ||
            (SELECT count(*) FROM responses WHERE user_verified) || ' verified, ' ||
            (SELECT count(DISTINCT user_id) FROM responses) || ' users), ' ||
            (SELECT count(*) FROM followups) || ' follow-ups'")"
    fi
    if wants actionhook-mixed; then
        reset_tables
        run_wrk actionhook-mixed "http://127.0.0.1:$actionhook_port/v1/responses" \
            BENCH_MODE=mixed BENCH_KEY="$ingest_key" BENCH_EXPECT=202
        log "actionhook-mixed stored: $(psql_bench -tAc "SELECT (SELECT count(*) FROM responses) || ' responses, ' ||
            (SELECT count(*) FROM followups) || ' follow-ups'")"
    fi
    if wants actionhook-reject; then
        run_wrk actionhook-reject "http://127.0.0.1:$actionhook_port/v1/responses" \
            BENCH_MODE=reject BENCH_KEY="$ingest_key" BENCH_EXPECT=422
    fi
    if wants actionhook-unauthorized; then
        run_wrk actionhook-unauthorized "http://127.0.0.1:$actionhook_port/v1/responses" \
            BENCH_MODE=reject BENCH_KEY="" BENCH_EXPECT=401
    fi
    if wants actionhook-half; then
        peak="$(python3 "$bench_dir/report.py" --median-rps "$raw" actionhook)"
        half=$((${peak%.*} / 2))
        if ((half < 1)); then half=1; fi
        log "pacing at $half req/s (half of the measured peak $peak)"
        echo "$half" >"$raw/actionhook-half.rate"
        # Like every database contender, from empty tables after a checkpoint (the same, warm server):
        # otherwise the vacuum and checkpoint of the full-load runs' rows land in this one.
        reset_tables
        run_wrk actionhook-half "http://127.0.0.1:$actionhook_port/v1/responses" \
            BENCH_MODE=ingest BENCH_KEY="$ingest_key" BENCH_EXPECT=202 BENCH_RATE="$half"
    fi
    if wants actionhook-soak; then
        # The same server, already warm: one long run at full load for memory drift and steadiness.
        log "soak: $soak s at full load"
        note_load actionhook-soak
        wrk_phase actionhook-soak 1 "$soak" "http://127.0.0.1:$actionhook_port/v1/responses" \
            BENCH_MODE=ingest BENCH_KEY="$ingest_key" BENCH_EXPECT=202
    fi
    psql_bench -tAc "SELECT 'stored: ' || (SELECT count(*) FROM responses) || ' responses, ' ||
        (SELECT count(*) FROM followups) || ' follow-ups, ' ||
        (SELECT count(DISTINCT (subject, device_token)) FROM responses
            WHERE subject IS NOT NULL AND outcome IN ('accepted', 'declined')) ||
        ' subjects decided (per device)'" >"$raw/actionhook-rows.txt"
    log "$(cat "$raw/actionhook-rows.txt")"
    stop_server
fi

if wants actionhook-plain || wants actionhook-delivering; then
    # P13, the real mix: the same server with its worker on and the app's webhooks going to a receiver (the
    # bare server, 202 without work). actionhook-plain sends replies that make no follow-up (a "maybe",
    # recorded); actionhook-delivering sends 1 in 4 replies making a webhook (an "accept"), which the worker
    # delivers during the run. The pair runs alternately, from empty tables; after each delivering run the
    # backlog (follow-ups not yet delivered) is written to actionhook-delivering-N.backlog beside the
    # follow-ups it made, so that a ratio bought by leaving deliveries behind shows.
    log "--- ActionHook (release), worker on: the real mix (P13)"
    "$bare_bin" "$sink_port" 2 2>"$raw/sink.log" &
    sink_pid=$!
    reset_tables
    start_actionhook ACTIONHOOK_WORKER=1 ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1
    curl -fsS -o /dev/null -X PATCH -H "Authorization: Bearer $admin_token" -H "Content-Type: application/json" \
        --data-binary "{\"webhook\": {\"url\": \"http://127.0.0.1:$sink_port/v1/responses\"}}" \
        "http://127.0.0.1:$actionhook_port/v1/apps/$app_id"
    ingest_url="http://127.0.0.1:$actionhook_port/v1/responses"
    plain=(BENCH_MODE=maybe BENCH_KEY="$ingest_key" BENCH_EXPECT=202)
    delivering=(BENCH_MODE=mixed BENCH_KEY="$ingest_key" BENCH_EXPECT=202)
    note_load actionhook-plain
    wrk_phase actionhook-plain warmup "$warmup" "$ingest_url" "${plain[@]}"
    wrk_phase actionhook-delivering warmup "$warmup" "$ingest_url" "${delivering[@]}"
    for phase in $(seq 1 "$runs"); do
        wrk_phase actionhook-plain "$phase" "$duration" "$ingest_url" "${plain[@]}"
        made_before="$(psql_bench -tAc "SELECT count(*) FROM followups")"
        wrk_phase actionhook-delivering "$phase" "$duration" "$ingest_url" "${delivering[@]}"
        psql_bench -tAc "SELECT count(*) - $made_before,
            (SELECT count(*) FROM followups WHERE status <> 'delivered') FROM followups" -F ' ' \
            >"$raw/actionhook-delivering-$phase.backlog"
        log "actionhook-delivering $phase: follow-ups made, not yet delivered: $(cat "$raw/actionhook-delivering-$phase.backlog")"
    done
    log "actionhook-delivering: $(psql_bench -tAc "SELECT count(*) || ' follow-ups, ' ||
        count(*) FILTER (WHERE status = 'delivered') || ' delivered' FROM followups")"
    stop_server
    kill -TERM "$sink_pid" 2>/dev/null || true
    wait "$sink_pid" 2>/dev/null || true
fi

partial=()
if [[ -n "$only" ]]; then partial=(--partial); fi
status=0
python3 "$bench_dir/report.py" "$raw" "${partial[@]}" \
    --out "$run_dir/results.json" --latest "$results_dir/latest.json" \
    --setting duration_s="$duration" --setting runs="$runs" --setting warmup_s="$warmup" --setting soak_s="$soak" \
    --setting connections="$connections" --setting p2_clients="$p2_clients" --setting wrk_threads="$wrk_threads" \
    --setting http_threads="$http_threads" --setting peer_pools="$peer_pools" \
    --setting postgres="$("$pg_bin/postgres" --version | awk '{ print $3 }')" \
    --setting command="${BENCH_COMMAND:-make bench}" || status=$?
if ((status != 0)) && [[ "$allow_fail" == 1 ]]; then
    log "figures fall short (exit $status), reported only (BENCH_ALLOW_FAIL=1)"
    status=0
fi
exit "$status"
