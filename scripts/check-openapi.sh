#!/usr/bin/env bash
# Checks openapi.yaml, then fuzzes the real server with it (the F2 bar: no 5xx on any request).
#
#   1. openapi-spec-validator: the spec is valid OpenAPI 3.1.
#   2. schemathesis against `actionhook serve --migrate` on a free port, over a fresh database
#      `schemathesis_<random>` created beside ACTIONHOOK_TEST_DATABASE_URL (required) and dropped on exit.
#      First it creates the app `st-app` and seeds it from the spec's examples (categories, rules,
#      ingests), plus `st-patch` and `st-delete`, the only apps PATCH and DELETE /v1/apps/{app} touch.
#      Admin routes get the admin token and ingest routes st-app's ingest key, each by its security
#      scheme (auth.openapi in a generated schemathesis.toml). About 1-2 minutes on 2 cores.
#
# The tools come from .build-tools/venv (scripts/install-deps.sh --ci): required in CI, installed here
# when missing elsewhere. Settings: ACTIONHOOK_BINARY (default .build/debug/actionhook),
# ACTIONHOOK_OPENAPI_MAX_EXAMPLES (30 per operation and phase), ACTIONHOOK_OPENAPI_CHECKS (default
# not_a_server_error,response_schema_conformance), ACTIONHOOK_OPENAPI_SEED, ACTIONHOOK_OPENAPI_TIMEOUT
# (seconds for the schemathesis run, default 600), ACTIONHOOK_OPENAPI_LIVE=0 (validate only, never in CI).
# Logs in .build/test-logs/: openapi-server.log, schemathesis.log, openapi-metrics.txt (the server's
# request counts by route and status after the run).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

in_ci=0
if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
    in_ci=1
fi

note() { echo "check-openapi: $*" >&2; }
die() {
    note "$*"
    exit 1
}

spec="$repo_root/openapi.yaml"
venv_bin="$repo_root/.build-tools/venv/bin"
validator="$venv_bin/openapi-spec-validator"
schemathesis="$venv_bin/schemathesis"
log_dir="$repo_root/.build/test-logs"
server_log="$log_dir/openapi-server.log"
run_log="$log_dir/schemathesis.log"
binary="${ACTIONHOOK_BINARY:-$repo_root/.build/debug/actionhook}"
max_examples="${ACTIONHOOK_OPENAPI_MAX_EXAMPLES:-30}"
checks="${ACTIONHOOK_OPENAPI_CHECKS:-not_a_server_error,response_schema_conformance}"
run_timeout="${ACTIONHOOK_OPENAPI_TIMEOUT:-600}"
started=$SECONDS

[[ -f "$spec" ]] || die "openapi.yaml is missing"
[[ "$max_examples" =~ ^[1-9][0-9]*$ ]] || die "ACTIONHOOK_OPENAPI_MAX_EXAMPLES must be a positive integer"
[[ "$run_timeout" =~ ^[1-9][0-9]*$ ]] || die "ACTIONHOOK_OPENAPI_TIMEOUT must be a positive integer"

# --- the tools ---------------------------------------------------------------------------------------
if [[ ! -x "$validator" || ! -x "$schemathesis" ]]; then
    if ((in_ci)); then
        die "openapi-spec-validator and schemathesis are required in CI (scripts/install-deps.sh --ci installs them into .build-tools/venv)"
    fi
    note "installing the PyPI tools into .build-tools/venv (scripts/install-deps.sh --ci)"
    bash scripts/install-deps.sh --ci ||
        die "could not install the tools; run scripts/install-deps.sh --ci (needs python3-venv and network access)"
    [[ -x "$validator" && -x "$schemathesis" ]] || die "scripts/install-deps.sh --ci did not install the tools"
fi

# --- 1. the spec -------------------------------------------------------------------------------------
"$validator" "$spec" >/dev/null || die "openapi.yaml is not a valid OpenAPI document (see above)"
echo "check-openapi: openapi.yaml is valid"

