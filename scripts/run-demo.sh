#!/usr/bin/env bash
# The first run that shows a delivery (scripts/run.sh calls this once the binary is built, the database
# is up and DATABASE_URL and ACTIONHOOK_ADMIN_TOKEN are set):
#
#   1. `actionhook inbox` on ACTIONHOOK_INBOX_PORT (default 8081), with the secret in .local/inbox-secret;
#   2. `actionhook serve --migrate` on ACTIONHOOK_PORT (default 8080) with ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1,
#      for this local instance only, so that it may deliver to the inbox on this machine;
#   3. the demo app `demo` (created once, its webhook aimed at the inbox; a category and a rule), its
#      ingest key kept in .local/demo-ingest-key;
#   4. prints the console's address, the admin token, the ingest key and a reply to send.
#
# Both processes stop together on Ctrl-C. Extra arguments go to `actionhook serve`.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

: "${DATABASE_URL:?run-demo: DATABASE_URL is not set (make run sets it)}"
: "${ACTIONHOOK_ADMIN_TOKEN:?run-demo: ACTIONHOOK_ADMIN_TOKEN is not set (make run sets it)}"
binary="${ACTIONHOOK_BINARY:-.build/release/actionhook}"
port="${ACTIONHOOK_PORT:-8080}"
inbox_port="${ACTIONHOOK_INBOX_PORT:-8081}"
base="http://localhost:$port"

mkdir -p .local
secret_file=.local/inbox-secret
if [[ ! -s "$secret_file" ]]; then
    (
        umask 077
        printf 'whsec_%s' "$(head -c 32 /dev/urandom | base64 -w0)" >"$secret_file"
    )
fi
inbox_secret="$(<"$secret_file")"

inbox_pid=
serve_pid=
stop_all() {
    [[ -n "$serve_pid" ]] && kill -TERM "$serve_pid" 2>/dev/null
    [[ -n "$inbox_pid" ]] && kill -TERM "$inbox_pid" 2>/dev/null
    wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The secret goes through the environment, not the command line, so other users' `ps` does not show it.
ACTIONHOOK_INBOX_SECRET="$inbox_secret" "$binary" inbox --port "$inbox_port" &
inbox_pid=$!

ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 "$binary" serve --migrate "$@" &
serve_pid=$!

waited=0
until curl -fsS -o /dev/null --max-time 2 "$base/readyz" 2>/dev/null; do
    kill -0 "$serve_pid" 2>/dev/null || {
        echo "run: the service exited before it was ready (see its log above)" >&2
        exit 1
    }
    kill -0 "$inbox_pid" 2>/dev/null || {
        echo "run: the inbox exited (is port $inbox_port taken? set ACTIONHOOK_INBOX_PORT)" >&2
        exit 1
    }
    ((waited < 600)) || {
        echo "run: the service was not ready within 60 s" >&2
        exit 1
    }
    sleep 0.1
    waited=$((waited + 1))
done

# Admin calls; prints the body, fails on a status outside `expected`.
admin() {
    local method="$1" path="$2" body="$3" expected="$4" answer status data=()
    answer="$(mktemp)"
    if [[ -n "$body" ]]; then
        data=(--data "$body")
    fi
    status="$(curl -sS -o "$answer" -w '%{http_code}' --max-time 10 -X "$method" "$base$path" \
        -H "Authorization: Bearer $ACTIONHOOK_ADMIN_TOKEN" -H 'Content-Type: application/json' "${data[@]}")"
    if [[ " $expected " != *" $status "* ]]; then
        echo "run: $method $path answered $status: $(head -c 300 "$answer")" >&2
        rm -f "$answer"
        return 1
    fi
    cat "$answer"
    rm -f "$answer"
}
json_field() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]][sys.argv[2]])' "$1" "$2"
}

webhook="{\"url\": \"http://127.0.0.1:$inbox_port/demo\", \"secret\": \"$inbox_secret\"}"
key_file=.local/demo-ingest-key
status="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$base/v1/apps/demo" \
    -H "Authorization: Bearer $ACTIONHOOK_ADMIN_TOKEN")"
if [[ "$status" == 404 ]]; then
    created="$(admin POST /v1/apps "{\"id\": \"demo\", \"name\": \"Demo\", \"webhook\": $webhook}" 201)"
    (
        umask 077
        json_field ingestKey secret <<<"$created" >"$key_file"
    )
else
    # The inbox's port or secret may have changed since the app was made.
    admin PATCH /v1/apps/demo "{\"webhook\": $webhook}" 200 >/dev/null
    key_status=000
    if [[ -s "$key_file" ]]; then
        key_status="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$base/v1/categories" \
            -H "Authorization: Bearer $(<"$key_file")")"
    fi
    if [[ "$key_status" != 200 ]]; then
        created="$(admin POST /v1/apps/demo/keys '' 201)"
        (
            umask 077
            python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])' <<<"$created" >"$key_file"
        )
    fi
