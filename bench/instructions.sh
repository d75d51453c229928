#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: the same count on every run, so two builds
# can be compared where wall-clock runs on this machine move by 15 % from one to the next.
#
#   bench/instructions.sh [BINARY...]     default: .build-bench/release/actionhook
#
# For each binary and each kind of request, starts the binary under callgrind (two HTTP threads) on a
# throwaway PostgreSQL, sets up the benchmark app (bench/setup-app.sh), sends 200 requests to warm up,
# zeroes the counters, sends BENCH_REQUESTS (2,000) more one after the other on one keep-alive
# connection, stops it and prints the count divided by the requests:
#   reject   the 422 body of bench/lua/ingest.lua; counted inside the request callback (the HTTP
#            thread's work for a request, libmicrohttpd's parsing and the kernel excluded)
#   ingest   the durable accept of bench/lua/ingest.lua; counted in the whole process (HTTP thread and
#            writer, libpq included; one request at a time, so every batch holds one response)
# Needs valgrind (installed when missing) and the binaries built; the binaries are stripped of debug
# information into a temporary folder first (callgrind cannot read Swift's).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
requests="${BENCH_REQUESTS:-2000}"
[[ "$requests" =~ ^[0-9]+$ && "$requests" -gt 0 ]] || { echo "instructions: BENCH_REQUESTS must be a positive integer" >&2; exit 2; }
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=("$repo_root/.build-bench/release/actionhook")
for binary in "${binaries[@]}"; do
    [[ -x "$binary" ]] || { echo "instructions: $binary is not an executable (build it first)" >&2; exit 2; }
done

if ! command -v valgrind >/dev/null || ! command -v python3 >/dev/null || ! command -v curl >/dev/null; then
    [[ "$(id -u)" -eq 0 ]] || { echo "instructions: install valgrind, python3 and curl" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind python3 curl >/dev/null
fi

work="$(mktemp -d /tmp/actionhook-instructions.XXXXXX)"
pg_dir="$work/pg"
pg_port="${BENCH_PG_PORT:-55442}"
port=18095
admin_token="instructions-admin-token-0123456789abcdef"
server_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    bash scripts/pg-local.sh destroy "$pg_dir" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
bash scripts/pg-local.sh start "$pg_dir" "$pg_port" >/dev/null

# One keep-alive connection, one request after another: BODY_KIND, COUNT, KEY.
cat >"$work/client.py" <<'PY'
import http.client, sys, time
kind, count, key, port = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
user_info = ('"userInfo":{"aps":{"alert":{"title":"Rooftop party","body":"Saturday 8pm at the Rooftop"},'
             '"category":"event-invite","mutable-content":1,"thread-id":"calendar"},"eventId":%d,'
             '"calendarId":"team-%d","location":"Rooftop","startsAt":"2026-11-28T20:00:00Z",'
             '"organizer":{"id":"u-%d","tier":"standard"},"recurring":false,"attendees":12}')
head = {'reject': '"actionIdentifier":"comment","categoryIdentifier":"event-invite","notificationIdentifier":"invite-1-%d","userText":"   ",',
        'ingest': '"actionIdentifier":"accept","categoryIdentifier":"event-invite","notificationIdentifier":"invite-1-%d",'}[kind]
template = '{' + head + user_info + ',"deviceToken":"%s","respondedAt":"2026-11-20T10:00:00.000Z"}'
expected = {'reject': 422, 'ingest': 202}[kind]
nonce = time.time_ns()
connection = http.client.HTTPConnection('127.0.0.1', port)
for i in range(count):
    body = template % (i, i % 20000, i % 7, i % 97, '%08x' % (4096 + i % 512) * 8)
    connection.request('POST', '/v1/responses', body=body, headers={
        'Content-Type': 'application/json', 'Authorization': 'Bearer ' + key,
        'Idempotency-Key': 'instructions-%d-%d' % (nonce, i)})
    answer = connection.getresponse()
    answer.read()
    if answer.status != expected:
        sys.exit('instructions: expected %d, got %d' % (expected, answer.status))
PY

measure() { # binary kind label
    local binary="$1" kind="$2" label="$3" out="$work/callgrind.out" collect
    collect=(--collect-atstart=yes)
    [[ "$kind" == reject ]] && collect=(--collect-atstart=no "--toggle-collect=*mhdAccess*")
    psql -h 127.0.0.1 -p "$pg_port" -U postgres -qX -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS instructions" \
        -c "CREATE DATABASE instructions" >/dev/null
    env DATABASE_URL="postgresql://postgres@127.0.0.1:$pg_port/instructions" ACTIONHOOK_HOST=127.0.0.1 \
        ACTIONHOOK_PORT="$port" ACTIONHOOK_ADMIN_TOKEN="$admin_token" ACTIONHOOK_WORKER=0 \
        ACTIONHOOK_RATE_LIMIT_PER_SECOND=1000000 ACTIONHOOK_DEVICE_RATE_LIMIT_PER_SECOND=1000000 \
        ACTIONHOOK_HTTP_THREADS=2 ACTIONHOOK_LOG_LEVEL=warning \
        valgrind --tool=callgrind --callgrind-out-file="$out" "${collect[@]}" "$binary" serve --migrate \
        >"$work/server.log" 2>&1 &
    server_pid=$!
    local waited=0
    until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
        sleep 0.5
        waited=$((waited + 1))
        if ! kill -0 "$server_pid" 2>/dev/null || [[ $waited -ge 240 ]]; then
            tail -5 "$work/server.log" >&2
            exit 1
        fi
    done
    local key
    key="$(bash bench/setup-app.sh "http://127.0.0.1:$port" "$admin_token" bench)"
    python3 "$work/client.py" "$kind" 200 "$key" "$port"
    callgrind_control -z "$server_pid" >/dev/null 2>&1
    python3 "$work/client.py" "$kind" "$requests" "$key" "$port"
    kill -INT "$server_pid"
    wait "$server_pid" || true
    server_pid=""
    local total
    total="$(awk '/^(summary|totals):/ { print $2; exit }' "$out")"
    printf '%-8s %10d instructions per request   %s\n' "$kind" "$((total / requests))" "$label"
}

index=0
for binary in "${binaries[@]}"; do
    # A folder per binary: the SQL migrations travel in the resource bundles next to it, and each build
    # must find its own (a shared folder gave every binary after the first the first one's migrations).
    index=$((index + 1))
    folder="$work/binary-$index"
    mkdir -p "$folder"
    stripped="$folder/$(basename "$binary")"
    strip --strip-debug -o "$stripped" "$binary"
    for bundle in "$(dirname "$binary")"/*.resources; do
        if [[ -e "$bundle" ]]; then ln -s "$bundle" "$folder/"; fi
    done
    for kind in reject ingest; do measure "$stripped" "$kind" "$binary"; done
done
