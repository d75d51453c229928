#!/usr/bin/env bash
# Delivery at full speed (quality P6 and P7), in one invocation: `make bench-delivery`.
#
# Starts a throwaway PostgreSQL (fsync and synchronous_commit on), ActionHook's release build with its
# worker, bench/bare/bare.c as the webhook receiver (a C libmicrohttpd server answering 202 without
# work) and nghttpd (nghttp2's C++ HTTP/2 server, over TLS with a certificate made here, advertising
# 1,000 streams as APNs does) as the APNs stand-in, answering 200 to pushes for the benchmark's
# device token. Measures, in this order, in this run:
#   sink        the webhook receiver's own ceiling: wrk POSTing to it at BENCH_CONNECTIONS connections
#   webhook     BENCH_DELIVERIES due webhook follow-ups written at once (one transaction), drained by the
#               worker to the receiver: deliveries per second from the write's commit to the last attempt's
#               end (both as the database recorded them),
#               and the CPU the service and PostgreSQL spent per delivery (from /proc, all processes)
#   stand-in    the APNs stand-in's own ceiling: h2load over ONE connection with as many streams as the
#               worker keeps in flight, sending the service's headers and payload
#   apns        the same drain as webhook, with APNs pushes over the service's HTTP/2 connections
#               (ACTIONHOOK_APNS_CONNECTIONS, by default one per core, at most four)
#   load        ingest at full speed (wrk, closed loop) for BENCH_LOAD_SECONDS with 1 reply in 4 making a
#               webhook follow-up (bench/setup-app.sh's rules, mode "mixed"): follow-ups created and
#               delivered per second, and the backlog (not yet delivered) when the load ends, against one
#               second of creation
#   send        BENCH_SENDS sends (POST /v1/apps/{app}/notifications) of 1,000 devices each, made by h2load at
#               4 connections: pushes per second from the first send's commit to the last push's end (the
#               database's clock), against
#               the apns drain of this run (the same pushes written straight into the outbox)
#   users       sends to 1,000 users of one registered device each against sends to the same 1,000 tokens (quality
#               P11): BENCH_SENDS sends of each by h2load at 4 connections, alternating, BENCH_RUNS times;
#               sends per second (the 202s), the users' median over the tokens' (goal at least 0.9)
#   largest     the largest send the limits allow (1,000 devices, 19 reminders each over 10 steps: 20,000 rows,
#               pushes near 4 KB), BENCH_RUNS times: the 202's time (median; goal within the 1 s database
#               deadline) and the service's peak resident memory over what it had before (goal at most 64 MiB)
#   latency     reply to webhook (quality P10): a probe (bench/probe.py) of BENCH_PROBE_RATE (200) replies a second
#               for BENCH_PROBE_SECONDS (10), each making a webhook to a receiver of its own, first on a quiet
#               service, then beside durable ingest at full speed (wrk, closed loop, replies without follow-ups,
#               another app): for each probe reply, the receiver's arrival of its webhook (bench/bare/bare.c
#               with BARE_ARRIVALS) minus the time the probe read its 202, on the machine's clock; p50, p99 and
#               max (goals: p99 at most 2 ms quiet, at most 10 ms beside the load), and beside them the same
#               from the reply's receipt to its first attempt's end as the database recorded them
#   steps       BENCH_STEP_SENDS sends of one device, each with 10 no-reply steps of one webhook (after
#               30, 35, ... 75 s): BENCH_STEP_SENDS × 10 pending steps fired from the database clock, firing
#               lateness p50/p99/max (the first attempt's start minus the due time it was claimed for, as
#               delivery_attempts.due_at records it: a retried row's due time moves on), none early, none missed
#   snooze      BENCH_SNOOZES snoozes answered at 100/s, each re-sent to the stand-in BENCH_SNOOZE_DELAY
#               seconds later: firing lateness (the attempt's start, stored to the millisecond, minus the due
#               time) p50/p99/max, and answered lateness (the stand-in's answer recorded) p99; a push that
#               started more than 1 ms (the rounding) before its due time counts as early
#   history     the webhook drain again with no history and then with BENCH_HISTORY_ROWS finished follow-ups of
#               another app (10 million): the worker claims from the queue alone, so the second is within 10 %
# BENCH_RUNS drains per channel (and sends); medians are reported. Exit status non-zero when a figure misses its goal
# (drains below BENCH_GOAL, backlog over one second of creation, firing lateness p99 over
# BENCH_LATENESS_GOAL_MS) unless BENCH_ALLOW_FAIL=1. The figures are printed last.
#
# Environment: BENCH_IDLE_SECONDS (15), BENCH_DELIVERIES (20000), BENCH_RUNS (3), BENCH_CONNECTIONS (64), BENCH_GOAL (10000),
# BENCH_LOAD_SECONDS (60), BENCH_SNOOZES (2000), BENCH_SNOOZE_DELAY (2), BENCH_LATENESS_GOAL_MS (50),
# BENCH_SENDS (20), BENCH_STEP_SENDS (10000), BENCH_HISTORY_ROWS (10000000),
# BENCH_WORKER_CONCURRENCY (256, the service's default), BENCH_PROBE_RATE (200), BENCH_PROBE_SECONDS (10),
# BENCH_PHASES ("idle webhook apns send users largest load latency steps snooze history"),
# BENCH_PG_PORT (55433), BENCH_BINARY (another actionhook binary, e.g. to compare builds), BENCH_SKIP_BUILD=1,
# BENCH_ALLOW_FAIL=1, BENCH_KEEP_WORK=1 (keep the logs).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

deliveries="${BENCH_DELIVERIES:-20000}"
runs="${BENCH_RUNS:-3}"
connections="${BENCH_CONNECTIONS:-64}"
goal="${BENCH_GOAL:-10000}"
load_seconds="${BENCH_LOAD_SECONDS:-60}"
snoozes="${BENCH_SNOOZES:-2000}"
snooze_delay="${BENCH_SNOOZE_DELAY:-2}"
lateness_goal_ms="${BENCH_LATENESS_GOAL_MS:-50}"
concurrency="${BENCH_WORKER_CONCURRENCY:-256}"
phases=" ${BENCH_PHASES:-idle webhook apns send users largest load latency steps snooze history} "
probe_rate="${BENCH_PROBE_RATE:-200}"
probe_seconds="${BENCH_PROBE_SECONDS:-10}"
sends="${BENCH_SENDS:-20}"
step_sends="${BENCH_STEP_SENDS:-10000}"
history_rows="${BENCH_HISTORY_ROWS:-10000000}"
idle_seconds="${BENCH_IDLE_SECONDS:-15}"
pg_port="${BENCH_PG_PORT:-55433}"
sink_port=18190
service_port=18191
standin_port=18192
arrivals_port=18193
admin_token="bench-delivery-admin-token-0123456789"
# Every push goes to this device token: the stand-in serves an empty file at its path, so it answers
# 200 without other work (real APNs answers 200 with an empty body too).
device_token="$(printf 'ab%.0s' {1..32})"

