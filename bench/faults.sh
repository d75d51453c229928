#!/usr/bin/env bash
# The reliability faults of quality.md (R1-R4, R6, R9, R10) and the slow-client attack (F3), at full size,
# against the real binary, in one invocation: `make faults`.
#
# Starts a throwaway PostgreSQL (scripts/pg-local.sh, fsync on; one database per scenario), the actionhook
# binary (release build unless told otherwise) and local receivers on 127.0.0.1, then runs each scenario,
# prints its figures with PASS/FAIL, and a summary table last. Exit status non-zero when a figure falls short
# or a scenario could not run. The clients and webhook receivers are bench/faults/driver.py (standard
# library only); the APNs stand-in is Tests/Fixtures/apns_standin.py (h2, from .build-tools/venv).
#
#   R1+R2  replies ingested while PostgreSQL is restarted with `pg_ctl restart -m immediate`; clients retry
#          with the same Idempotency-Key until acknowledged: 0 acknowledged lost, 0 stored twice, and every
#          response has exactly the follow-ups its rule asked for (0 missing, 0 orphan, 0 extra)
#   R3     webhook deliveries while the service is `kill -9`ed 3 times (on a request's arrival, right after
#          the receiver's 2xx, and in flight) and restarted: all delivered, every webhook-id arrived (the
#          receiver logged every arrival it counted; an id that never arrived is listed with the attempts the
#          service recorded for it), claims of a killed process not `running` past lease + sweep
#   R4     3 instances, 1 database, due follow-ups (2 % answered 503 once): no attempt executed twice, all end
#          delivered
#   R6     snoozes re-sent through one APNs stand-in for 3 instances, every instance restarted while they are
#          pending: 0 early, 0 missed, 0 twice, 0 dead, one provider token, lateness p99 <= poll interval + 1 s
#   R9     SIGTERM with deliveries in flight (receiver 1-3 s, a tenth held past the 10 s grace) while replies
#          come in: exit within 15 s, 0 left `running`, nothing delivered without a 2xx, 0 acknowledged lost
#   R10    PostgreSQL SIGSTOPped (postmaster and children): ingest 503 with Retry-After within 2 s, /healthz
#          fast, recovery within 5 s of SIGCONT, 0 acknowledged lost
#   R11    sent notifications with a no-reply step (a webhook), every other one answered at once, every
#          instance of 3 restarted while the steps are pending: 0 early, 0 missed, 0 twice, 0 fired for an
#          answered notification, lateness p99 <= poll interval + 1 s
#   F3     1,000 slow clients (slowhttptest, slow headers; also slow bodies at full size) from 127.0.0.1 while a
#          client on 127.0.0.2 ingests (its database with synchronous_commit off): 100 % answered 202, p99 <= 100 ms
#
#          full (default)                          FAULTS_SIZE=short (CI)
#   R1     20,000 replies, 2 restarts              2,000 replies, 1 restart
#   R3     1,000 deliveries                        200 deliveries
#   R4     10,000 follow-ups                       1,000 follow-ups
#   R6     1,000 snoozes of 20-35 s, 3 instances   100 snoozes of 6-9 s, 3 instances
#   R9     500 in flight on 40 ports               100 in flight on 8 ports
#   R10    stopped 30 s                            stopped 5 s
#   R11    1,000 notifications, steps of 20-35 s   100 notifications, steps of 8-11 s
#   F3     slow headers, then slow bodies, 60 s    slow headers, 20 s
#
# Environment: FAULTS_SIZE (full|short), FAULTS_ONLY (e.g. R3,R9; R2 runs with R1), FAULTS_SKIP_BUILD=1 (use
# the release binary already built), FAULTS_BINARY (this binary instead; no build), FAULTS_PG_PORT (55440),
# FAULTS_PORT_BASE (18300: services at +0..+2, receivers from +10), FAULTS_KEEP=1 (keep the work folder).
# CI runs the short form with the debug binary its tests built (scripts/test.sh): these are correctness
# faults, and their time bounds (2 s, 5 s, 15 s, 100 ms) hold for it too; the release build would cost CI
# minutes. Logs of every process are in the work folder, which is kept (and named) when something failed.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

size="${FAULTS_SIZE:-full}"
only="${FAULTS_ONLY:-R1,R3,R4,R6,R9,R10,R11,F3}"
pg_port="${FAULTS_PG_PORT:-55440}"
port_base="${FAULTS_PORT_BASE:-18300}"
driver="$repo_root/bench/faults/driver.py"
standin="$repo_root/Tests/Fixtures/apns_standin.py"
venv_python="$repo_root/.build-tools/venv/bin/python3"

case "$size" in
    full)
        r1_replies=20000 r1_restarts=2
        r3_deliveries=1000 r3_plan=arrive:100,answered:400,arrive:700
        r4_followups=10000
        r6_snoozes=1000 r6_rate=100 r6_delays=20,25,30,35
        r11_notifications=1000 r11_delays=20,25,30,35
        r9_inflight=500 r9_ports=40 r9_replies=1000 r9_held=20
        r10_before=5 r10_stopped=30 r10_after=10
        f3_connections=1000 f3_seconds=60 f3_modes="headers body"
        ;;
    short)
        r1_replies=2000 r1_restarts=1
        r3_deliveries=200 r3_plan=arrive:30,answered:90,arrive:150
        r4_followups=1000
        r6_snoozes=100 r6_rate=50 r6_delays=6,7,8,9
        r11_notifications=100 r11_delays=8,9,10,11
        r9_inflight=100 r9_ports=8 r9_replies=300 r9_held=12
        r10_before=3 r10_stopped=5 r10_after=5
        f3_connections=1000 f3_seconds=20 f3_modes=headers
        ;;
    *)
        echo "faults: FAULTS_SIZE must be full or short (got '$size')" >&2
        exit 2
        ;;
esac
scenarios=()
for id in ${only//,/ }; do
    id="${id^^}"
    [[ "$id" == R2 ]] && id=R1
    case "$id" in
        R1 | R3 | R4 | R6 | R9 | R10 | R11 | F3) [[ " ${scenarios[*]} " == *" $id "* ]] || scenarios+=("$id") ;;
        *)
            echo "faults: unknown scenario '$id' in FAULTS_ONLY (R1, R2, R3, R4, R6, R9, R10, R11, F3)" >&2
            exit 2
            ;;
    esac
done