if [[ "${ACTIONHOOK_OPENAPI_LIVE:-1}" == 0 ]]; then
    ((in_ci == 0)) || die "ACTIONHOOK_OPENAPI_LIVE=0 is not allowed in CI"
    echo "check-openapi: OK (spec valid; live run skipped by ACTIONHOOK_OPENAPI_LIVE=0)"
    exit 0
fi

# --- 2. the live run ---------------------------------------------------------------------------------
[[ -n "${ACTIONHOOK_TEST_DATABASE_URL:-}" ]] ||
    die "ACTIONHOOK_TEST_DATABASE_URL is not set (scripts/test.sh sets it; or set ACTIONHOOK_OPENAPI_LIVE=0 to validate only)"
[[ -x "$binary" ]] || die "$binary is missing; build it first (swift build)"
for tool in curl python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is required"
done
psql="$(command -v psql || true)"
if [[ -z "$psql" ]]; then
    psql="${ACTIONHOOK_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"
    [[ -x "$psql" ]] || die "psql is required (scripts/install-deps.sh installs postgresql)"
fi
mkdir -p "$log_dir"

# shellcheck source=scripts/live-service.sh
source scripts/live-service.sh

work_dir="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-openapi.XXXXXX")"

cleanup() {
    local status=$?
    live_service_stop
    rm -rf "$work_dir"
    if ((status != 0)); then
        note "FAILED after $((SECONDS - started))s (exit $status); server log: ${server_log#"$repo_root"/}"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The worker is off: fuzzed sends and rules name webhook URLs of every kind, which nothing should call.
live_service_start schemathesis ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 ACTIONHOOK_RATE_LIMIT_PER_SECOND=100000 \
    ACTIONHOOK_DEVICE_RATE_LIMIT_PER_SECOND=100000 ACTIONHOOK_WORKER=0
echo "check-openapi: server ready at $base_url (database $database)"

create_app() {
    local body="$1" answer="$2" status
    status="$(curl -sS -o "$answer" -w '%{http_code}' --max-time 10 -X POST "$base_url/v1/apps" \
        -H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' --data "$body")" ||
        die "POST /v1/apps failed"
    [[ "$status" == 201 ]] || die "POST /v1/apps $body answered $status, expected 201"
}
# The app the ingest routes run as (its ingest key is in the 201 answer only), and the apps that
# PATCH /v1/apps/{app} and DELETE /v1/apps/{app} get instead of it.
create_app '{"id":"st-app","name":"Schemathesis"}' "$work_dir/app.json"
create_app '{"id":"st-patch","name":"Schemathesis PATCH target"}' "$work_dir/patch-app.json"
create_app '{"id":"st-delete","name":"Schemathesis DELETE target"}' "$work_dir/delete-app.json"
ingest_key="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ingestKey"]["secret"])' \
    "$work_dir/app.json")" || die "the POST /v1/apps answer has no ingestKey.secret"
[[ -n "$ingest_key" ]] || die "the POST /v1/apps answer has an empty ingestKey.secret"

# Seed st-app from the spec's own examples (categories, rules, then the ingest bodies through its key),
# so the history and follow-up routes have objects to find; each must succeed, which also checks the
# examples against the server. Prints the schemathesis entry that aims those routes at the seeded ids.
ACTIONHOOK_ST_ADMIN_TOKEN="$admin_token" ACTIONHOOK_ST_INGEST_KEY="$ingest_key" \
    "$venv_bin/python" - "$spec" "$base_url" >"$work_dir/seeded.toml" <<'PY' || die "seeding st-app from the spec's examples failed"
import json
import os
import sys
import urllib.error
import urllib.request

import yaml

