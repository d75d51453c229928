#!/usr/bin/env bash
# Migrating an existing database to partitions (sql/migrations/011), measured: `make bench-migrate`.
#
# Starts a throwaway PostgreSQL (fsync on), applies the migrations before 011 the way `actionhook migrate`
# records them, fills the previous schema with BENCH_MIGRATE_RESPONSES replies (5 million) spread over
# the last BENCH_MIGRATE_DAYS days (7), each with the row size of bench/pgbench/response.sql's, one in four
# with a delivered webhook follow-up and its delivery attempt, then times `actionhook migrate` (the
# release build): ActionHook's writes wait for the whole migration, so that time is the downtime. Checks
# that every row is there after it, and prints the figures.
#
# Environment: BENCH_MIGRATE_RESPONSES (5000000), BENCH_MIGRATE_DAYS (7), BENCH_PG_PORT (55434),
# BENCH_BINARY (another actionhook binary), BENCH_SKIP_BUILD=1.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

responses="${BENCH_MIGRATE_RESPONSES:-5000000}"
days="${BENCH_MIGRATE_DAYS:-7}"
pg_port="${BENCH_PG_PORT:-55434}"
log() { echo "bench-migrate: $*" >&2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-migrate.XXXXXX")"
pg_dir="$work/pg"
cleanup() {
    bash scripts/pg-local.sh destroy "$pg_dir" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

binary="${BENCH_BINARY:-$repo_root/.build/release/actionhook}"
if [[ -z "${BENCH_BINARY:-}" && "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    log "building the release binary"
    swift build -c release --product actionhook >&2
fi

bash scripts/pg-local.sh start "$pg_dir" "$pg_port" >/dev/null
url="postgresql://postgres@127.0.0.1:$pg_port/postgres"
psql_() { psql "$url" -X -q -v ON_ERROR_STOP=1 -At "$@"; }

log "schema before partitions (migrations 001-010)"
psql_ -c "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())"
for file in sql/migrations/0*.sql; do
    name="$(basename "$file")"
    version="$((10#${name%%_*}))"
    ((version <= 10)) || continue
    { echo "BEGIN;"; cat "$file"; echo "INSERT INTO schema_migrations (version, name) VALUES ($version, '$name');"; echo "COMMIT;"; } |
        psql_ >/dev/null
done

log "filling it: $responses replies over $days days, one in four with a delivered follow-up"
fill_started=$SECONDS
psql_ <<SQL
INSERT INTO apps (id, name) VALUES ('bench', 'Bench');
INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, category_identifier,
    notification_identifier, user_info, device_token, responded_at, received_at, outcome, rule_id, subject, answer)
SELECT 'bench',
    encode(overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send((extract(epoch FROM t) * 1000)::int8) FROM 3)
        FROM 1 FOR 6), 'hex')::uuid,
    CASE WHEN t > now() - interval '1 day' THEN 'key-' || n END, sha256(('k' || n)::bytea), 'accept', 'event-invite',
    'invite-' || n % 20000,
    '{"aps": {"alert": {"title": "Rooftop party", "body": "Saturday 8pm at the Rooftop"}, "category": "event-invite", "mutable-content": 1, "thread-id": "calendar"}, "eventId": 4242, "calendarId": "team-1", "location": "Rooftop", "startsAt": "2026-11-28T20:00:00Z", "organizer": {"id": "u-31", "tier": "standard"}, "recurring": false, "attendees": 12}',
    '0000100000001000000010000000100000001000000010000000100000001000', t, t,
    CASE WHEN n % 4 = 0 THEN 'accepted' ELSE 'unmatched' END, CASE WHEN n % 4 = 0 THEN 'invite-accept' END,
    (n % 20000)::text,
    '{"id":"0b6f3c1e-6f0c-4f6e-9a55-2f1d8e1c7a10","outcome":"accepted","ruleId":"invite-accept","subject":"4242","followUps":[]}'
FROM generate_series(1, $responses) AS n,
    LATERAL (SELECT now() - make_interval(days => $days) + (n::float8 / $responses) * make_interval(days => $days) AS t) AS x;
INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, attempt, created_at,
    updated_at)
SELECT app_id, gen_random_uuid(), id, 0, 'webhook', '{"body": {"event": "invite.accepted", "eventId": 4242}}',
    received_at, 'delivered', 1, received_at, received_at + interval '50 milliseconds'
FROM responses WHERE outcome = 'accepted';
INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, http_status, duration_ms,
    due_at)
SELECT app_id, id, 1, updated_at, updated_at, 'delivered', 204, 40, due_at FROM followups;
VACUUM ANALYZE;
SQL
log "filled in $((SECONDS - fill_started)) s"
counts() {
    psql_ -c "SELECT (SELECT count(*) FROM responses) || ' ' || (SELECT count(*) FROM followups) || ' ' ||
        (SELECT count(*) FROM delivery_attempts)"
}
before="$(counts)"
size_before="$(psql_ -c "SELECT pg_size_pretty(pg_database_size(current_database()))")"

log "actionhook migrate"
started="$(date +%s.%N)"
DATABASE_URL="$url" "$binary" migrate >"$work/migrate.log" 2>&1 || {
    cat "$work/migrate.log" >&2
    exit 1
}
elapsed="$(echo "$(date +%s.%N) - $started" | bc)"
after="$(counts)"
partitions="$(psql_ -c "SELECT count(*) FROM actionhook_partitions")"
keys="$(psql_ -c "SELECT count(*) FROM idempotency_keys")"
if [[ "$before" != "$after" ]]; then
    log "rows before (responses, follow-ups, attempts): $before; after: $after"
    exit 1
fi
read -r response_rows followup_rows attempt_rows <<<"$after"
printf '%-40s %s\n' "database before" "$size_before" \
    "responses, follow-ups, attempts" "$response_rows, $followup_rows, $attempt_rows (all kept)" \
    "idempotency keys moved" "$keys" \
    "partitions made" "$partitions" \
    "actionhook migrate (s, writes wait)" "$(printf '%.1f' "$elapsed")"