log() { echo "faults: $*" >&2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-faults.XXXXXX")"
pg_dir="$work/pg"
results="$work/results.tsv"
: >"$results"
keep_work="${FAULTS_KEEP:-0}"
cleanup() {
    bash scripts/pg-local.sh destroy "$pg_dir" >/dev/null 2>&1 || true
    if [[ "$keep_work" == 1 ]]; then
        log "logs kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

# --- Install and build -----------------------------------------------------------------------------------

bash scripts/install-deps.sh --with slowhttptest curl openssl procps python3 >/dev/null

if [[ -n "${FAULTS_BINARY:-}" ]]; then
    binary="$(realpath "$FAULTS_BINARY")"
else
    if [[ "${FAULTS_SKIP_BUILD:-0}" != 1 ]]; then
        log "building the release binary"
        swift build -c release --product actionhook >"$work/build.log" 2>&1 || {
            cat "$work/build.log" >&2
            exit 1
        }
    fi
    binary="$(swift build -c release --show-bin-path)/actionhook"
fi
[[ -x "$binary" ]] || {
    log "no binary at $binary"
    exit 1
}
log "binary: $binary; size: $size; scenarios: ${scenarios[*]}"

# --- PostgreSQL --------------------------------------------------------------------------------------------

bash scripts/pg-local.sh start "$pg_dir" "$pg_port" max_connections=200 >"$work/pg-start.log" 2>&1 || {
    cat "$work/pg-start.log" >&2
    exit 1
}
psql_admin() { psql "postgresql://postgres@127.0.0.1:$pg_port/postgres" -v ON_ERROR_STOP=1 -qtAX "$@"; }
pg_data="$(psql_admin -c "SHOW data_directory")"
pg_bin="${ACTIONHOOK_PG_BIN:-/usr/lib/postgresql/15/bin}"
[[ -x "$pg_bin/pg_ctl" ]] || pg_bin="$(dirname "$(find /usr/lib/postgresql -name pg_ctl -type f | sort -V | tail -n 1)")"
# pg_ctl as the cluster's owner (as root, pg-local.sh made that the postgres user).
as_pg_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}
# The postmaster and every process it started.
postgres_pids() {
    local postmaster
    postmaster="$(head -n 1 "$pg_data/postmaster.pid")"
    echo "$postmaster"
    pgrep -P "$postmaster" || true
}
postgres_signal() {
    local pid
    for pid in $(postgres_pids 2>/dev/null); do kill -"$1" "$pid" 2>/dev/null || true; done
}

# --- Helpers shared by the scenarios --------------------------------------------------------------------

admin_token="$(openssl rand -hex 24)"
# The admin token reaches curl through a header file, never its arguments.
admin_header="$work/admin-header"
(umask 077 && printf 'Authorization: Bearer %s\n' "$admin_token" >"$admin_header")

service_port() { echo $((port_base + $1)); }
receiver_port() { echo $((port_base + 10 + $1)); }

# check, note, print_results, wait_until, alive, now, elapsed.
# shellcheck source=bench/lib/figures.sh
source "$repo_root/bench/lib/figures.sh"

# The share of the CPU busy over one second (all processes): other work that adds noise.
cpu_busy_percent() {
    local a b
    read -r -a a < <(head -n 1 /proc/stat)
    sleep 1
    read -r -a b < <(head -n 1 /proc/stat)
    awk -v u="$((b[1] + b[2] + b[3] - a[1] - a[2] - a[3]))" -v t="$((b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7] - a[1] - a[2] - a[3] - a[4] - a[5] - a[6] - a[7]))" \
        'BEGIN { printf "%.0f", t ? 100 * u / t : 0 }'
}

# --- Per-scenario state (each scenario runs in a subshell of its own) -----------------------------------

scenario_dir=
database_url=
declare -A service_pids=()
started_pids=()

sql() { psql "$database_url" -v ON_ERROR_STOP=1 -qtAX "$@"; }

# new_database NAME: a fresh, migrated database for this scenario.
new_database() {
    psql_admin -c "CREATE DATABASE $1"
    database_url="postgresql://postgres@127.0.0.1:$pg_port/$1"
    DATABASE_URL="$database_url" "$binary" migrate >"$scenario_dir/migrate.log" 2>&1
}

# start_service NAME INDEX [VAR=value ...]: `actionhook serve` on service port INDEX over this scenario's
# database; its pid goes to service_pids[NAME] and NAME.pid; waits until /readyz answers 200, and fails
# when the process ends first.
start_service() {
    local name="$1" port
    port="$(service_port "$2")"
    shift 2
    local environment=("ACTIONHOOK_ADMIN_TOKEN=$admin_token" "DATABASE_URL=$database_url" ACTIONHOOK_HOST=127.0.0.1
        "ACTIONHOOK_PORT=$port" ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 ACTIONHOOK_LOG_LEVEL=notice
        ACTIONHOOK_RATE_LIMIT_PER_SECOND=100000)
    env "${environment[@]}" "$@" "$binary" serve >>"$scenario_dir/$name.log" 2>&1 &
    service_pids[$name]=$!
    started_pids+=($!)
    echo $! >"$scenario_dir/$name.pid"
    wait_until 60 "$name to be ready on :$port" ready_or_gone "$port" $!
    alive $!
}
ready_or_gone() { curl -fs -o /dev/null "http://127.0.0.1:$1/readyz" || ! alive "$2"; }

# stop_service NAME: SIGTERM, then waits for the exit; sets stopped_in (seconds) and stopped_status.
stopped_in=
stopped_status=
stop_service() {
    local pid="${service_pids[$1]}" started
    started="$(now)"
    if ours "$pid"; then kill -TERM "$pid"; fi
    stopped_status=0
    wait "$pid" || stopped_status=$?
    stopped_in="$(elapsed "$started" "$(now)")"
}

# start_receiver NAME FIRST COUNT [driver options]: a webhook receiver on receiver ports FIRST..FIRST+COUNT-1
# (receiver port 0 is always the app's own endpoint). It logs to NAME.tsv, each line written before it goes
# on (an arrival before its answer), and its counters to NAME.stats.json when it stops.
declare -A receiver_pids=()
start_receiver() {
    local name="$1" first="$2" count="$3" ports=() i
    shift 3
    for ((i = first; i < first + count; i++)); do ports+=("$(receiver_port "$i")"); done
    python3 "$driver" receive --ports "$(
        IFS=,
        echo "${ports[*]}"
    )" --log "$scenario_dir/$name.tsv" --stats "$scenario_dir/$name.stats.json" "$@" 2>"$scenario_dir/$name.log" &
    receiver_pids[$name]=$!
    started_pids+=($!)
    wait_until 30 "the receiver" curl -fs -o /dev/null "http://127.0.0.1:${ports[-1]}/_stats"
}
# stop_receiver NAME: SIGTERM, and waits until it has exited (its log complete, its counters written).
stop_receiver() {
    terminate "${receiver_pids[$1]}"
    [[ -s "$scenario_dir/$1.stats.json" ]] || {
        log "the receiver $1 left no counters"
        return 1
    }
}
# receiver_unlogged NAME: arrivals a stopped receiver counted but its log does not have (loaded as NAME).
receiver_unlogged() {
    echo $(($(json_field '["arrived"]' <"$scenario_dir/$1.stats.json") - $(sql -c "SELECT count(*) FROM $1 WHERE event = 'arrive'")))
}
json_field() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }
# receiver_inflight INDEX: requests the receiver on receiver port INDEX holds now.
receiver_inflight() { curl -fs "http://127.0.0.1:$(receiver_port "$1")/_stats" | json_field '["inflight"]'; }
inflight_at_least() { [[ "$(receiver_inflight "$1")" -ge "$2" ]]; }

# admin METHOD PATH BODY: the admin API on the first service; fails unless it answers 2xx.
admin() {
    local answer status
    answer="$(curl -sS -X "$1" -H @"$admin_header" -H "Content-Type: application/json" -w '\n%{http_code}' \
        --data-binary "$3" "http://127.0.0.1:$(service_port 0)$2")"
    status="${answer##*$'\n'}"
    answer="${answer%$'\n'*}"
    if [[ "$status" != 2* ]]; then
        log "$1 $2 answered $status: $answer"
        return 1
    fi
    printf '%s' "$answer"
}

# create_app ID WEBHOOK_URL [EXTRA_JSON]: an app; its ingest key goes to ingest-key (never printed).
create_app() {
    local created
    created="$(admin POST /v1/apps "{\"id\": \"$1\", \"name\": \"$1\", \"webhook\": {\"url\": \"$2\"}${3:+, $3}}")"
    (umask 077 && printf '%s' "$created" | json_field '["ingestKey"]["secret"]' >"$scenario_dir/ingest-key")
}

# The rules the invite replies of driver.py meet: accept makes 1 webhook, decline 2 (one a second later),
# dismiss none (record), anything else is unmatched.
invite_rules() {
    admin POST "/v1/apps/$1/rules" '{"id": "invite-accept", "match": {"action": "accept"},
        "handler": {"type": "accept"}, "followUps": [{"channel": "webhook"}]}' >/dev/null
    admin POST "/v1/apps/$1/rules" '{"id": "invite-decline", "match": {"action": "decline"},
        "handler": {"type": "decline"}, "followUps": [
            {"channel": "webhook", "body": {"event": "declined", "eventId": "{{userInfo.eventId}}"}},
            {"channel": "webhook", "delaySeconds": 1, "body": {"event": "declined-later", "response": "{{response.id}}"}}]}' >/dev/null
    admin POST "/v1/apps/$1/rules" '{"id": "invite-dismiss", "match": {"action": "dismiss"},
        "handler": {"type": "record"}}' >/dev/null
}
invite_expected="VALUES ('invite-accept', 1), ('invite-decline', 2), ('invite-dismiss', 0)"

