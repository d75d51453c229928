#!/usr/bin/env bash
# Webhook delivery throughput (quality P6, the webhook half), in one invocation: `make bench-delivery`.
#
# Starts a throwaway PostgreSQL (fsync and synchronous_commit on), ActionHook's release build with its
# worker, and bench/bare/bare.c as the receiver (a C libmicrohttpd server answering 202 without work).
# Measures, in this order, in this run:
#   sink        the receiver's own ceiling: wrk POSTing to it at BENCH_CONNECTIONS connections
#   drain       BENCH_DELIVERIES due webhook follow-ups written at once (one transaction), drained by the
#               worker to the receiver: deliveries per second from the write to the last `delivered`,
#               and the CPU the service and PostgreSQL spent per delivery (from /proc, all processes)
# BENCH_RUNS drains; the median is reported. Exit status non-zero when the median drain is below
# BENCH_GOAL (5,000/s) unless BENCH_ALLOW_FAIL=1.
#
# Environment: BENCH_DELIVERIES (20000), BENCH_RUNS (3), BENCH_CONNECTIONS (64), BENCH_GOAL (5000),
# BENCH_WORKER_CONCURRENCY (128, the service's default), BENCH_PG_PORT (55433), BENCH_SKIP_BUILD=1, BENCH_ALLOW_FAIL=1.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

deliveries="${BENCH_DELIVERIES:-20000}"
runs="${BENCH_RUNS:-3}"
connections="${BENCH_CONNECTIONS:-64}"
goal="${BENCH_GOAL:-5000}"
concurrency="${BENCH_WORKER_CONCURRENCY:-128}"
pg_port="${BENCH_PG_PORT:-55433}"
sink_port=18190
service_port=18191
admin_token="bench-delivery-admin-token-0123456789"