log() { echo "bench-delivery: $*" >&2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-delivery.XXXXXX")"
pg_dir="$work/pg"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    bash scripts/pg-local.sh destroy "$pg_dir" >/dev/null 2>&1 || true
    if [[ "${BENCH_KEEP_WORK:-0}" == 1 ]]; then log "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

bash scripts/install-deps.sh --with wrk bc gcc curl procps openssl nghttp2-server nghttp2-client python3 >/dev/null

if [[ -z "${BENCH_BINARY:-}" && "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    log "building the release binary"
    swift build -c release --product actionhook >"$work/build.log" 2>&1 || {
        cat "$work/build.log" >&2
        exit 1
    }
fi
binary="${BENCH_BINARY:-$(swift build -c release --show-bin-path)/actionhook}"
read -r -a mhd_flags <<<"$(pkg-config --cflags --libs libmicrohttpd)"
gcc -O2 -o "$work/bare" bench/bare/bare.c "${mhd_flags[@]}"

bash scripts/pg-local.sh start "$pg_dir" "$pg_port" max_connections=100 max_wal_size=8GB >"$work/pg.log" 2>&1 || {
    cat "$work/pg.log" >&2
    exit 1
}
database_url="$(bash scripts/pg-local.sh url "$pg_dir" "$pg_port")"
psql_() { psql "$database_url" -v ON_ERROR_STOP=1 -qtAX "$@"; }

# The APNs stand-in's TLS: a CA, a certificate for 127.0.0.1 signed by it, and the provider's .p8 key.
tls="$work/tls"
mkdir -p "$tls" "$work/docroot/3/device"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/ca.key" -out "$tls/ca.pem" \
    -days 2 -subj "/CN=ActionHook bench CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/server.key" \
    -out "$tls/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' \
    >"$tls/server.ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -out "$tls/server.pem" -days 2 -extfile "$tls/server.ext" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tls/authkey.p8" 2>/dev/null
: >"$work/docroot/3/device/$device_token"
# The devices of the send phase: 1,000 tokens, each a file the stand-in answers 200 for.
for n in $(seq 1000); do : >"$work/docroot/3/device/$(printf '%064x' "$n")"; done

"$work/bare" "$sink_port" 8 >/dev/null 2>&1 &
pids+=($!)
nghttpd --max-concurrent-streams=1000 --workers=1 --htdocs="$work/docroot" "$standin_port" \
    "$tls/server.key" "$tls/server.pem" >/dev/null 2>&1 &
standin_pid=$!
pids+=("$standin_pid")

# shellcheck source=bench/lib/cpu.sh
source bench/lib/cpu.sh
postmaster_pid="$(head -1 "$(psql_ -c "SHOW data_directory")/postmaster.pid")"
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

DATABASE_URL="$database_url" "$binary" migrate >/dev/null 2>&1
ACTIONHOOK_ADMIN_TOKEN="$admin_token" DATABASE_URL="$database_url" ACTIONHOOK_HOST=127.0.0.1 \
    ACTIONHOOK_PORT="$service_port" ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 ACTIONHOOK_WORKER_CONCURRENCY="$concurrency" \
    ACTIONHOOK_APNS_URL="https://127.0.0.1:$standin_port" ACTIONHOOK_APNS_CA_FILE="$tls/ca.pem" \
    ACTIONHOOK_RATE_LIMIT_PER_SECOND=10000000 ACTIONHOOK_DEVICE_RATE_LIMIT_PER_SECOND=10000000 \
    ACTIONHOOK_HTTP_MAX_CONNECTIONS_PER_IP=0 ACTIONHOOK_LOG_LEVEL=warning "$binary" serve >"$work/service.log" 2>&1 &
service_pid=$!
pids+=("$service_pid")
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$service_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
admin() {
    curl -fsS -X "$1" -H "Authorization: Bearer $admin_token" -H "Content-Type: application/json" \
        "http://127.0.0.1:$service_port$2" --data-binary "$3"
}
apns_settings="$(python3 -c 'import json, sys; print(json.dumps({"teamId": "TEAM123456", "keyId": "KEYID12345",
    "privateKey": open(sys.argv[1]).read(), "topic": "com.example.bench", "environment": "production"}))' "$tls/authkey.p8")"
admin POST /v1/apps "{\"id\":\"bench\",\"name\":\"bench\",\"webhook\":{\"url\":\"http://127.0.0.1:$sink_port/v1/responses\"},
    \"apns\":$apns_settings}" >/dev/null

# wait_drained [SECONDS]: returns once nothing is due or running (at most SECONDS, when given): two probes
# of the partial indexes the worker itself uses, every 50 ms (a count over the table would add its own
# PostgreSQL CPU to the figures).
wait_drained() {
    local deadline=$((SECONDS + ${1:-86400}))
    while [[ "$(psql_ -c "SET enable_seqscan = off" -c "SELECT EXISTS (SELECT 1 FROM followups WHERE status IN ('pending', 'retrying'))
                OR EXISTS (SELECT 1 FROM followups WHERE status = 'running')")" != f ]] && ((SECONDS < deadline)); do
        # Each look is a psql process: every 50 ms they took 12 % of this machine (perf) from the service
        # they measure. The rate comes from the times the database recorded, not from when a look saw it.
        sleep 0.25
    done
}