spec_path, base = sys.argv[1], sys.argv[2]
examples = yaml.safe_load(open(spec_path, encoding="utf-8"))["components"]["examples"]
admin = os.environ["ACTIONHOOK_ST_ADMIN_TOKEN"]
ingest = os.environ["ACTIONHOOK_ST_INGEST_KEY"]


def call(method, path, token, name):
    body = json.dumps(examples[name]["value"]).encode()
    request = urllib.request.Request(
        base + path, data=body, method=method,
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        sys.exit(f"check-openapi: {method} {path} with example {name} answered {error.code}: {error.read()[:300]!r}")


for name, category in (("CategoryEventInvite", "event-invite"), ("CategoryTimerExpired", "TIMER_EXPIRED")):
    call("PUT", "/v1/apps/st-app/categories/" + category, admin, name)
for name in ("RuleInviteAccept", "RuleInviteDecline", "RuleInviteComment", "RuleTimerSnooze", "RuleRecordDefault"):
    call("POST", "/v1/apps/st-app/rules", admin, name)
responses, followups, subjects = [], [], []
for name in ("IngestInviteAccept", "IngestInviteDecline", "IngestInviteComment", "IngestTimerSnooze",
             "IngestDismiss", "IngestLegacyReply"):
    answer = call("POST", "/v1/responses", ingest, name)
    responses.append(answer["id"])
    followups += [followup["id"] for followup in answer["followUps"]]
    if answer["subject"] is not None and answer["subject"] not in subjects:
        subjects.append(answer["subject"])

# A sent notification (the spec's garage example, its category made first), so its receipt has one to find.
garage = examples["SendGarage"]["value"]
request = urllib.request.Request(
    base + "/v1/apps/st-app/categories/" + garage["category"], method="PUT",
    data=json.dumps({"actions": [{"identifier": "close", "title": "Close"}]}).encode(),
    headers={"Authorization": "Bearer " + admin, "Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=10).read()
notifications = [call("POST", "/v1/apps/st-app/notifications", admin, "SendGarage")["id"]]

parameters = ['"path.app" = "st-app"', '"path.responseId" = { dictionary = "responses", probability = 0.7 }',
              '"path.notificationId" = { dictionary = "notifications", probability = 0.7 }']
print("[dictionaries.responses]\nvalues = " + json.dumps(responses))
print("[dictionaries.notifications]\nvalues = " + json.dumps(notifications))
for key, values in (("followUpId", followups), ("subject", subjects)):
    if values:
        print(f"[dictionaries.{key}]\nvalues = " + json.dumps(values))
        parameters.append(f'"path.{key}" = {{ dictionary = "{key}", probability = 0.7 }}')
# First, as the first matching entry wins.
print("[[operations]]")
print('include-operation-id = ["getResponse", "cancelFollowUp", "retryFollowUp", "getSubjectDecisions", "getNotification"]')
print("parameters = { " + ", ".join(parameters) + " }")
print(f"# seeded {len(responses)} responses, {len(followups)} follow-ups, {len(subjects)} subjects", file=sys.stderr)
PY

# Credentials by security scheme; the secrets stay in the environment, not in the file. Path parameters
# name the existing apps (and the categories and rules the spec's examples create) most of the time, so
# the fuzzer reaches the handlers behind the 404s; st-app keeps its key and the server's rate limit.
cat >"$work_dir/schemathesis.toml" <<'TOML'
# One worker: with two, hypothesis's lambda descriptions hit a CPython 3.11 ast thread-safety bug
# ("AST constructor recursion depth mismatch") now and then.
workers = 1
continue-on-failure = true
request-timeout = 10

[cache]
enabled = false

[auth.openapi.adminToken]
bearer = "${ACTIONHOOK_ST_ADMIN_TOKEN}"

[auth.openapi.ingestKey]
bearer = "${ACTIONHOOK_ST_INGEST_KEY}"

[dictionaries.apps]
values = ["st-app"]

[dictionaries.categories]
values = ["event-invite", "TIMER_EXPIRED"]

[dictionaries.rules]
values = ["invite-accept", "invite-decline", "invite-comment", "timer-snooze", "record-open-dismiss"]
TOML
# Responses, follow-ups and decisions exist only in st-app: those routes always name it (so ids carried
# over from POST /v1/responses resolve too) and mostly the seeded ids.
cat "$work_dir/seeded.toml" >>"$work_dir/schemathesis.toml"
cat >>"$work_dir/schemathesis.toml" <<'TOML'

[[operations]]
include-path-regex = '^/v1/apps/\{app\}/'
parameters = { "path.app" = { dictionary = "apps", probability = 0.8 }, "path.category" = { dictionary = "categories", probability = 0.5 }, "path.rule" = { dictionary = "rules", probability = 0.5 } }

# Each include-* key of an entry is a filter of its own (they OR), so single operations go by operationId.
[[operations]]
include-operation-id = "getApp"
parameters = { "path.app" = { dictionary = "apps", probability = 0.8 } }

# Fixed values win over everything else, including ids the fuzzer read from earlier answers (GET /v1/apps
# lists st-app): PATCH and DELETE of an app only ever reach their own apps.
[[operations]]
include-operation-id = "updateApp"
parameters = { "path.app" = "st-patch" }

[[operations]]
include-operation-id = "deleteApp"
parameters = { "path.app" = "st-delete" }
TOML

run_args=(
    run "$spec"
    --url "$base_url"
    --checks "$checks"
    --max-examples "$max_examples"
    --generation-database none
    --suppress-health-check all
    --no-color
)
if [[ -n "${ACTIONHOOK_OPENAPI_SEED:-}" ]]; then
    run_args+=(--seed "$ACTIONHOOK_OPENAPI_SEED")
fi

echo "check-openapi: schemathesis (checks $checks, $max_examples examples per operation and phase)"
run_started=$SECONDS
run_status=0
(
    cd "$work_dir"
    ACTIONHOOK_ST_ADMIN_TOKEN="$admin_token" ACTIONHOOK_ST_INGEST_KEY="$ingest_key" \
        timeout --foreground --signal=TERM --kill-after=10 "$run_timeout" \
        "$schemathesis" --config-file "$work_dir/schemathesis.toml" "${run_args[@]}"
) 2>&1 | tee "$run_log" || run_status=$?
run_seconds=$((SECONDS - run_started))

if ! kill -0 "$server_pid" 2>/dev/null; then
    tail -n 40 "$server_log" >&2 || true
    die "the server died during the run (a crash is an F2 failure); last lines of its log above"
fi
# Which routes answered what (actionhook_http_requests_total by route and status), for reading the coverage.
curl -fsS --max-time 10 -o "$log_dir/openapi-metrics.txt" "$base_url/metrics" 2>/dev/null ||
    note "could not read /metrics after the run"

case "$run_status" in
    124 | 137) die "schemathesis did not finish within ${run_timeout}s (ACTIONHOOK_OPENAPI_TIMEOUT)" ;;
    130 | 143) die "interrupted" ;;
esac

# From schemathesis's own summary: "  Tested: 31", "Test cases:" then "  3855 generated, …", "Seed: …".
tested="$(sed -n 's/^ *Tested: *\([0-9][0-9]*\).*/\1/p' "$run_log" | tail -n 1)"
cases="$( (grep -A1 '^Test cases:' "$run_log" || true) | tail -n 1 | sed 's/^ *//')"
seed="$(sed -n 's/^Seed: *//p' "$run_log" | tail -n 1)"
summary="${tested:-?} operations, test cases: ${cases:-?}, seed ${seed:-?}"

if ((run_status != 0)); then
    die "schemathesis found problems (exit $run_status): $summary; see ${run_log#"$repo_root"/}"
fi
echo "check-openapi: OK (spec valid; schemathesis: $summary, checks $checks, ${run_seconds}s)"