fi
ingest_key="$(<"$key_file")"

# The demo app is the calendar invite of examples/calendar.yaml, applied as a team would apply it, with
# its webhook pointed at the inbox. Its APNs confirmation stays dead (no_apns_credentials) until the app
# has APNs credentials: the console shows it under Follow-ups, with its retry.
demo_dir="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-demo.XXXXXX")"
sed -e 's/^app: acme-calendar$/app: demo/' -e 's/^name: Acme Calendar$/name: Demo/' \
    -e "s|^  url: https://hooks.acme.example/actionhook\$|  url: http://127.0.0.1:$inbox_port/demo|" \
    examples/calendar.yaml >"$demo_dir/demo.yaml"
if ! ACTIONHOOK_URL="$base" "$binary" apply -f "$demo_dir/demo.yaml" >"$demo_dir/apply.log" 2>&1; then
    cat "$demo_dir/apply.log" >&2
    rm -rf "$demo_dir"
    echo "run-demo: applying examples/calendar.yaml to the demo app failed" >&2
    exit 1
fi
rm -rf "$demo_dir"

# A notification ActionHook sends itself, with the demo app's server key: an invite to one device (a made-up
# token; without APNs credentials its push ends dead, no_apns_credentials, and the receipt says so) whose
# no-reply step sends `notification.unanswered` to the inbox 20 s later, unless it is answered first.
server_key_file=.local/demo-server-key
server_key_status=000
if [[ -s "$server_key_file" ]]; then
    server_key_status="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$base/v1/apps/demo/notifications?limit=1" \
        -H "Authorization: Bearer $(<"$server_key_file")")"
fi
if [[ "$server_key_status" != 200 ]]; then
    created="$(admin POST /v1/apps/demo/keys '{"scope": "send"}' 201)"
    (
        umask 077
        python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])' <<<"$created" >"$server_key_file"
    )
fi
server_key="$(<"$server_key_file")"
demo_token="$(printf 'de%.0s' {1..32})"
sent="$(curl -sS --max-time 10 -X POST "$base/v1/apps/demo/notifications" -H "Authorization: Bearer $server_key" \
    -H 'Content-Type: application/json' -d "{\"to\": [{\"deviceToken\": \"$demo_token\", \"recipient\": \"alice\"}],
      \"category\": \"event-invite\", \"aps\": {\"alert\": {\"title\": \"Rooftop party\", \"body\": \"Friday at 8?\"}},
      \"userInfo\": {\"eventId\": \"42\", \"location\": \"the rooftop\"}, \"subject\": \"42\", \"ttlSeconds\": 3600,
      \"webhookEvents\": [\"answered\"], \"onNoReply\": [{\"afterSeconds\": 20, \"followUps\": [{\"type\": \"webhook\"}]}]}")"
notification_id="$(python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' <<<"$sent")" || {
    echo "run-demo: the demo send was refused: $(head -c 300 <<<"$sent")" >&2
    exit 1
}

cat <<EOF

================================================================================================
 ActionHook is running.
   console      $base/console
   admin token  $ACTIONHOOK_ADMIN_TOKEN
   demo app     demo; ingest key $ingest_key
   inbox        http://127.0.0.1:$inbox_port/ prints every webhook below, its signature checked

 Send the reply a phone would send:

   curl -s -H "Authorization: Bearer $ingest_key" -H "Content-Type: application/json" \\
     $base/v1/responses -d '{"actionIdentifier": "accept",
       "userInfo": {"aps": {"category": "event-invite"}, "eventId": "42"}}'

 ActionHook also sent notification $notification_id (server key in $server_key_file).
 Nobody answers it: in 20 s the inbox prints notification.unanswered. To answer it first, as the
 phone would (the push's userInfo carries the "actionhook" key):

   curl -s -H "Authorization: Bearer $ingest_key" -H "Content-Type: application/json" \\
     $base/v1/responses -d '{"actionIdentifier": "accept", "deviceToken": "$demo_token",
       "userInfo": {"aps": {"category": "event-invite"}, "eventId": "42",
                    "actionhook": {"n": "$notification_id", "d": 0, "r": "alice"}}}'

 Its receipt (the push is dead without APNs credentials; the answer, or the step that fired):

   curl -s -H "Authorization: Bearer \$(cat $server_key_file)" $base/v1/apps/demo/notifications/$notification_id

 Ctrl-C stops the service and the inbox (the database keeps running: make stop-db).
================================================================================================

EOF

wait "$serve_pid"