# One drain: $2 due follow-ups of channel $1 written at once; prints "rate service_us pg_us".
drain() {
    local channel="$1" count="$2" payload service_before pg_before elapsed
    if [[ "$channel" == apns ]]; then
        payload="jsonb_build_object('deviceToken', '$device_token', 'pushType', 'alert',
            'payload', jsonb_build_object('aps', jsonb_build_object('alert', 'Rooftop party at 8', 'n', n)))"
    else
        payload="jsonb_build_object('body', jsonb_build_object('type', 'bench', 'n', n))"
    fi
    # The history phase's finished follow-ups (app "history") stay.
    psql_ -c "TRUNCATE delivery_attempts, followups_queue, responses" -c "DELETE FROM followups_done WHERE app_id = 'bench'"
    service_before="$(process_cpu_seconds "$service_pid")"
    pg_before="$(postgres_cpu_seconds "$postmaster_pid")"
    psql_ <<SQL
BEGIN;
WITH response AS (
    INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer)
    VALUES ('bench', actionhook_uuid_v7(now()), 'bench-drain', '\x00'::bytea, 'bulk', 'recorded', '{}')
    RETURNING id
)
INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at)
SELECT 'bench', gen_random_uuid(), response.id, n, '$channel', $payload, now()
FROM response, generate_series(1, $count) AS n;
NOTIFY actionhook_followups;
COMMIT;
SQL
    wait_drained
    local service_after pg_after dead
    service_after="$(process_cpu_seconds "$service_pid")"
    pg_after="$(postgres_cpu_seconds "$postmaster_pid")"
    # From the write's commit (the follow-ups' created_at) to the last attempt's end, by the database's clock.
    elapsed="$(psql_ -c "SELECT extract(epoch FROM max(a.finished_at) - min(f.created_at))
        FROM followups f JOIN delivery_attempts a ON a.app_id = f.app_id AND a.followup_id = f.id
        WHERE f.app_id = 'bench'")"
    dead="$(psql_ -c "SELECT count(*) FROM followups WHERE app_id = 'bench' AND status <> 'delivered'")"
    if [[ "$dead" != 0 ]]; then
        log "$channel: $dead of $count follow-ups were not delivered"
        psql_ -c "SELECT error_class, http_status, count(*) FROM delivery_attempts GROUP BY 1, 2" >&2
        exit 1
    fi
    echo "$(echo "$count / $elapsed" | bc)" \
        "$(echo "scale=1; ($service_after - $service_before) * 1000000 / $count" | bc)" \
        "$(echo "scale=1; ($pg_after - $pg_before) * 1000000 / $count" | bc)"
}

# Drains of channel $1, BENCH_RUNS times; sets drain_median and drain_cpu (the median run's CPU).
drains() {
    local channel="$1" run rate service_us pg_us
    local -a rates=() lines=()
    for run in $(seq "$runs"); do
        read -r rate service_us pg_us < <(drain "$channel" "$deliveries")
        log "$channel run $run: $rate deliveries/s; CPU per delivery: service $service_us µs, PostgreSQL $pg_us µs"
        rates+=("$rate")
        lines+=("$rate $service_us $pg_us")
    done
    drain_median="$(median "${rates[@]}")"
    drain_cpu="$(printf '%s\n' "${lines[@]}" | awk -v m="$drain_median" '$1 == m { printf "service %s µs, PostgreSQL %s µs", $2, $3; exit }')"
}

failures=()
summary=()

if [[ "$phases" == *" idle "* ]]; then
    log "idle for ${idle_seconds}s: nothing to deliver"
    psql_ -c "TRUNCATE delivery_attempts, followups, responses"
    sleep 2
    claims() {
        curl -fsS "http://127.0.0.1:$service_port/metrics" |
            awk '/^actionhook_outbox_claims_total/ { sum += $NF } END { printf "%d\n", sum }'
    }
    commits() { psql_ -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
    claims_before="$(claims)"
    commits_before="$(commits)"
    service_before="$(process_cpu_seconds "$service_pid")"
    pg_before="$(postgres_cpu_seconds "$postmaster_pid")"
    started="$(date +%s.%N)"
    sleep "$idle_seconds"
    service_after="$(process_cpu_seconds "$service_pid")"
    pg_after="$(postgres_cpu_seconds "$postmaster_pid")"
    elapsed="$(echo "$(date +%s.%N) - $started" | bc)"
    # Statistics reach pg_stat_database when a backend reports them (within a second or so).
    sleep 1.5
    commits_after="$(commits)"
    claims_after="$(claims)"
    poll_seconds="$(echo "scale=3; ${ACTIONHOOK_WORKER_POLL_MS:-1000} / 1000" | bc)"
    idle_claims=$((claims_after - claims_before))
    claims_allowed="$(echo "$elapsed / $poll_seconds + 3" | bc)"
    # The two reads of xact_commit are commits of their own; they are not the service's.
    commits_per_second="$(echo "scale=1; ($commits_after - $commits_before - 1) / ($elapsed + 1.5)" | bc)"
    service_share="$(echo "scale=2; 100 * ($service_after - $service_before) / $elapsed" | bc)"
    pg_share="$(echo "scale=2; 100 * ($pg_after - $pg_before) / $elapsed" | bc)"
    log "idle: $idle_claims claims in ${elapsed}s (at most $claims_allowed), $commits_per_second commits/s, CPU: service $service_share %, PostgreSQL $pg_share %"
    summary+=("$(printf '%-34s %12s   (at most %s: one per %ss poll interval)' "idle: worker claims in ${idle_seconds}s" "$idle_claims" "$claims_allowed" "$poll_seconds")")
    summary+=("$(printf '%-34s %12s' "idle: database commits (/s)" "$commits_per_second")")
    summary+=("$(printf '%-34s %12s   (PostgreSQL %s %%; goal: service at most 1 %%)' "idle: service CPU (% of a core)" "$service_share" "$pg_share")")
    [[ "$idle_claims" -le "$claims_allowed" ]] || failures+=("idle: $idle_claims claims > $claims_allowed")
    [[ "$(echo "$service_share <= 1" | bc)" == 1 ]] || failures+=("idle: service used $service_share % of a core > 1 %")
fi

if [[ "$phases" == *" webhook "* ]]; then
    log "webhook receiver ceiling (wrk, $connections connections, 5 s)"
    cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"type":"response.accepted","data":{"n":1}}'
