#!/usr/bin/env bash
# `make compose-check`: runs "With Docker" (README.md and docs/operations.md) for real, with the unchanged docker-compose.yml and
# Dockerfile, and checks what a newcomer would: the stack builds and starts, answers /healthz and /readyz,
# takes an app, a rule and one reply, and delivers the rule's webhook, signed, to the demo inbox.
#
# The engine is podman (rootful, runc, no systemd needed) behind its Docker-compatible API socket, driven by
# Debian's docker-compose 1.29, all installed through scripts/install-deps.sh. The base images come from
# the registry when it answers. Where no image registry is reachable, this script builds stand-ins for them
# from Debian's archive and this machine's own Swift toolchain, and says so:
#   debian:bookworm-slim     debootstrap --variant=minbase bookworm
#   swift:6.3.1-bookworm     (the Dockerfile's SWIFT_IMAGE default) scripts/base-images/swift: that slim image,
#                            the official image's Debian packages and the toolchain in /opt/swift copied to /usr
#                            as the official image has it, with this machine's Swift package mirror
#   postgres:15              scripts/base-images/postgres: Debian's postgresql-15 and a small entrypoint
# The stand-ins are kept between runs (COMPOSE_CHECK_REMOVE_IMAGES=1 removes them and the built images).
#
# Everything it starts is removed on exit, whatever the outcome: the compose project's containers, network
# and volume, and the podman API service. A run's logs are in .build-compose/ (build, compose, services).
#
# Takes long: the image build compiles ActionHook in release mode inside a container (about 20 minutes on
# two cores; the stand-ins take some 6 more the first time). CI runs only scripts/check-image-resolve.sh,
# the Dockerfile's dependencies stage, up to `swift package resolve`.
#
# Environment: COMPOSE_CHECK_PORT and COMPOSE_CHECK_INBOX_PORT (default 8080 and 8081, or free ports when
# those are taken) are the ports published on 127.0.0.1; COMPOSE_CHECK_TIMEOUT (default 3600) bounds the
# build and start in seconds.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# shellcheck source=scripts/container-engine.sh
source scripts/container-engine.sh

project=actionhook-compose-check
log_dir="$repo_root/.build-compose"
timeout_seconds="${COMPOSE_CHECK_TIMEOUT:-3600}"
started=$SECONDS
health_pid=
stack_started=0

log() { echo "compose-check: $*" >&2; }
die() {
    log "FAILED: $*"
    exit 1
}