log() { echo "bench-delivery: $*" >&2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-delivery.XXXXXX")"
pg_dir="$work/pg"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    bash scripts/pg-local.sh destroy "$pg_dir" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

bash scripts/install-deps.sh >/dev/null
missing=()
for pkg in wrk bc gcc curl procps postgresql; do
    [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)" == installed ]] || missing+=("$pkg")
done
if ((${#missing[@]} > 0)); then
    as_root=()
    [[ "$(id -u)" == 0 ]] || as_root=(sudo)
    log "installing ${missing[*]}"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    log "building the release binary"
    swift build -c release --product actionhook >"$work/build.log" 2>&1 || {
        cat "$work/build.log" >&2
        exit 1
    }
fi
binary="$(swift build -c release --show-bin-path)/actionhook"
read -r -a mhd_flags <<<"$(pkg-config --cflags --libs libmicrohttpd)"
gcc -O2 -o "$work/bare" bench/bare/bare.c "${mhd_flags[@]}"

bash scripts/pg-local.sh start "$pg_dir" "$pg_port" max_connections=100 max_wal_size=8GB >"$work/pg.log" 2>&1 || {
    cat "$work/pg.log" >&2
    exit 1
}
database_url="$(bash scripts/pg-local.sh url "$pg_dir" "$pg_port")"
psql_() { psql "$database_url" -v ON_ERROR_STOP=1 -qtAX "$@"; }

"$work/bare" "$sink_port" 8 >/dev/null 2>&1 &
pids+=($!)

# CPU seconds (user + system) of processes, from /proc/PID/stat (fields 14 and 15, in clock ticks).
ticks_per_second="$(getconf CLK_TCK)"
cpu_seconds() {
    local total=0 pid stat
    for pid in "$@"; do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        stat="${stat##*) }"
        read -r -a fields <<<"$stat"
        total=$((total + fields[11] + fields[12]))
    done
    echo "scale=3; $total / $ticks_per_second" | bc
}
# The postmaster and its children (backends and background processes) at this moment.
postgres_pids() {
    local postmaster
    postmaster="$(head -1 "$(psql_ -c "SHOW data_directory")/postmaster.pid")"
    echo "$postmaster"
    pgrep -P "$postmaster"
}

log "sink ceiling (wrk, $connections connections, 5 s)"
cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"type":"response.accepted","data":{"n":1}}'
wrk.headers["Content-Type"] = "application/json"
wrk.path = "/v1/responses"
LUA
sink_rate="$(wrk -t2 -c"$connections" -d5s -s "$work/post.lua" "http://127.0.0.1:$sink_port" | awk '/Requests\/sec/ { print int($2) }')"

DATABASE_URL="$database_url" "$binary" migrate >/dev/null 2>&1
ACTIONHOOK_ADMIN_TOKEN="$admin_token" DATABASE_URL="$database_url" ACTIONHOOK_HOST=127.0.0.1 \
    ACTIONHOOK_PORT="$service_port" ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 ACTIONHOOK_WORKER_CONCURRENCY="$concurrency" \
    ACTIONHOOK_LOG_LEVEL=warning "$binary" serve >"$work/service.log" 2>&1 &
service_pid=$!
pids+=("$service_pid")
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$service_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs -H "Authorization: Bearer $admin_token" -H "Content-Type: application/json" \
    "http://127.0.0.1:$service_port/v1/apps" \
    -d "{\"id\":\"bench\",\"name\":\"bench\",\"webhook\":{\"url\":\"http://127.0.0.1:$sink_port/v1/responses\"}}" >/dev/null

rates=()
for run in $(seq "$runs"); do
    psql_ -c "TRUNCATE delivery_attempts, followups, responses"
    service_before="$(cpu_seconds "$service_pid")"
    mapfile -t pg_pids < <(postgres_pids)
    pg_before="$(cpu_seconds "${pg_pids[@]}")"
    started="$(date +%s.%N)"
    psql_ <<SQL
BEGIN;
INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer)
VALUES ('bench', '00000000-0000-4000-8000-000000000001', 'bench-$run', '\x00'::bytea, 'bulk', 'recorded', '{}');
INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at)
SELECT 'bench', gen_random_uuid(), '00000000-0000-4000-8000-000000000001', n, 'webhook',
       jsonb_build_object('body', jsonb_build_object('type', 'bench', 'n', n)), now()
FROM generate_series(1, $deliveries) AS n;
NOTIFY actionhook_followups;
COMMIT;
SQL
    while true; do
        done_count="$(psql_ -c "SELECT count(*) FROM followups WHERE status IN ('delivered', 'dead')")"
        [[ "$done_count" -ge "$deliveries" ]] && break
        sleep 0.05
    done
    finished="$(date +%s.%N)"
    service_after="$(cpu_seconds "$service_pid")"
    pg_after="$(cpu_seconds "${pg_pids[@]}")"
    dead="$(psql_ -c "SELECT count(*) FROM followups WHERE status = 'dead'")"
    elapsed="$(echo "$finished - $started" | bc)"
    rate="$(echo "$deliveries / $elapsed" | bc)"
    service_us="$(echo "scale=1; ($service_after - $service_before) * 1000000 / $deliveries" | bc)"
    pg_us="$(echo "scale=1; ($pg_after - $pg_before) * 1000000 / $deliveries" | bc)"
    log "run $run: $deliveries in ${elapsed}s = $rate deliveries/s ($dead dead); CPU per delivery: service ${service_us} µs, PostgreSQL ${pg_us} µs"
    rates+=("$rate")
done

median="$(printf '%s\n' "${rates[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
printf '%-28s %12s\n' "sink ceiling (req/s)" "$sink_rate"
printf '%-28s %12s\n' "webhook drain (median/s)" "$median"
printf '%-28s %12s\n' "goal" "$goal"
if [[ "$median" -lt "$goal" && "${BENCH_ALLOW_FAIL:-0}" != 1 ]]; then
    echo "P6 webhook drain: FAIL ($median < $goal deliveries/s)"
    exit 1
fi
echo "P6 webhook drain: $median deliveries/s (goal $goal)"