wrk.headers["Content-Type"] = "application/json"
wrk.path = "/v1/responses"
LUA
    sink_rate="$(wrk -t2 -c"$connections" -d5s -s "$work/post.lua" "http://127.0.0.1:$sink_port" | awk '/Requests\/sec/ { print int($2) }')"
    drains webhook
    summary+=("$(printf '%-34s %12s' "webhook receiver ceiling (req/s)" "$sink_rate")")
    summary+=("$(printf '%-34s %12s   (%s per delivery)' "webhook drain (median/s)" "$drain_median" "$drain_cpu")")
    [[ "$drain_median" -ge "$goal" ]] || failures+=("webhook drain $drain_median/s < $goal/s")
fi

if [[ "$phases" == *" apns "* ]]; then
    log "APNs stand-in ceiling (h2load, one connection, $concurrency streams, 100,000 pushes)"
    printf '%s' '{"aps":{"alert":"Rooftop party at 8","n":1}}' >"$work/push.json"
    # A provider token's size: ES256 JWTs are about 190 characters.
    jwt="eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWUlEMTIzNDUifQ.eyJpc3MiOiJURUFNMTIzNDU2IiwiaWF0IjoxNzY0MDAwMDAwfQ.$(printf 'x%.0s' {1..86})"
    standin_rate="$(h2load -n 100000 -c 1 -m "$concurrency" -d "$work/push.json" \
        -H "authorization: bearer $jwt" -H "apns-topic: com.example.bench" -H "apns-push-type: alert" \
        -H "apns-priority: 10" -H "apns-id: 8f1c3f2e-6a44-4c4e-9d0a-3b1f5e2d7c11" \
        "https://127.0.0.1:$standin_port/3/device/$device_token" | awk '/^finished in/ { print int($4) }')"
    drains apns
    apns_drain_median="$drain_median"
    summary+=("$(printf '%-34s %12s' "APNs stand-in ceiling (req/s)" "$standin_rate")")
    summary+=("$(printf '%-34s %12s   (%s per delivery)' "APNs drain, ${ACTIONHOOK_APNS_CONNECTIONS:-default} conns (med/s)" "$drain_median" "$drain_cpu")")
    [[ "$drain_median" -ge "$goal" ]] || failures+=("APNs drain $drain_median/s < $goal/s")
fi

if [[ "$phases" == *" send "* ]]; then
    log "$sends sends of 1,000 devices each (h2load, 4 connections), BENCH_RUNS times"
    server_key="$(admin POST /v1/apps/bench/keys '{"scope": "send"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')"
    python3 -c 'import json
print(json.dumps({"to": [{"deviceToken": "%064x" % n, "recipient": "user-%d" % (n % 300)} for n in range(1, 1001)],
                  "aps": {"alert": {"title": "Rooftop party", "body": "Friday at 8"}, "sound": "default"},
                  "userInfo": {"eventId": 42}, "ttlSeconds": 3600}))' >"$work/send.json"
    send_rates=()
    send_lines=()
    for run in $(seq "$runs"); do
        psql_ -c "TRUNCATE delivery_attempts, followups, responses, notifications"
        service_before="$(process_cpu_seconds "$service_pid")"
        pg_before="$(postgres_cpu_seconds "$postmaster_pid")"
        # h2load wants at least as many requests as connections.
        h2load --h1 -n "$sends" -c "$((sends < 4 ? sends : 4))" -d "$work/send.json" \
            -H "authorization: Bearer $server_key" -H "content-type: application/json" \
            "http://127.0.0.1:$service_port/v1/apps/bench/notifications" >"$work/send-$run.out" 2>&1 || true
        accepted="$(awk '/status codes:/ { print $3 }' "$work/send-$run.out")"
        [[ "$accepted" == "$sends" ]] || {
            log "send: $accepted of $sends sends answered 2xx"
            cat "$work/send-$run.out" >&2
            exit 1
        }
        wait_drained
        service_after="$(process_cpu_seconds "$service_pid")"
        pg_after="$(postgres_cpu_seconds "$postmaster_pid")"
        # From the first send's commit to the last push's end, by the database's clock.
        elapsed="$(psql_ -c "SELECT extract(epoch FROM (SELECT max(finished_at) FROM delivery_attempts)
            - (SELECT min(created_at) FROM notifications))")"
        pushes="$(psql_ -c "SELECT count(*) FROM followups WHERE kind = 'push' AND status = 'delivered'")"
        [[ "$pushes" == $((sends * 1000)) ]] || {
            log "send: $pushes of $((sends * 1000)) pushes delivered"
            psql_ -c "SELECT status, last_error, count(*) FROM followups GROUP BY 1, 2" >&2
            exit 1
        }
        rate="$(echo "$pushes / $elapsed" | bc)"
        service_us="$(echo "scale=1; ($service_after - $service_before) * 1000000 / $pushes" | bc)"
        pg_us="$(echo "scale=1; ($pg_after - $pg_before) * 1000000 / $pushes" | bc)"
        log "send run $run: $rate pushes/s; CPU per push: service $service_us µs, PostgreSQL $pg_us µs"
        send_rates+=("$rate")
        send_lines+=("$rate $service_us $pg_us")
    done
    send_median="$(median "${send_rates[@]}")"
    send_cpu="$(printf '%s\n' "${send_lines[@]}" | awk -v m="$send_median" '$1 == m { printf "service %s µs, PostgreSQL %s µs", $2, $3; exit }')"
    summary+=("$(printf '%-34s %12s   (%s per push)' "sends of 1,000 devices (pushes/s)" "$send_median" "$send_cpu")")
    if [[ -n "${apns_drain_median:-}" ]]; then
        summary+=("$(printf '%-34s %12s   (the send path against the same pushes written straight to the outbox)' "sends / apns drain (ratio)" "$(echo "scale=2; $send_median / $apns_drain_median" | bc)")")
    fi
    [[ "$send_median" -ge "$goal" ]] || failures+=("sends: $send_median pushes/s < $goal/s")
fi

if [[ "$phases" == *" users "* ]]; then
    # Quality P11: a send names 1,000 users, each resolved in the send's transaction to its one registered
    # device, against a send naming the same 1,000 tokens. Only the send is timed (the same pushes follow).
    log "sends to 1,000 users against the same 1,000 tokens (h2load, 4 connections), BENCH_RUNS times"
    users_key="$(admin POST /v1/apps/bench/keys '{"scope": "send"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')"
    # The backend registers each user's device (8 at a time).
    # shellcheck disable=SC2016 # $1..$3 are the inner shell's own arguments
    seq 1 1000 | xargs -P 8 -I {} sh -c 'curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $1" \
        -H "Content-Type: application/json" -d "{\"user\": \"user-$2\", \"environment\": \"production\"}" \
        "http://127.0.0.1:$3/v1/apps/bench/devices/$(printf %064x "$2")"' _ "$users_key" {} "$service_port"
    registered="$(psql_ -c "SELECT count(*) FROM devices WHERE app_id = 'bench' AND user_id LIKE 'user-%' AND status = 'active'")"
    [[ "$registered" == 1000 ]] || {
        log "users: $registered of 1,000 devices registered"
        exit 1
    }
    python3 - "$work" <<'PY'