# ingest NAME [driver options]: driver.py ingest against the first service with this scenario's key.
ingest() {
    local name="$1"
    shift
    FAULTS_INGEST_KEY="$(cat "$scenario_dir/ingest-key")" python3 "$driver" ingest \
        --url "http://127.0.0.1:$(service_port 0)/v1/responses" --log "$scenario_dir/$name.tsv" "$@"
}

# insert_due_webhooks APP COUNT FIRST PORTS: COUNT due webhook follow-ups of one response, written in one
# transaction; follow-up n goes to receiver port FIRST + n % PORTS (port 0 through the app's own endpoint).
insert_due_webhooks() {
    local response
    response="$(sql -c "SELECT actionhook_uuid_v7(now())")"
    sql <<SQL
BEGIN;
INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer)
VALUES ('$1', '$response', 'bulk-$response', '\x00'::bytea, 'bulk', 'recorded', '{}');
INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at)
SELECT '$1', gen_random_uuid(), '$response', n, 'webhook',
       jsonb_build_object('url', CASE WHEN $3 + n % $4 = 0 THEN NULL
                                      ELSE format('http://127.0.0.1:%s/%s/%s', $(receiver_port "$3") + n % $4, '$1', n) END,
                          'body', jsonb_build_object('n', n, 'kind', 'bulk')), now()
FROM generate_series(0, $2 - 1) AS n;
NOTIFY actionhook_followups;
COMMIT;
SQL
}