mkdir -p "$log_dir"
rm -f "$log_dir"/*.log
log "installing podman, docker-compose and debootstrap if missing (scripts/install-deps.sh)"
bash scripts/install-deps.sh --with "${engine_packages[@]}" docker-compose curl python3 openssl >/dev/null

# port_or_free PORT: PORT when nothing on 127.0.0.1 holds it, else a free one.
port_or_free() {
    if python3 -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null; then
        echo "$1"
    else
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    fi
}

port="$(port_or_free "${COMPOSE_CHECK_PORT:-8080}")"
inbox_port="$(port_or_free "${COMPOSE_CHECK_INBOX_PORT:-8081}")"
export ACTIONHOOK_PUBLISH_PORT="$port" ACTIONHOOK_INBOX_PUBLISH_PORT="$inbox_port"
ACTIONHOOK_ADMIN_TOKEN="$(openssl rand -hex 32)"
ACTIONHOOK_INBOX_SECRET="whsec_$(openssl rand -base64 32)"
export ACTIONHOOK_ADMIN_TOKEN ACTIONHOOK_INBOX_SECRET ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1
base="http://127.0.0.1:$port"

compose() {
    docker-compose --project-name "$project" --profile demo "$@"
}

teardown() {
    local status=$?
    trap - EXIT INT TERM
    if [[ -n "$health_pid" ]]; then
        kill "$health_pid" 2>/dev/null || true
        wait "$health_pid" 2>/dev/null || true
    fi
    if ((stack_started)); then
        if ((status != 0)); then
            compose ps >&2 2>/dev/null || true
            compose logs --no-color >"$log_dir/services.log" 2>&1 || true
            log "the services' logs are in ${log_dir#"$repo_root"/}/services.log; the last lines:"
            tail -n 40 "$log_dir/services.log" >&2 || true
        fi
        local remove_images=()
        if [[ "${COMPOSE_CHECK_REMOVE_IMAGES:-0}" == 1 ]]; then
            remove_images=(--rmi local)
        fi
        compose down --volumes --remove-orphans --timeout 10 "${remove_images[@]}" >>"$log_dir/compose.log" 2>&1 ||
            log "docker-compose down failed (see ${log_dir#"$repo_root"/}/compose.log)"
    fi
    if [[ -n "${DOCKER_HOST:-}" && "${COMPOSE_CHECK_REMOVE_IMAGES:-0}" == 1 ]]; then
        remove_base_images
    fi
    engine_stop
    if ((status == 0)); then
        log "OK after $((SECONDS - started))s"
    else
        log "failed after $((SECONDS - started))s (exit $status)"
    fi
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the engine and the base images ----------------------------------------------------------------------

engine_start "$log_dir"
log "podman $(podman version --format '{{.Client.Version}}') serves the Docker API on $DOCKER_HOST"

swift_image="$(sed -n 's/^ARG SWIFT_IMAGE=//p' Dockerfile)"
[[ -n "$swift_image" ]] || die "the Dockerfile names no ARG SWIFT_IMAGE default"
ensure_base_image debian:bookworm-slim
ensure_base_image "$swift_image"
ensure_base_image postgres:15

# --- the stack -------------------------------------------------------------------------------------------

stack_started=1
# Without systemd, podman runs no health checks of its own (it schedules them with systemd timers), and
# docker-compose would wait for a healthy postgres for ever: this loop runs each container's check every
# two seconds, as the timer would.
if [[ ! -d /run/systemd/system ]]; then
    (
        while sleep 2; do
            for id in $(podman ps --quiet --filter "label=com.docker.compose.project=$project" 2>/dev/null); do
                podman healthcheck run "$id" >/dev/null 2>&1 || true
            done
        done
    ) &
    health_pid=$!
fi

log "docker-compose --profile demo up -d --build (log: ${log_dir#"$repo_root"/}/compose.log)"
build_started=$SECONDS
if ! timeout "$timeout_seconds" docker-compose --project-name "$project" --profile demo up -d --build \
    >"$log_dir/compose.log" 2>&1; then
    tail -n 60 "$log_dir/compose.log" >&2
    die "docker-compose up --build failed"
fi
log "built and started in $((SECONDS - build_started))s"

wait_for() {
    local path="$1" deadline=$((SECONDS + 120))
    until curl -fsS -o /dev/null --max-time 2 "$base$path" 2>/dev/null; do
        ((SECONDS < deadline)) || die "$base$path did not answer 2xx within 120 s"
        sleep 1
    done
    log "$path answers: $(curl -sS --max-time 2 "$base$path")"
}
wait_for /healthz
wait_for /readyz

# The health check of the image (HEALTHCHECK) must hold too: the service's container turns healthy.
deadline=$((SECONDS + 60))
until [[ "$(podman inspect --format '{{.State.Health.Status}}' "${project}_actionhook_1" 2>/dev/null)" == healthy ]]; do
    ((SECONDS < deadline)) || die "the actionhook container is not healthy by the image's HEALTHCHECK within 60 s"
    sleep 1
done
log "the actionhook container is healthy by the image's own HEALTHCHECK"

# --- one app, one rule, one reply, one signed webhook ----------------------------------------------------

# call METHOD PATH TOKEN BODY EXPECTED: prints the answer's body, fails on a status not in EXPECTED (one or
# more, separated by spaces).
call() {
    local method="$1" path="$2" token="$3" body="$4" expected="$5" answer status data=()
    answer="$(mktemp)"
    if [[ -n "$body" ]]; then
        data=(--data "$body")
    fi
    status="$(curl -sS -o "$answer" -w '%{http_code}' --max-time 10 -X "$method" "$base$path" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "${data[@]}")"
    if [[ " $expected " != *" $status "* ]]; then
        log "$method $path answered $status: $(head -c 400 "$answer")"
        rm -f "$answer"
        return 1
    fi
    cat "$answer"
    rm -f "$answer"
}
json() {
    python3 -c 'import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1:]:
    value = value[int(key) if isinstance(value, list) else key]
print(value)' "$@"
}

app=compose-check
webhook="{\"url\": \"http://inbox:8081/$app\", \"secret\": \"$ACTIONHOOK_INBOX_SECRET\"}"
created="$(call POST /v1/apps "$ACTIONHOOK_ADMIN_TOKEN" \
    "{\"id\": \"$app\", \"name\": \"Compose check\", \"webhook\": $webhook}" 201)" ||
    die "creating the app failed"
ingest_key="$(json ingestKey secret <<<"$created")"
call PUT "/v1/apps/$app/categories/event-invite" "$ACTIONHOOK_ADMIN_TOKEN" \
    '{"actions": [{"identifier": "accept", "title": "Accept"}], "subjectKey": "eventId"}' '200 201' >/dev/null ||
    die "creating the category failed"
call POST "/v1/apps/$app/rules" "$ACTIONHOOK_ADMIN_TOKEN" '{"id": "invite-accept", "priority": 100,
    "match": {"category": "event-invite", "action": "accept"}, "handler": {"type": "accept"},
    "followUps": [{"channel": "webhook", "body": {"event": "invite.accepted", "eventId": "{{userInfo.eventId}}"}}]}' \
    201 >/dev/null || die "creating the rule failed"
log "app $app with a category and a rule whose follow-up is a webhook to the inbox"

reply="$(call POST /v1/responses "$ingest_key" '{"actionIdentifier": "accept",
    "userInfo": {"aps": {"category": "event-invite"}, "eventId": "42"}}' 202)" || die "the reply was not accepted"
followup="$(json followUps 0 id <<<"$reply")"
log "reply accepted ($(json outcome <<<"$reply"), rule $(json ruleId <<<"$reply")); follow-up $followup"

deadline=$((SECONDS + 60))
until call GET "/v1/apps/$app/followups?status=delivered" "$ACTIONHOOK_ADMIN_TOKEN" '' 200 |
    grep -q "\"$followup\""; do
    ((SECONDS < deadline)) || {
        call GET "/v1/apps/$app/followups" "$ACTIONHOOK_ADMIN_TOKEN" '' 200 >&2 || true
        die "the follow-up $followup is not delivered within 60 s"
    }
    sleep 1
done
log "the admin API lists follow-up $followup as delivered"

webhook_id="$(tr '[:upper:]' '[:lower:]' <<<"$followup")"
deadline=$((SECONDS + 30))
until compose logs --no-color inbox 2>/dev/null | grep -q "webhook $webhook_id at [0-9]* on /$app: valid signature"; do
    ((SECONDS < deadline)) || {
        compose logs --no-color inbox >&2 || true
        die "the inbox did not log webhook $webhook_id with a valid signature"
    }
    sleep 1
done
compose logs --no-color inbox 2>/dev/null | grep -A 5 "webhook $webhook_id" >&2 || true
log "the inbox received webhook $webhook_id with a valid signature"