import json, sys
aps = {"alert": {"title": "Rooftop party", "body": "Friday at 8"}, "sound": "default"}
for name, to in (("tokens", [{"deviceToken": "%064x" % n, "recipient": "user-%d" % n} for n in range(1, 1001)]),
                 ("users", [{"user": "user-%d" % n} for n in range(1, 1001)])):
    with open(f"{sys.argv[1]}/send-{name}.json", "w") as out:
        json.dump({"to": to, "aps": aps, "userInfo": {"eventId": 42}, "ttlSeconds": 3600}, out)
PY
    token_rates=()
    user_rates=()
    for run in $(seq "$runs"); do
        for kind in tokens users; do
            psql_ -c "TRUNCATE delivery_attempts, followups, responses, notifications"
            h2load --h1 -n "$sends" -c "$((sends < 4 ? sends : 4))" -d "$work/send-$kind.json" \
                -H "authorization: Bearer $users_key" -H "content-type: application/json" \
                "http://127.0.0.1:$service_port/v1/apps/bench/notifications" >"$work/users-$kind-$run.out" 2>&1 || true
            accepted="$(awk '/status codes:/ { print $3 }' "$work/users-$kind-$run.out")"
            [[ "$accepted" == "$sends" ]] || {
                log "users: $accepted of $sends sends to $kind answered 2xx"
                cat "$work/users-$kind-$run.out" >&2
                exit 1
            }
            rate="$(awk '/^finished in/ { print $4 }' "$work/users-$kind-$run.out")"
            log "users run $run: sends to 1,000 $kind: $rate sends/s"
            if [[ "$kind" == tokens ]]; then token_rates+=("$rate"); else user_rates+=("$rate"); fi
            wait_drained
        done
    done
    tokens_median="$(median "${token_rates[@]}")"
    users_median="$(median "${user_rates[@]}")"
    users_ratio="$(echo "scale=2; $users_median / $tokens_median" | bc)"
    summary+=("$(printf '%-34s %12s   (users %s sends/s, tokens %s sends/s; goal >= 0.9)' "sends to 1,000 users / tokens" "$users_ratio" "$users_median" "$tokens_median")")
    [[ "$(echo "$users_ratio >= 0.9" | bc)" == 1 ]] || failures+=("sends to users at $users_ratio of sends to tokens < 0.9")
fi

if [[ "$phases" == *" largest "* ]]; then
    # Quality P12: the largest send the limits allow, 1,000 devices and 19 reminders each over 10 no-reply
    # steps (20,000 outbox rows), with a push near APNs's 4,096 bytes: answered within the database deadline
    # (ACTIONHOOK_DB_DEADLINE_MS, 1 s by default) with at most 64 MiB more than the service's resident memory
    # before it (its peak, VmHWM, reset just before the send). The worker delivers them afterwards.
    log "the largest send: 1,000 devices x 10 steps (20,000 outbox rows), BENCH_RUNS times"
    largest_key="$(admin POST /v1/apps/bench/keys '{"scope": "send"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')"
    python3 -c 'import json
steps = [{"afterSeconds": 3600 * (n + 1), "followUps": [{"type": "remind"}] * (1 if n == 9 else 2)} for n in range(10)]
print(json.dumps({"to": [{"deviceToken": "%064x" % n, "recipient": "user-%d" % n} for n in range(1, 1001)],
                  "aps": {"alert": {"title": "Rooftop party", "body": "Friday at 8. " * 230}, "sound": "default"},
                  "ttlSeconds": 3 * 86400, "onNoReply": steps}))' >"$work/largest.json"
    largest_times=()
    largest_rss=()
    for run in $(seq "$runs"); do
        psql_ -c "TRUNCATE delivery_attempts, followups, responses, notifications"
        rss_before="$(awk '/^VmRSS:/ { print $2 }' "/proc/$service_pid/status")"
        echo 5 >"/proc/$service_pid/clear_refs"
        answer="$(curl -sS -o "$work/largest-answer.json" -w '%{http_code} %{time_total}' -X POST \
            -H "Authorization: Bearer $largest_key" -H "Content-Type: application/json" \
            -H "Idempotency-Key: largest-$run-$(date +%s%N)" --data-binary @"$work/largest.json" \
            "http://127.0.0.1:$service_port/v1/apps/bench/notifications")"
        peak="$(awk '/^VmHWM:/ { print $2 }' "/proc/$service_pid/status")"
        rows="$(psql_ -c "SELECT count(*) FROM followups")"
        [[ "${answer%% *}" == 202 && "$rows" == 20000 ]] || {
            log "largest send run $run: answered ${answer%% *} with $rows rows: $(head -c 300 "$work/largest-answer.json")"
            exit 1
        }
        seconds="${answer#* }"
        extra_mib="$(echo "scale=1; ($peak - $rss_before) / 1024" | bc)"
        log "largest send run $run: 202 after ${seconds}s, peak RSS +${extra_mib} MiB (from $((rss_before / 1024)) MiB)"
        largest_times+=("$(echo "$seconds * 1000 / 1" | bc)")
        largest_rss+=("$extra_mib")
    done
    largest_ms="$(median "${largest_times[@]}")"
    largest_mib="$(printf '%s\n' "${largest_rss[@]}" | sort -n | tail -n 1)"
    summary+=("$(printf '%-34s %12s   (the 202; peak RSS +%s MiB at most, of %s runs)' "largest send (ms)" "$largest_ms" "$largest_mib" "$runs")")
    [[ "$largest_ms" -le 1000 ]] || failures+=("largest send answered after $largest_ms ms > 1000 ms")
    [[ "$(echo "$largest_mib <= 64" | bc)" == 1 ]] || failures+=("largest send: peak RSS +$largest_mib MiB > 64 MiB")
    psql_ -c "TRUNCATE delivery_attempts, followups, responses, notifications"