# load_sent NAME / load_received NAME: a client's or a receiver's log into a table of the same name.
load_sent() {
    sql -c "CREATE TABLE IF NOT EXISTS $1 (key text, attempt int, started float8, finished float8, status int,
        retry_after text, response_id uuid)" -c "TRUNCATE $1" -c "\\copy $1 FROM '$scenario_dir/$1.tsv'"
}
load_received() {
    sql -c "CREATE TABLE IF NOT EXISTS $1 (event text, at float8, port int, webhook_id text, status int)" \
        -c "TRUNCATE $1" -c "\\copy $1 FROM '$scenario_dir/$1.tsv'"
}
# Acknowledged replies (200/202) of a client's table that are not stored under their key with the id
# their acknowledgement gave.
acknowledged_lost() {
    sql -c "SELECT count(*) FROM $1 s WHERE s.status IN (200, 202) AND NOT EXISTS (
        SELECT 1 FROM responses r WHERE r.app_id = '$2' AND r.idempotency_key = s.key AND r.id = s.response_id)"
}
# sql_is QUERY VALUE: a predicate for wait_until.
sql_is() { [[ "$(sql -c "$1")" == "$2" ]]; }
# undelivered ID: notes what the follow-ups not delivered are waiting for (nothing when all are).
undelivered() {
    local rows
    rows="$(sql -c "SELECT status, attempt, coalesce(last_error, '-'), round(extract(epoch FROM due_at - now())::numeric, 1),
        coalesce(round(extract(epoch FROM lease_until - now())::numeric, 1)::text, '-'), count(*)
        FROM followups WHERE status <> 'delivered' GROUP BY 1, 2, 3, 4, 5 ORDER BY 6 DESC LIMIT 10")"
    [[ -z "$rows" ]] || note "$1" "not delivered (status|attempt|last error|due in s|lease left s|count): ${rows//$'\n'/; }"
}
status_counts() { sql -c "SELECT coalesce(string_agg(status || ' ' || n, ', ' ORDER BY status), 'none')
    FROM (SELECT status, count(*) AS n FROM followups GROUP BY status) AS s"; }

# ours PID: a child of this shell still running (a pid already reaped may since belong to anyone).
ours() {
    local stat
    alive "$1" || return 1
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    read -r -a stat <<<"$stat"
    [[ "${stat[1]}" == "$BASHPID" ]]
}
# terminate PID...: those still ours get SIGTERM, SIGKILL after 20 s, and are reaped.
terminate() {
    local pid waited mine=()
    for pid in "$@"; do
        if ours "$pid"; then mine+=("$pid"); fi
    done
    ((${#mine[@]})) || return 0
    for pid in "${mine[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${mine[@]}"; do
        waited=0
        while alive "$pid" && ((waited < 200)); do
            sleep 0.1
            waited=$((waited + 1))
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
scenario_cleanup() {
    postgres_signal CONT
    if ((${#started_pids[@]})); then terminate "${started_pids[@]}"; fi
}

# --- R1 + R2: ingest through immediate restarts of PostgreSQL -------------------------------------------

progress_at_least() { [[ "$(cat "$scenario_dir/progress" 2>/dev/null || echo 0)" -ge "$1" ]]; }

scenario_R1() {
    new_database faults_r1
    start_receiver r1_received 0 1
    start_service a 0
    create_app r1 "http://127.0.0.1:$(receiver_port 0)/r1"
    invite_rules r1

    log "R1: $r1_replies replies from 32 clients; PostgreSQL restarted -m immediate $r1_restarts time(s)"
    ingest r1_sent --count "$r1_replies" --concurrency 32 --key-prefix r1 --progress "$scenario_dir/progress" \
        >"$scenario_dir/ingest.json" &
    local client=$! restart started took
    started_pids+=("$client")
    for ((restart = 1; restart <= r1_restarts; restart++)); do
        local threshold=$((r1_replies * restart / (r1_restarts + 1)))
        wait_until 600 "$threshold acknowledged" progress_at_least "$threshold"
        started="$(now)"
        as_pg_owner "$pg_bin/pg_ctl" -D "$pg_data" -l "$(dirname "$pg_data")/postgres.log" -m immediate -w -t 60 -s restart
        took="$(elapsed "$started" "$(now)")"
        note R1 "restart $restart after $(cat "$scenario_dir/progress") acknowledged: PostgreSQL back in ${took}s"
    done
    wait "$client"
    note R1 "clients: $(cat "$scenario_dir/ingest.json")"
    load_sent r1_sent

    check R1 "replies acknowledged (retrying until acknowledged)" \
        "$(sql -c "SELECT count(DISTINCT key) FROM r1_sent WHERE status IN (200, 202)")" == "$r1_replies"
    check R1 "acknowledged responses lost" "$(acknowledged_lost r1_sent r1)" == 0
    check R1 "responses stored more than once (rows per key > 1)" "$(sql -c "SELECT count(*) FROM (
        SELECT idempotency_key FROM responses WHERE app_id = 'r1' GROUP BY 1 HAVING count(*) > 1) AS d")" == 0
    check R1 "responses stored without a reply sent for them" "$(sql -c "SELECT count(*) FROM responses r
        WHERE r.app_id = 'r1' AND NOT EXISTS (SELECT 1 FROM r1_sent s WHERE s.key = r.idempotency_key)")" == 0
    # R2: the rule's follow-ups, each once, for every stored response (anti-joins both ways).
    check R2 "follow-ups missing (asked for by the rule, not stored)" "$(sql -c "
        WITH expected (rule_id, n) AS ($invite_expected)
        SELECT count(*) FROM responses r LEFT JOIN expected e USING (rule_id)
        CROSS JOIN LATERAL generate_series(0, coalesce(e.n, 0) - 1) AS o (ordinal)
        WHERE r.app_id = 'r1' AND NOT EXISTS (SELECT 1 FROM followups f
            WHERE f.app_id = r.app_id AND f.response_id = r.id AND f.ordinal = o.ordinal)")" == 0
    check R2 "follow-ups orphaned (no response)" "$(sql -c "SELECT count(*) FROM followups f WHERE NOT EXISTS (
        SELECT 1 FROM responses r WHERE r.app_id = f.app_id AND r.id = f.response_id)")" == 0
    check R2 "follow-ups beyond what the rule asked for" "$(sql -c "
        WITH expected (rule_id, n) AS ($invite_expected)
        SELECT count(*) FROM followups f JOIN responses r ON r.app_id = f.app_id AND r.id = f.response_id
        LEFT JOIN expected e ON e.rule_id = r.rule_id WHERE f.ordinal >= coalesce(e.n, 0)")" == 0
    note R2 "follow-ups stored: $(sql -c "SELECT count(*) FROM followups") for $(sql -c "SELECT count(*) FROM responses")" \
        "responses ($(sql -c "SELECT string_agg(coalesce(rule_id, 'unmatched') || ' ' || n, ', ' ORDER BY rule_id)
        FROM (SELECT rule_id, count(*) AS n FROM responses GROUP BY rule_id) AS c"))"
    # The worker went through the restarts too: everything it was given ends delivered.
    wait_until 120 "all follow-ups delivered" sql_is "SELECT count(*) FROM followups WHERE status <> 'delivered'" 0 || true
    undelivered R1
    check R1 "follow-ups not delivered 2 min after the last reply" \
        "$(sql -c "SELECT count(*) FROM followups WHERE status <> 'delivered'")" == 0
}

# --- R3: kill -9 during deliveries --------------------------------------------------------------------------

scenario_R3() {
    local lease=5 sweep=5 slack=5
    new_database faults_r3
    start_receiver r3_received 0 4 --delay 0.02 --kill-pidfile "$scenario_dir/a.pid" --kill-plan "$r3_plan"
    # A small concurrency, as in WorkerFaultTests, so that deliveries go on between the kills.
    local worker_env=("ACTIONHOOK_WORKER_LEASE_SECONDS=$lease" ACTIONHOOK_WORKER_POLL_MS=100 ACTIONHOOK_WORKER_CONCURRENCY=16
        "ACTIONHOOK_RETRY_SCHEDULE=1,1,1,1,1,1,1,1,1,1" ACTIONHOOK_SHUTDOWN_GRACE_SECONDS=2)
    start_service a 0 "${worker_env[@]}"
    create_app r3 "http://127.0.0.1:$(receiver_port 0)/r3"
    local steps
    steps="$(tr ',' '\n' <<<"$r3_plan" | wc -l)"

    log "R3: $r3_deliveries due webhooks; the receiver kill -9s the service at $r3_plan (lease ${lease}s, sweep ${sweep}s)"
    insert_due_webhooks r3 "$r3_deliveries" 0 4
    local kills=0 status started_at deadline=$((SECONDS + 300)) cleared_max=0 t
    local -a stale_since=() stale_db=()
    started_at="$(now)"
    while :; do
        local pid="${service_pids[a]}"
        if ! alive "$pid"; then
            status=0
            wait "$pid" || status=$?
            if [[ "$status" != 137 ]]; then
                log "R3: actionhook exited on its own (status $status)"
                return 1
            fi
            kills=$((kills + 1))
            stale_since+=("$(now)")
            stale_db+=("$(sql -c "SELECT now()")")
            note R3 "kill $kills at $(elapsed "$started_at" "${stale_since[-1]}")s: $(sql -c "SELECT count(*) FROM followups
                WHERE status = 'running'") claims left running, $(sql -c "SELECT count(*) FROM followups
                WHERE status = 'delivered'") delivered; restarting"
            # The receiver may kill the new process before it is ready: the next round sees that.
            start_service a 0 "${worker_env[@]}" || true
        fi
        # A killed process's claims: until none is left running, measured from the kill.
        local i
        for i in "${!stale_since[@]}"; do
            [[ -n "${stale_since[i]}" ]] || continue
            if [[ "$(sql -c "SELECT count(*) FROM followups WHERE status = 'running' AND updated_at <= '${stale_db[i]}'")" == 0 ]]; then
                t="$(elapsed "${stale_since[i]}" "$(now)")"
                note R3 "claims of killed process $((i + 1)) swept back into the queue ${t}s after the kill"
                cleared_max="$(awk -v a="$cleared_max" -v b="$t" 'BEGIN { print (b > a ? b : a) }')"
                stale_since[i]=
            elif awk -v t="$(elapsed "${stale_since[i]}" "$(now)")" -v l=$((lease + sweep + slack)) 'BEGIN { exit !(t > l) }'; then
                cleared_max="$(elapsed "${stale_since[i]}" "$(now)")"
                log "R3: claims of killed process $((i + 1)) still running ${cleared_max}s after the kill"
                stale_since[i]=
            fi
        done
        local delivered pending_stale
        delivered="$(sql -c "SELECT count(*) FROM followups WHERE status = 'delivered'")"
        pending_stale="$(printf '%s' "${stale_since[@]}")"
        if [[ "$delivered" == "$r3_deliveries" && -z "$pending_stale" ]]; then
            break
        fi
        if ((SECONDS > deadline)); then
            log "R3: timed out: $(status_counts), kills $kills"
            break
        fi
        sleep 0.1
    done
    stop_service a
    note R3 "the last instance stopped on SIGTERM in ${stopped_in}s (exit $stopped_status); $(elapsed "$started_at" "$(now)")s in all"
    stop_receiver r3_received
    load_received r3_received

    check R3 "kill -9 (on arrival, after a 2xx, in flight)" "$kills" == "$steps"
    check R3 "follow-ups delivered" "$(sql -c "SELECT count(*) FROM followups WHERE status = 'delivered'")" == "$r3_deliveries"
    # The receiver's own record first: a request it counted but did not log is the harness's loss.
    check R3 "arrivals the receiver counted but did not log" "$(receiver_unlogged r3_received)" == 0
    local missing
    missing="$(sql -c "SELECT count(*) FROM followups f
        WHERE NOT EXISTS (SELECT 1 FROM r3_received r WHERE r.event = 'arrive' AND r.webhook_id = f.id::text)")"
    check R3 "webhook-ids that never reached the receiver" "$missing" == 0
    ((missing == 0)) || r3_explain_missing
    check R3 "arrivals of the one answered 2xx just before a kill" "$(sql -c "SELECT count(*) FROM r3_received r
        WHERE r.event = 'arrive' AND r.webhook_id = (SELECT webhook_id FROM r3_received
            WHERE event = 'killed-after-answer' LIMIT 1)")" ">=" 2
    check R3 "claims of a killed process cleared (lease + sweep + ${slack} s)" "$cleared_max" "<=" $((lease + sweep + slack)) s
    check R3 "follow-ups left running" "$(sql -c "SELECT count(*) FROM followups WHERE status = 'running'")" == 0
    note R3 "$(sql -c "SELECT count(*) FROM r3_received WHERE event = 'arrive'") requests for $r3_deliveries follow-ups;" \
        "$(sql -c "SELECT count(*) FROM followups WHERE attempt >= 2") claimed more than once"
}

# For each follow-up the receiver never logged: its status and every attempt the service recorded, and whose
# fault that is. A `delivered` attempt (a 2xx) without an arrival means a 2xx came for a request the receiver
# did not log; a follow-up delivered with no delivered attempt was marked so by the finish of no attempt.
r3_explain_missing() {
    local line
    while IFS= read -r line; do
        note R3 "never arrived: $line"
    done < <(sql -c "SELECT f.id || ' ' || f.status || ' after ' || f.attempt || ' claims; attempts recorded: '
            || coalesce((SELECT string_agg(format('#%s %s%s%s', a.attempt, a.result, ' http ' || a.http_status,
                ' (' || a.error_class || ')'), ', ' ORDER BY a.attempt)
                FROM delivery_attempts a WHERE a.app_id = f.app_id AND a.followup_id = f.id), 'none')
            || ' => ' || CASE
                WHEN EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.app_id = f.app_id AND a.followup_id = f.id
                    AND a.result = 'delivered')
                THEN 'a 2xx recorded by attempt ' || (SELECT min(a.attempt) FROM delivery_attempts a
                    WHERE a.app_id = f.app_id AND a.followup_id = f.id AND a.result = 'delivered')
                    || ' that the receiver never logged: ' || CASE WHEN $(receiver_unlogged r3_received) > 0
                        THEN 'the receiver lost arrivals from its log (harness)'
                        ELSE 'the service recorded a delivery that did not reach the receiver (service)' END
                WHEN f.status = 'delivered' THEN 'delivered without a delivered attempt (service: finish path)'
                ELSE 'not delivered' END
        FROM followups f
        WHERE NOT EXISTS (SELECT 1 FROM r3_received r WHERE r.event = 'arrive' AND r.webhook_id = f.id::text)
        ORDER BY f.id LIMIT 20")
}

# --- R4: three instances, one database -------------------------------------------------------------------

scenario_R4() {
    new_database faults_r4
    start_receiver r4_received 0 4 --fail-first 0.02
    local name index names=(a b c)
    for index in 0 1 2; do
        start_service "${names[index]}" "$index" "ACTIONHOOK_RETRY_SCHEDULE=1,1,1,1,1"
    done
    create_app r4 "http://127.0.0.1:$(receiver_port 0)/r4"

    log "R4: $r4_followups due webhooks, 3 instances, 2 % of them answered 503 once"
    local started took
    started="$(now)"
    insert_due_webhooks r4 "$r4_followups" 0 4
    wait_until 600 "all delivered" sql_is "SELECT count(*) FROM followups WHERE status = 'delivered'" "$r4_followups" || true
    took="$(elapsed "$started" "$(now)")"
    note R4 "statuses after ${took}s: $(status_counts)"
    local shares=() lost=0 value
    for index in 0 1 2; do
        value="$(curl -fs "http://127.0.0.1:$(service_port "$index")/metrics" | awk '
            /^actionhook_deliveries_total\{/ && /channel="webhook"/ && /result="delivered"/ { s += $NF } END { print s + 0 }')"
        shares+=("$value")
        value="$(curl -fs "http://127.0.0.1:$(service_port "$index")/metrics" | awk '
            /^actionhook_deliveries_total\{/ && /result="lease_lost"/ { s += $NF } END { print s + 0 }')"
        lost=$((lost + value))
    done
    stop_receiver r4_received
    load_received r4_received

    check R4 "follow-ups delivered" "$(sql -c "SELECT count(*) FROM followups WHERE status = 'delivered'")" == "$r4_followups"
    # Each claim is one attempt: a request beyond the follow-up's attempts is an attempt executed twice.
    check R4 "(webhook-id, attempt) executed more than once" "$(sql -c "
        SELECT coalesce(sum(greatest(a.n - f.attempt, 0)), 0) FROM followups f
        JOIN (SELECT webhook_id, count(*) AS n FROM r4_received WHERE event = 'arrive' GROUP BY 1) AS a
            ON a.webhook_id = f.id::text")" == 0
    check R4 "requests not recorded as exactly one attempt each" "$(sql -c "
        SELECT count(*) FROM followups f
        LEFT JOIN (SELECT webhook_id, count(*) AS n FROM r4_received WHERE event = 'arrive' GROUP BY 1) AS a
            ON a.webhook_id = f.id::text
        LEFT JOIN (SELECT followup_id, count(*) AS n FROM delivery_attempts GROUP BY 1) AS d ON d.followup_id = f.id
        WHERE coalesce(a.n, 0) <> f.attempt OR coalesce(d.n, 0) <> f.attempt")" == 0
    check R4 "claims beyond need (1, or 2 after the 503)" "$(sql -c "
        SELECT count(*) FROM followups f
        LEFT JOIN (SELECT webhook_id, count(*) AS n FROM r4_received WHERE event = 'answer' AND status = 503
                   GROUP BY 1) AS refused ON refused.webhook_id = f.id::text
        WHERE f.attempt <> 1 + coalesce(refused.n, 0)")" == 0
    check R4 "leases lost (metric, all instances)" "$lost" == 0
    note R4 "delivered per instance (metric): ${shares[*]}; retried after a 503: $(sql -c "
        SELECT count(*) FROM r4_received WHERE event = 'answer' AND status = 503"); drained in ${took}s"
    for name in "${names[@]}"; do stop_service "$name"; done
}

# --- R6: snoozes across a restart of every instance -------------------------------------------------------

scenario_R6() {
    local poll_ms=1000 instances=3
    [[ -x "$venv_python" ]] || {
        log "R6 needs $venv_python with h2 (scripts/install-deps.sh installs it)"
        return 1
    }
    # The APNs stand-in's CA, its certificate for 127.0.0.1 and the provider's .p8 key, as APNsStandIn.swift
    # makes them.
    local tls="$scenario_dir/tls"
    mkdir -p "$tls"
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' \
        >"$tls/server.ext"
    {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/ca.key" -out "$tls/ca.pem" \
            -days 2 -subj "/CN=ActionHook faults CA" -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/server.key" \
            -out "$tls/server.csr" -subj /CN=127.0.0.1
        openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
            -out "$tls/server.pem" -days 2 -extfile "$tls/server.ext"
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tls/authkey.p8"
        openssl pkey -in "$tls/authkey.p8" -pubout -out "$tls/authkey.pub"
    } >"$tls/openssl.log" 2>&1
    # One stand-in for the three instances, as APNs is one service for them all. It counts provider-token
    # updates per key id across all its connections and refuses a second new token within 20 minutes
    # (429 TooManyProviderTokenUpdates): the instances share one token through the database, so none is
    # refused (before they did, each signed its own and 70 of 100 snoozes ended dead).
    local names=(a b c) index
    "$venv_python" "$standin" --cert "$tls/server.pem" --key "$tls/server.key" \
        --auth-key "KEYID12345:TEAM123456:$tls/authkey.pub" --topic com.example.faults \
        --log "$scenario_dir/apns.jsonl" --ignore-stdin >"$scenario_dir/apns.port" \
        2>"$scenario_dir/apns.log" </dev/null &
    started_pids+=($!)
    wait_until 30 "the APNs stand-in" test -s "$scenario_dir/apns.port"
    local apns_url
    apns_url="https://127.0.0.1:$(head -n 1 "$scenario_dir/apns.port")"

    new_database faults_r6
    local service_env=(ACTIONHOOK_APNS_CA_FILE="$tls/ca.pem" "ACTIONHOOK_APNS_URL=$apns_url"
        "ACTIONHOOK_WORKER_POLL_MS=$poll_ms")
    for ((index = 0; index < instances; index++)); do
        start_service "${names[index]}" "$index" "${service_env[@]}"
    done
    local apns
    apns="$(python3 -c 'import json, sys
print(json.dumps({"teamId": "TEAM123456", "keyId": "KEYID12345", "privateKey": open(sys.argv[1]).read(),
                  "topic": "com.example.faults", "environment": "sandbox"}))' "$tls/authkey.p8")"
    create_app r6 "http://127.0.0.1:$(receiver_port 0)/unused" "\"apns\": $apns"
    # Each snooze answers a notification sent through ActionHook to its device: only such a push is re-sent.
    admin PUT /v1/apps/r6/categories/timer '{"actions": [{"identifier": "snooze", "title": "Snooze"}]}' >/dev/null
    local server_key
    server_key="$(admin POST /v1/apps/r6/keys '{"scope": "send"}' | json_field '["secret"]')"
    local delay
    for delay in ${r6_delays//,/ }; do
        admin POST /v1/apps/r6/rules "{\"id\": \"snooze-$delay\", \"match\": {\"action\": \"snooze-$delay\"},
            \"handler\": {\"type\": \"snooze\", \"delaySeconds\": $delay, \"maxSnoozes\": 3}}" >/dev/null
    done

    log "R6: $r6_snoozes snoozes of ${r6_delays//,/, } s at $r6_rate/s; then every instance restarted, one after the other"
    FAULTS_SERVER_KEY="$server_key" ingest r6_sent --kind snooze --snooze-delays "$r6_delays" --count "$r6_snoozes" \
        --rate "$r6_rate" --concurrency 8 --key-prefix r6 \
        --send-url "http://127.0.0.1:$(service_port 0)/v1/apps/r6/notifications" >"$scenario_dir/ingest.json"
    note R6 "clients: $(cat "$scenario_dir/ingest.json")"
    local pending
    pending="$(sql -c "SELECT count(*) FROM followups WHERE is_snooze AND status = 'pending'")"
    for ((index = 0; index < instances; index++)); do
        stop_service "${names[index]}"
        start_service "${names[index]}" "$index" "${service_env[@]}"
        note R6 "instance ${names[index]} stopped in ${stopped_in}s (exit $stopped_status) and started again"
    done
    note R6 "restarted all $instances, one after the other, from when $pending snoozes were pending"
    check R6 "snoozes still pending once every instance had restarted" "$(sql -c "
        SELECT count(*) FROM followups WHERE is_snooze AND status = 'pending'")" ">=" 1
    # Until every snooze is done, and 3 s more for a second delivery to show.
    wait_until 300 "all snoozes sent" \
        sql_is "SELECT count(*) FROM followups WHERE is_snooze AND status NOT IN ('delivered', 'dead')" 0 || true
    sleep 3
    load_sent r6_sent
    note R6 "follow-ups: $(sql -c "SELECT string_agg(status || coalesce(' (' || last_error || ')', '') || ' ' || n, ', ')
        FROM (SELECT status, last_error, count(*) AS n FROM followups GROUP BY 1, 2) AS s"); pushes: $(
        grep -c '"kind":"request"' "$scenario_dir/apns.jsonl" || true)"
    sql -c "CREATE TABLE r6_apns (line jsonb)"
    sql -c "\\copy r6_apns FROM '$scenario_dir/apns.jsonl' WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')"
    sql -c "CREATE VIEW r6_pushes AS SELECT lower(line -> 'headers' ->> 'apns-id') AS id, (line ->> 'time')::float8 AS at,
        (line ->> 'status')::int AS status FROM r6_apns WHERE line ->> 'kind' = 'request'"
    sql -c "CREATE VIEW r6_snoozes AS SELECT id::text AS id, extract(epoch FROM due_at)::float8 AS due, status
        FROM followups WHERE is_snooze"

    check R6 "replies answered snoozed" "$(sql -c "SELECT count(*) FROM responses WHERE outcome = 'snoozed'")" == "$r6_snoozes"
    check R6 "snoozes scheduled (one re-notification each)" "$(sql -c "SELECT count(*) FROM r6_snoozes")" == "$r6_snoozes"
    check R6 "re-notifications early (before due, database clock)" "$(sql -c "
        SELECT count(*) FROM r6_pushes p JOIN r6_snoozes s USING (id) WHERE p.at < s.due")" == 0
    check R6 "re-notifications missed" "$(sql -c "SELECT count(*) FROM r6_snoozes s WHERE NOT EXISTS (
        SELECT 1 FROM r6_pushes p WHERE p.id = s.id AND p.status = 200)")" == 0
    check R6 "re-notifications sent twice (apns-id seen > once)" "$(sql -c "SELECT count(*) FROM (
        SELECT id FROM r6_pushes GROUP BY id HAVING count(*) > 1) AS d")" == 0
    check R6 "pushes that are neither a send's push nor a scheduled snooze" "$(sql -c "SELECT count(*) FROM r6_pushes p
        WHERE NOT EXISTS (SELECT 1 FROM r6_snoozes s WHERE s.id = p.id)
            AND NOT EXISTS (SELECT 1 FROM followups f WHERE f.kind = 'push' AND f.id::text = p.id)")" == 0
    check R6 "re-notifications unlike the push the device was sent" "$(sql -c "SELECT count(*) FROM followups s
        JOIN responses r ON r.id = s.response_id
        JOIN followups p ON p.kind = 'push' AND p.notification_id = r.notification_id
        WHERE s.is_snooze AND (s.payload -> 'payload' IS DISTINCT FROM p.payload -> 'payload'
            OR s.device_token IS DISTINCT FROM p.device_token)")" == 0
    check R6 "re-notifications dead" "$(sql -c "SELECT count(*) FROM r6_snoozes WHERE status = 'dead'")" == 0
    check R6 "pushes refused TooManyProviderTokenUpdates" "$(sql -c "
        SELECT count(*) FROM r6_apns WHERE line ->> 'reason' = 'TooManyProviderTokenUpdates'")" == 0
    check R6 "provider tokens sent (one for every instance)" "$(sql -c "
        SELECT count(DISTINCT line ->> 'jwt') FROM r6_apns WHERE line ->> 'kind' = 'request'")" == 1
    check R6 "lateness p99 (poll interval ${poll_ms} ms + 1 s)" "$(sql -c "
        SELECT round(percentile_cont(0.99) WITHIN GROUP (ORDER BY p.at - s.due)::numeric, 3)
        FROM r6_pushes p JOIN r6_snoozes s USING (id)")" "<=" "$(awk -v p=$poll_ms 'BEGIN { print p / 1000 + 1 }')" s
    note R6 "lateness p50 / max: $(sql -c "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY p.at - s.due)::numeric, 3)
        || ' s / ' || round(max(p.at - s.due)::numeric, 3) || ' s' FROM r6_pushes p JOIN r6_snoozes s USING (id)")"
    for ((index = 0; index < instances; index++)); do stop_service "${names[index]}"; done
}

# --- R11: no-reply steps across a restart of every instance ---------------------------------------------

scenario_R11() {
    local poll_ms=1000 instances=3 names=(a b c) index
    new_database faults_r11
    start_receiver r11_received 0 1
    local service_env=("ACTIONHOOK_WORKER_POLL_MS=$poll_ms")
    for ((index = 0; index < instances; index++)); do start_service "${names[index]}" "$index" "${service_env[@]}"; done
    create_app r11 "http://127.0.0.1:$(receiver_port 0)/r11"
    local server_key
    server_key="$(admin POST /v1/apps/r11/keys '{"scope": "send"}' | json_field '["secret"]')"

    log "R11: $r11_notifications notifications with a no-reply step of ${r11_delays//,/, } s, every other one answered" \
        "at once; then every instance restarted, one after the other"
    FAULTS_SERVER_KEY="$server_key" FAULTS_INGEST_KEY="$(cat "$scenario_dir/ingest-key")" python3 "$driver" send \
        --url "http://127.0.0.1:$(service_port 0)/v1/apps/r11/notifications" --count "$r11_notifications" \
        --step-delays "$r11_delays" --answer 2 --log "$scenario_dir/r11_sent.tsv"
    local pending
    pending="$(sql -c "SELECT count(*) FROM followups WHERE kind = 'step' AND status = 'pending'")"
    for ((index = 0; index < instances; index++)); do
        stop_service "${names[index]}"
        start_service "${names[index]}" "$index" "${service_env[@]}"
        note R11 "instance ${names[index]} stopped in ${stopped_in}s (exit $stopped_status) and started again"
    done
    note R11 "restarted all $instances, one after the other, from when $pending steps were pending"
    check R11 "unanswered steps still pending after every restart" "$(sql -c "
        SELECT count(*) FROM followups f JOIN notifications n ON n.id = f.notification_id
        WHERE f.kind = 'step' AND f.status = 'pending' AND n.answered_at IS NULL")" ">=" 1
    # Until no step is left to fire, and 3 s more for a second delivery to show.
    wait_until 300 "every step done" \
        sql_is "SELECT count(*) FROM followups WHERE kind = 'step' AND status NOT IN ('delivered', 'dead', 'cancelled')" 0 || true
    sleep 3
    load_received r11_received
    note R11 "steps: $(sql -c "SELECT string_agg(status || ' ' || n, ', ') FROM (SELECT status, count(*) AS n
        FROM followups WHERE kind = 'step' GROUP BY 1) AS s")"
    sql -c "CREATE VIEW r11_steps AS SELECT f.id::text AS id, extract(epoch FROM f.due_at)::float8 AS due,
        n.answered_at IS NOT NULL AND n.answered_at < f.due_at AS answered_before FROM followups f
        JOIN notifications n ON n.app_id = f.app_id AND n.id = f.notification_id WHERE f.kind = 'step'"
    sql -c "CREATE VIEW r11_fired AS SELECT webhook_id AS id, at FROM r11_received WHERE event = 'arrive'"

    check R11 "notifications sent" "$(sql -c "SELECT count(*) FROM notifications")" == "$r11_notifications"
    check R11 "notifications answered (every other one)" "$(sql -c "
        SELECT count(*) FROM notifications WHERE answered_at IS NOT NULL")" == $((r11_notifications / 2))
    check R11 "steps fired early (before due, database clock)" "$(sql -c "
        SELECT count(*) FROM r11_fired p JOIN r11_steps s USING (id) WHERE p.at < s.due")" == 0
    check R11 "steps of unanswered notifications missed" "$(sql -c "SELECT count(*) FROM r11_steps s
        WHERE NOT s.answered_before AND NOT EXISTS (SELECT 1 FROM r11_fired p WHERE p.id = s.id)")" == 0
    check R11 "steps fired twice (webhook-id seen > once)" "$(sql -c "SELECT count(*) FROM (
        SELECT id FROM r11_fired GROUP BY id HAVING count(*) > 1) AS d")" == 0
    check R11 "steps of answered notifications fired" "$(sql -c "SELECT count(*) FROM r11_steps s
        WHERE s.answered_before AND EXISTS (SELECT 1 FROM r11_fired p WHERE p.id = s.id)")" == 0
    check R11 "lateness p99 (poll interval ${poll_ms} ms + 1 s)" "$(sql -c "
        SELECT coalesce(round(percentile_cont(0.99) WITHIN GROUP (ORDER BY p.at - s.due)::numeric, 3), 0)
        FROM r11_fired p JOIN r11_steps s USING (id)")" "<=" "$(awk -v p=$poll_ms 'BEGIN { print p / 1000 + 1 }')" s
    note R11 "lateness p50 / max: $(sql -c "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY p.at - s.due)::numeric, 3)
        || ' s / ' || round(max(p.at - s.due)::numeric, 3) || ' s' FROM r11_fired p JOIN r11_steps s USING (id)")"
    for ((index = 0; index < instances; index++)); do stop_service "${names[index]}"; done
}

# --- R9: SIGTERM with deliveries in flight ---------------------------------------------------------------

scenario_R9() {
    new_database faults_r9
    # The slow receiver takes the deliveries held at the stop; the app's own endpoint (the replies'
    # follow-ups) answers at once: more than 16 requests at a time to one host wait for a connection, and
    # past 5 s that wait fails the attempt.
    start_receiver r9_app 0 1
    start_receiver r9_received 1 "$r9_ports" --slow 1 3 --stuck 0.1 "$r9_held"
    # Three times as many due as in flight and a concurrency a tenth above it, so that the receiver holds
    # them while SIGTERM comes; a webhook timeout longer than the grace (the held ones are cut off by the stop,
    # not by the timeout); quick retries for what the stop put back.
    local service_env=("ACTIONHOOK_WORKER_CONCURRENCY=$((r9_inflight + r9_inflight / 10))"
        ACTIONHOOK_WEBHOOK_TIMEOUT_SECONDS=60 "ACTIONHOOK_RETRY_SCHEDULE=1,1,1,1,1")
    start_service a 0 "${service_env[@]}"
    create_app r9 "http://127.0.0.1:$(receiver_port 0)/r9"
    invite_rules r9

    log "R9: $r9_inflight deliveries in flight on $r9_ports ports (1-3 s, a tenth held ${r9_held} s), ingest going on; SIGTERM"
    insert_due_webhooks r9 $((3 * r9_inflight)) 1 "$r9_ports"
    wait_until 60 "$r9_inflight requests in flight" inflight_at_least 1 "$r9_inflight"
    ingest r9_sent --count "$r9_replies" --rate 100 --concurrency 8 --key-prefix r9 >"$scenario_dir/ingest.json" &
    local client=$!
    started_pids+=("$client")
    sleep 1
    local inflight running
    wait_until 30 "$r9_inflight requests in flight" inflight_at_least 1 "$r9_inflight" || true
    inflight="$(receiver_inflight 1)"
    running="$(sql -c "SELECT count(*) FROM followups WHERE status = 'running'")"
    stop_service a
    note R9 "at SIGTERM: $inflight requests in flight at the receiver, $running follow-ups running; after: $(status_counts)"
    check R9 "requests in flight at the receiver at SIGTERM" "$inflight" ">=" "$r9_inflight"
    check R9 "seconds from SIGTERM to exit" "$stopped_in" "<=" 15 s
    check R9 "exit status" "$stopped_status" == 0
    check R9 "follow-ups left running" "$(sql -c "SELECT count(*) FROM followups WHERE status = 'running'")" == 0
    sleep 0.5
    load_received r9_received
    load_received r9_app
    check R9 "follow-ups delivered without a 2xx from the receiver" "$(sql -c "SELECT count(*) FROM followups f
        WHERE f.status = 'delivered' AND NOT EXISTS (SELECT 1 FROM (TABLE r9_received UNION ALL TABLE r9_app) AS r
            WHERE r.event = 'answer' AND r.status < 300 AND r.webhook_id = f.id::text)")" == 0

    # A new instance; the clients, retrying with the same keys, get through to it.
    start_service a 0 "${service_env[@]}"
    wait "$client"
    note R9 "clients: $(cat "$scenario_dir/ingest.json")"
    load_sent r9_sent
    check R9 "replies acknowledged" "$(sql -c "SELECT count(DISTINCT key) FROM r9_sent WHERE status IN (200, 202)")" \
        == "$r9_replies"
    check R9 "acknowledged responses lost" "$(acknowledged_lost r9_sent r9)" == 0
    wait_until 120 "all follow-ups delivered" sql_is "SELECT count(*) FROM followups WHERE status <> 'delivered'" 0 || true
    undelivered R9
    check R9 "follow-ups not delivered after the restart" \
        "$(sql -c "SELECT count(*) FROM followups WHERE status <> 'delivered'")" == 0
    stop_service a
}

# --- R10: PostgreSQL stopped with SIGSTOP ----------------------------------------------------------------

scenario_R10() {
    new_database faults_r10
    start_receiver r10_received 0 1
    start_service a 0
    create_app r10 "http://127.0.0.1:$(receiver_port 0)/r10"
    invite_rules r10

    local total=$((r10_before + r10_stopped + r10_after)) stopped_at resumed_at
    log "R10: 48 clients with new replies at 20/s (each retried until acknowledged) and /healthz every 0.1 s" \
        "for ${total}s; PostgreSQL SIGSTOPped for ${r10_stopped}s after ${r10_before}s"
    ingest r10_sent --count 1000000 --duration "$total" --rate 20 --concurrency 48 --key-prefix r10 \
        >"$scenario_dir/ingest.json" &
    local client=$!
    started_pids+=("$client")
    python3 "$driver" probe --url "http://127.0.0.1:$(service_port 0)/healthz" --interval 0.1 --duration "$total" \
        --log "$scenario_dir/r10_health.tsv" &
    local probe=$!
    started_pids+=("$probe")
    sleep "$r10_before"
    # The window starts once every process is stopped, and recovery is timed from before SIGCONT is sent.
    postgres_signal STOP
    stopped_at="$(now)"
    sleep "$r10_stopped"
    resumed_at="$(now)"
    postgres_signal CONT
    wait "$client" "$probe"
    note R10 "clients: $(cat "$scenario_dir/ingest.json")"
    load_sent r10_sent
    sql -c "CREATE TABLE r10_health (started float8, finished float8, status int)" \
        -c "\\copy r10_health FROM '$scenario_dir/r10_health.tsv'"

    # Requests that began while PostgreSQL was stopped (and 2 s before it resumed, so their answer was due).
    local during="started >= $stopped_at AND started <= $resumed_at - 2"
    note R10 "requests while stopped: $(sql -c "SELECT count(*) || ' (' || coalesce(string_agg(DISTINCT status::text, ', '), '') || ')'
        FROM r10_sent WHERE $during")"
    check R10 "ingests while stopped not answered 503" "$(sql -c "SELECT count(*) FROM r10_sent WHERE $during AND status <> 503")" == 0
    check R10 "503s without Retry-After" "$(sql -c "SELECT count(*) FROM r10_sent WHERE status = 503 AND retry_after IS NULL")" == 0
    check R10 "slowest ingest answer while stopped" "$(sql -c "SELECT round(max(finished - started)::numeric, 3)
        FROM r10_sent WHERE $during")" "<=" 2 s
    check R10 "/healthz p99 while stopped" "$(sql -c "SELECT round(1000 * percentile_cont(0.99) WITHIN GROUP (
        ORDER BY finished - started)::numeric, 1) FROM r10_health WHERE started >= $stopped_at AND started <= $resumed_at")" \
        "<=" 100 ms
    check R10 "/healthz not answered 200 while stopped" "$(sql -c "SELECT count(*) FROM r10_health
        WHERE started >= $stopped_at AND started <= $resumed_at AND status <> 200")" == 0
    note R10 "/healthz slowest while stopped: $(sql -c "SELECT round(1000 * max(finished - started)::numeric, 1)
        FROM r10_health WHERE started >= $stopped_at AND started <= $resumed_at") ms"
    check R10 "first acknowledgement after SIGCONT" "$(sql -c "SELECT round(min(finished - $resumed_at)::numeric, 3)
        FROM r10_sent WHERE status IN (200, 202) AND finished >= $resumed_at")" "<=" 5 s
    note R10 "every reply refused while stopped acknowledged $(sql -c "SELECT round(max(finished - $resumed_at)::numeric, 2)
        FROM r10_sent WHERE status IN (200, 202) AND key IN (SELECT key FROM r10_sent WHERE status <> 202 AND status <> 200)") s" \
        "after SIGCONT, $(sql -c "SELECT count(*) FROM r10_sent WHERE status = 200") of them as a replay (200: stored before its 503)"
    check R10 "ingests begun 5 s after SIGCONT not acknowledged" "$(sql -c "SELECT count(*) FROM r10_sent
        WHERE started >= $resumed_at + 5 AND status NOT IN (200, 202)")" == 0
    check R10 "replies not acknowledged in the end" "$(sql -c "SELECT count(*) FROM (SELECT key FROM r10_sent GROUP BY key
        HAVING bool_and(status NOT IN (200, 202))) AS k")" == 0
    check R10 "acknowledged responses lost" "$(acknowledged_lost r10_sent r10)" == 0
    check R10 "responses stored more than once" "$(sql -c "SELECT count(*) - count(DISTINCT idempotency_key)
        FROM responses WHERE app_id = 'r10'")" == 0
    stop_service a
}

# --- F3: slow clients ---------------------------------------------------------------------------------------

scenario_F3() {
    new_database faults_f3
    # F3 is about the HTTP layer: this database commits without waiting for the disk, so that a WAL flush
    # stalled by other work on the machine (seen: 2.5 s while another benchmark wrote) is not counted as
    # the slow clients' doing. The other scenarios keep durable commits.
    psql_admin -c "ALTER DATABASE faults_f3 SET synchronous_commit = off"
    start_receiver f3_received 0 1
    start_service a 0
    create_app f3 "http://127.0.0.1:$(receiver_port 0)/f3"
    invite_rules f3
    ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

    local mode flag legit=$((f3_seconds - 10)) url
    url="http://127.0.0.1:$(service_port 0)/v1/responses"
    for mode in $f3_modes; do
        [[ "$mode" == headers ]] && flag=-H || flag=-B
        log "F3: slowhttptest $flag ($mode) with $f3_connections connections from 127.0.0.1 for ${f3_seconds}s;" \
            "a client on 127.0.0.2 ingests at 20/s for ${legit}s from second 6"
        slowhttptest "$flag" -c "$f3_connections" -r 200 -i 10 -x 24 -p 3 -l "$f3_seconds" -t POST -f application/json -u "$url" \
            -g -o "$scenario_dir/slow-$mode" >"$scenario_dir/slow-$mode.log" 2>&1 &
        local attack=$!
        started_pids+=("$attack")
        sleep 6
        ingest "f3_$mode" --count 1000000 --duration "$legit" --rate 20 --concurrency 4 --fresh-connections \
            --source-address 127.0.0.2 --no-retry --key-prefix "f3-$mode" >"$scenario_dir/ingest-$mode.json"
        wait "$attack" || true
        load_sent "f3_$mode"
        note F3 "slowhttptest ($mode): most connections held at once $(awk -F, 'NR > 1 && $4 + 0 > m { m = $4 + 0 } END { print m + 0 }' \
            "$scenario_dir/slow-$mode.csv" 2>/dev/null || echo '?') of $f3_connections (the rest refused or closed:" \
            "256 per address by default); legitimate client: $(cat "$scenario_dir/ingest-$mode.json")"
        check F3 "legitimate requests answered 2xx ($mode)" "$(sql -c "SELECT round(100.0 * count(*) FILTER (
            WHERE status IN (200, 202)) / nullif(count(*), 0), 2) FROM f3_$mode")" == 100 %
        check F3 "legitimate p99 latency ($mode)" "$(sql -c "SELECT round(1000 * percentile_cont(0.99) WITHIN GROUP (
            ORDER BY finished - started)::numeric, 1) FROM f3_$mode")" "<=" 100 ms
    done
    stop_service a
}

# --- Run ---------------------------------------------------------------------------------------------------

for id in "${scenarios[@]}"; do
    mkdir -p "$work/$id"
    log "=== $id (other load on the machine: $(cpu_busy_percent)% busy in the second before) ==="
    started=$SECONDS
    before="$(wc -l <"$results")"
    set +e
    (
        set -e
        scenario_dir="$work/$id"
        trap scenario_cleanup EXIT
        "scenario_$id"
    )
    status=$?
    set -e
    if ((status != 0)); then
        keep_work=1
        printf '%s\t%s\t%s\t%s\t%s\n' "$id" "scenario stopped by an error" "exit $status" "" FAIL >>"$results"
        log "$id stopped by an error (exit $status); the tail of its logs:"
        for file in "$work/$id"/*.log; do
            [[ -s "$file" ]] || continue
            echo "--- ${file#"$work"/}" >&2
            tail -n 15 "$file" >&2
        done
    elif [[ "$(wc -l <"$results")" == "$before" ]]; then
        printf '%s\t%s\t%s\t%s\t%s\n' "$id" "no figure recorded" "" "" FAIL >>"$results"
    fi
    log "$id took $((SECONDS - started))s"
done

echo
echo "Faults ($size size, $(date -u +%Y-%m-%dT%H:%MZ), $(basename "$binary") at ${binary%/*})"
print_results id
failed="$(awk -F'\t' '$5 == "FAIL"' "$results" | wc -l)"
if ((failed > 0)); then
    keep_work=1
    echo "faults: FAIL ($failed of $(wc -l <"$results") checks)"
    exit 1
fi
echo "faults: PASS ($(wc -l <"$results") checks)"