fi

if [[ "$phases" == *" load "* ]]; then
    log "full ingest load for ${load_seconds}s, 1 reply in 4 making a webhook follow-up"
    ingest_key="$(bash bench/setup-app.sh "http://127.0.0.1:$service_port" "$admin_token" load)"
    admin PATCH /v1/apps/load "{\"webhook\":{\"url\":\"http://127.0.0.1:$sink_port/v1/responses\"}}" >/dev/null
    psql_ -c "TRUNCATE delivery_attempts, followups, responses"
    BENCH_MODE=mixed BENCH_KEY="$ingest_key" BENCH_EXPECT=202 BENCH_OUT="$work/load.json" \
        wrk -t2 -c"$connections" -d"${load_seconds}s" --timeout 10s -s bench/lua/ingest.lua \
        "http://127.0.0.1:$service_port/v1/responses" >"$work/load.out" 2>&1
    read -r replies created delivered backlog < <(psql_ -F ' ' -c "
        SELECT (SELECT count(*) FROM responses), count(*), count(*) FILTER (WHERE status = 'delivered'),
            count(*) FILTER (WHERE status <> 'delivered') FROM followups")
    load_rps="$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["good_rps"]))' "$work/load.json")"
    creation_rate=$((created / load_seconds))
    delivery_rate=$((delivered / load_seconds))
    log "load: $replies replies ($load_rps/s), $created follow-ups created ($creation_rate/s), $delivered delivered, backlog $backlog at the end"
    summary+=("$(printf '%-34s %12s' "ingest under load (replies/s)" "$load_rps")")
    summary+=("$(printf '%-34s %12s' "follow-ups created (/s)" "$creation_rate")")
    summary+=("$(printf '%-34s %12s' "follow-ups delivered (/s)" "$delivery_rate")")
    summary+=("$(printf '%-34s %12s   (goal: at most %s, one second of creation)' "backlog after ${load_seconds}s" "$backlog" "$creation_rate")")
    [[ "$backlog" -le "$creation_rate" ]] || failures+=("backlog $backlog > one second of creation ($creation_rate)")
fi

if [[ "$phases" == *" latency "* ]]; then
    log "reply to webhook (P10): $probe_rate replies/s for ${probe_seconds}s, quiet, then beside durable ingest at full speed"
    probe_key="$(bash bench/setup-app.sh "http://127.0.0.1:$service_port" "$admin_token" probe)"
    admin PATCH /v1/apps/probe "{\"webhook\":{\"url\":\"http://127.0.0.1:$arrivals_port/v1/responses\"}}" >/dev/null
    beside_key="$(bash bench/setup-app.sh "http://127.0.0.1:$service_port" "$admin_token" beside)"
    psql_ -c "CREATE TABLE IF NOT EXISTS bench_answered (key text, micros bigint)" \
        -c "CREATE TABLE IF NOT EXISTS bench_arrived (id text, micros bigint)"
    # probe NAME: the paced probe (bench/probe.py: every reply an "accept" with one webhook, the time of each
    # 202 noted), its webhooks going to a receiver of their own that notes when each arrived
    # (bench/bare/bare.c with BARE_ARRIVALS); waits until they are delivered and loads both sides.
    probe() {
        BARE_ARRIVALS="$work/arrived-$1.tsv" "$work/bare" "$arrivals_port" 2 >/dev/null 2>&1 &
        local receiver=$!
        pids+=("$receiver")
        sleep 0.3
        python3 bench/probe.py "http://127.0.0.1:$service_port/v1/responses" \
            "$probe_key" "$probe_rate" "$probe_seconds" "$work/answered-$1.tsv"
        wait_drained 60
        kill -TERM "$receiver"
        wait "$receiver" || true
        psql_ -c "TRUNCATE bench_answered, bench_arrived" \
            -c "\\copy bench_answered FROM '$work/answered-$1.tsv'" -c "\\copy bench_arrived FROM '$work/arrived-$1.tsv'"
    }
    # Prints "p50 p99 max count" (ms) over the probe's replies whose webhook arrived: from the 202 (read by
    # the probe) to the receiver's arrival, on the machine's clock (P10's figure), and "p50 p99" of the part
    # until the worker started the send (the NOTIFY, the claim and its commit; the rest is the send); then
    # "p50 p99 max count" from the reply's receipt to its first attempt's end (start plus duration in whole
    # milliseconds), as the database recorded them, which holds the durable commit too.
    probe_latency() {
        psql_ -F ' ' -c "
            SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2), round(max(ms)::numeric, 2), count(*),
                round(percentile_cont(0.5) WITHIN GROUP (ORDER BY start_ms)::numeric, 2),
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY start_ms)::numeric, 2)
            FROM (SELECT (a.micros - p.micros) / 1000.0 AS ms,
                    (extract(epoch FROM d.started_at) * 1000000 - p.micros) / 1000.0 AS start_ms
                FROM bench_answered p
                JOIN responses r ON r.app_id = 'probe' AND r.idempotency_key = p.key
                JOIN followups f ON f.app_id = r.app_id AND f.response_id = r.id
                JOIN (SELECT id, min(micros) AS micros FROM bench_arrived GROUP BY id) a ON a.id = f.id::text
                LEFT JOIN delivery_attempts d ON d.app_id = f.app_id AND d.followup_id = f.id AND d.attempt = 1) AS l" \
            -c "
            SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2), round(max(ms)::numeric, 2), count(*)
            FROM (SELECT extract(epoch FROM a.started_at - r.received_at) * 1000 + a.duration_ms AS ms
                FROM responses r
                JOIN followups f ON f.app_id = r.app_id AND f.response_id = r.id
                JOIN delivery_attempts a ON a.app_id = f.app_id AND a.followup_id = f.id AND a.attempt = 1
                WHERE r.app_id = 'probe') AS l" | tr '\n' ' '
        echo
    }
    psql_ -c "TRUNCATE delivery_attempts, followups, responses"
    probe quiet
    read -r quiet_p50 quiet_p99 quiet_max quiet_count quiet_claim_p50 quiet_claim_p99 quiet_receipt_p50 \
        quiet_receipt_p99 _ _ < <(probe_latency)
    psql_ -c "TRUNCATE delivery_attempts, followups, responses"
    BENCH_MODE=maybe BENCH_KEY="$beside_key" BENCH_EXPECT=202 BENCH_OUT="$work/beside.json" \
        wrk -t2 -c"$connections" -d"$((probe_seconds + 4))s" --timeout 10s -s bench/lua/ingest.lua \
        "http://127.0.0.1:$service_port/v1/responses" >"$work/beside.out" 2>&1 &
    beside_pid=$!
    sleep 2
    probe loaded
    wait "$beside_pid"
    read -r loaded_p50 loaded_p99 loaded_max loaded_count loaded_claim_p50 loaded_claim_p99 loaded_receipt_p50 \
        loaded_receipt_p99 _ _ < <(probe_latency)
    beside_rps="$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["good_rps"]))' "$work/beside.json")"
    log "latency from the 202 to arrival: quiet p50 $quiet_p50 p99 $quiet_p99 max $quiet_max ms ($quiet_count); beside $beside_rps replies/s: p50 $loaded_p50 p99 $loaded_p99 max $loaded_max ms ($loaded_count)"
    log "latency from receipt to the attempt's end: quiet p50 $quiet_receipt_p50 p99 $quiet_receipt_p99 ms; beside: p50 $loaded_receipt_p50 p99 $loaded_receipt_p99 ms"
    log "latency from the 202 to the send's start: quiet p50 $quiet_claim_p50 p99 $quiet_claim_p99 ms; beside: p50 $loaded_claim_p50 p99 $loaded_claim_p99 ms"
    expected=$((probe_rate * probe_seconds))
    [[ "$quiet_count" == "$expected" && "$loaded_count" == "$expected" ]] ||
        failures+=("reply to webhook: $quiet_count and $loaded_count of $expected probe replies matched to an arrival")
    summary+=("$(printf '%-34s %12s   (p50 %s ms, max %s ms, %s replies; from receipt p99 %s ms; goal: at most 2 ms)' "reply to webhook, quiet p99 (ms)" "$quiet_p99" "$quiet_p50" "$quiet_max" "$quiet_count" "$quiet_receipt_p99")")
    summary+=("$(printf '%-34s %12s   (p50 %s ms, max %s ms, %s replies, beside %s/s; from receipt p99 %s ms; goal: at most 10 ms)' "reply to webhook, loaded p99 (ms)" "$loaded_p99" "$loaded_p50" "$loaded_max" "$loaded_count" "$beside_rps" "$loaded_receipt_p99")")
    [[ "$(echo "$quiet_p99 <= 2" | bc)" == 1 ]] || failures+=("reply to webhook quiet p99 $quiet_p99 ms > 2 ms")
    [[ "$(echo "$loaded_p99 <= 10" | bc)" == 1 ]] || failures+=("reply to webhook beside the load p99 $loaded_p99 ms > 10 ms")
    psql_ -c "TRUNCATE delivery_attempts, followups, responses" -c "DROP TABLE bench_answered, bench_arrived"
fi

if [[ "$phases" == *" steps "* ]]; then
    log "$step_sends sends with 10 no-reply steps each (after 30, 35, ... 75 s): $((step_sends * 10)) steps"
    server_key="$(admin POST /v1/apps/bench/keys '{"scope": "send"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')"
    admin PATCH /v1/apps/bench "{\"webhook\":{\"url\":\"http://127.0.0.1:$sink_port/v1/responses\"}}" >/dev/null
    python3 -c 'import json, sys
print(json.dumps({"to": [sys.argv[1]], "aps": {"alert": "Still there?"}, "ttlSeconds": 3600,
                  "onNoReply": [{"afterSeconds": 30 + 5 * k, "followUps": [{"type": "webhook"}]} for k in range(10)]}))' \
        "$device_token" >"$work/steps.json"
    psql_ -c "TRUNCATE delivery_attempts, followups, responses, notifications"
    h2load --h1 -n "$step_sends" -c "$((step_sends < 8 ? step_sends : 8))" -d "$work/steps.json" \
        -H "authorization: Bearer $server_key" -H "content-type: application/json" \
        "http://127.0.0.1:$service_port/v1/apps/bench/notifications" >"$work/steps.out" 2>&1 || true
    [[ "$(awk '/status codes:/ { print $3 }' "$work/steps.out")" == "$step_sends" ]] || {
        log "steps: not every send answered 2xx"
        cat "$work/steps.out" >&2
        exit 1
    }
    pending="$(psql_ -c "SELECT count(*) FROM followups WHERE kind = 'step' AND status = 'pending'")"
    log "steps: $pending pending after the sends; waiting for them to fire"
    wait_drained 180
    read -r steps_count not_delivered early p50 p99 max < <(psql_ -F ' ' -c "
        SELECT count(*), count(*) FILTER (WHERE f.status <> 'delivered'),
            count(*) FILTER (WHERE a.started_at < a.due_at - interval '1 millisecond'),
            round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.started_at - a.due_at))),
            round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM a.started_at - a.due_at))),
            round(1000 * max(extract(epoch FROM a.started_at - a.due_at)))
        FROM followups f LEFT JOIN delivery_attempts a ON a.app_id = f.app_id AND a.followup_id = f.id AND a.attempt = 1
        WHERE f.kind = 'step'")
    log "steps: $steps_count fired ($not_delivered not delivered, $early early); lateness p50 ${p50} ms, p99 ${p99} ms, max ${max} ms"
    summary+=("$(printf '%-34s %12s   (p50 %s ms, max %s ms; %s steps, %s not delivered, %s early)' "no-reply step lateness p99 (ms)" "$p99" "$p50" "$max" "$steps_count" "$not_delivered" "$early")")
    [[ "$steps_count" == $((step_sends * 10)) && "$not_delivered" == 0 && "$early" == 0 ]] ||
        failures+=("steps: $steps_count of $((step_sends * 10)), $not_delivered not delivered, $early early")
    [[ "${p99:-999999}" -le "$lateness_goal_ms" ]] || failures+=("step firing lateness p99 $p99 ms > $lateness_goal_ms ms")
fi

if [[ "$phases" == *" snooze "* ]]; then
    log "$snoozes snoozes at 100/s, each due ${snooze_delay}s later"
    snooze_key="$(admin POST /v1/apps "{\"id\":\"snooze\",\"name\":\"snooze\",\"apns\":$apns_settings}" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["ingestKey"]["secret"])')"
    admin PUT /v1/apps/snooze/categories/TIMER_EXPIRED '{"actions": [{"identifier": "snooze", "title": "Snooze"}]}' >/dev/null
    admin POST /v1/apps/snooze/rules "{\"id\": \"timer-snooze\", \"match\": {\"category\": \"TIMER_EXPIRED\", \"action\": \"snooze\"},
        \"handler\": {\"type\": \"snooze\", \"delaySeconds\": $snooze_delay, \"maxSnoozes\": 10}}" >/dev/null
    psql_ -c "TRUNCATE delivery_attempts, followups, responses"
    # A snooze re-sends only a push ActionHook sent the device: one notification sent to it first, which
    # every snooze answers (each under its own notificationIdentifier, so none reaches maxSnoozes).
    snooze_server_key="$(admin POST /v1/apps/snooze/keys '{"scope": "send"}' |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')"
    snooze_notification="$(curl -sS -X POST -H "Authorization: Bearer $snooze_server_key" \
        -H "Content-Type: application/json" --data-binary \
        "{\"to\": [\"$device_token\"], \"category\": \"TIMER_EXPIRED\", \"aps\": {\"alert\": \"Tea\"}, \"ttlSeconds\": 3600}" \
        "http://127.0.0.1:$service_port/v1/apps/snooze/notifications" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
    seconds=$(((snoozes + 99) / 100))
    BENCH_MODE=snooze BENCH_TOKEN="$device_token" BENCH_KEY="$snooze_key" BENCH_EXPECT=202 BENCH_RATE=100 \
        BENCH_NOTIFICATION="$snooze_notification" \
        BENCH_THREADS=1 BENCH_OUT="$work/snooze.json" wrk -t1 -c4 -d"${seconds}s" --timeout 10s \
        -s bench/lua/ingest.lua "http://127.0.0.1:$service_port/v1/responses" >"$work/snooze.out" 2>&1
    for _ in $(seq 600); do
        [[ "$(psql_ -c "SELECT count(*) FROM followups WHERE status NOT IN ('delivered', 'dead')")" == 0 ]] && break
        sleep 0.1
    done
    read -r fired_count not_delivered early p50 p99 max answered_p99 < <(psql_ -F ' ' -c "
        SELECT count(*), count(*) FILTER (WHERE f.status <> 'delivered'),
            count(*) FILTER (WHERE a.started_at < a.due_at - interval '1 millisecond'),
            round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.started_at - a.due_at))),
            round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM a.started_at - a.due_at))),
            round(1000 * max(extract(epoch FROM a.started_at - a.due_at))),
            round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM a.finished_at - a.due_at)))
        FROM followups f JOIN delivery_attempts a ON a.app_id = f.app_id AND a.followup_id = f.id AND a.attempt = 1
        WHERE f.app_id = 'snooze' AND f.is_snooze")
    answered="$(psql_ -c "SELECT count(*) FROM responses WHERE app_id = 'snooze' AND outcome = 'snoozed'")"
    log "snooze: $answered snoozed, $fired_count fired ($not_delivered not delivered, $early early); lateness p50 ${p50} ms, p99 ${p99} ms, max ${max} ms; answered p99 ${answered_p99} ms"
    summary+=("$(printf '%-34s %12s   (p50 %s ms, max %s ms; %s of %s fired, %s early)' "snooze firing lateness p99 (ms)" "$p99" "$p50" "$max" "$fired_count" "$answered" "$early")")
    summary+=("$(printf '%-34s %12s' "snooze answered lateness p99 (ms)" "$answered_p99")")
    [[ "$answered" -gt 0 && "$fired_count" == "$answered" && "$not_delivered" == 0 && "$early" == 0 ]] ||
        failures+=("snoozes: $fired_count of $answered fired, $not_delivered not delivered, $early early")
    [[ "$p99" -le "$lateness_goal_ms" ]] || failures+=("snooze firing lateness p99 $p99 ms > $lateness_goal_ms ms")
fi

if [[ "$phases" == *" history "* ]]; then
    # The worker claims from the queue alone (followups_queue): finished follow-ups are moved out of it as
    # they finish, so its cost does not grow with history. The same webhook drain, with none and then with
    # BENCH_HISTORY_ROWS finished follow-ups of another app spread over the last five days.
    psql_ -c "TRUNCATE delivery_attempts, followups, responses"
    drains webhook
    history_none="$drain_median"
    history_none_cpu="$drain_cpu"
    log "writing $history_rows finished follow-ups (history)"
    history_started=$SECONDS
    psql_ -c "SELECT actionhook_create_partitions(now() - interval '6 days', now(), interval '1 day')" >/dev/null
    psql_ <<SQL
INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, attempt, created_at,
    updated_at, finished_at)
SELECT 'history', gen_random_uuid(), gen_random_uuid(), 0, 'webhook', '{"body": {"type": "bench"}}',
    t, CASE WHEN n % 50 = 0 THEN 'dead' ELSE 'delivered' END, 1, t, t, t
FROM generate_series(1, $history_rows) AS n,
    LATERAL (SELECT now() - interval '5 days' + (n::float8 / $history_rows) * interval '5 days' AS t) AS x;
ANALYZE followups;
SQL
    log "history written in $((SECONDS - history_started)) s"
    drains webhook
    history_ratio="$(echo "scale=2; $drain_median / $history_none" | bc)"
    summary+=("$(printf '%-34s %12s   (%s per delivery)' "webhook drain, no history (med/s)" "$history_none" "$history_none_cpu")")
    summary+=("$(printf '%-34s %12s   (%s per delivery)' "webhook drain, $history_rows finished (med/s)" "$drain_median" "$drain_cpu")")
    summary+=("$(printf '%-34s %12s   (goal: at least 0.90)' "drain with history / without (ratio)" "$history_ratio")")
    [[ "$(echo "$history_ratio >= 0.90" | bc)" == 1 ]] || failures+=("drain with history at $history_ratio of the drain without")
fi

printf '%s\n' "${summary[@]}"
if ((${#failures[@]} > 0)); then
    printf 'P6/P7: FAIL: %s\n' "${failures[@]}"
    [[ "${BENCH_ALLOW_FAIL:-0}" == 1 ]] || exit 1
else
    echo "P6/P7: every goal met (drains and sends >= $goal/s, backlog <= one second of creation, snooze and step lateness p99 <= $lateness_goal_ms ms)"
fi
