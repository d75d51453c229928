#!/usr/bin/env bash
# Quality R14: ActionHook on a highly available PostgreSQL (Patroni + etcd) through failovers, in one
# invocation: `make failover`.
#
# Installs what is missing (etcd from Debian; Patroni from PyPI, pinned, into the tool venv), starts etcd and
# three PostgreSQL nodes under Patroni on loopback (each in a folder of its own, as the `postgres` user;
# synchronous_mode with synchronous_mode_strict, synchronous_commit on), two ActionHook instances on the
# multi-host URL (target_session_attrs=read-write), a webhook receiver and the APNs stand-in. Then, one
# fault at a time, each with its own app: keyed replies from one client per instance (retried with the same
# Idempotency-Key until acknowledged, their follow-ups webhooks), notifications with a no-reply step and
# snoozes coming due around the fault, and the fault:
#
#   crash    the primary node crashed: SIGKILL of its Patroni, its postmaster and every backend; restarted
#            once a new primary is up, it must rejoin as a replica
#   freeze   the primary node frozen: SIGSTOP of the same processes for FAILOVER_FREEZE_SECONDS (40), then
#            SIGCONT; it must come back as a replica (rewound where it had diverged), never as a second leader
#   pgkill   PostgreSQL alone killed (postmaster and backends) under a live Patroni
#   standby  the synchronous standby node killed (Patroni and PostgreSQL), restarted after 10 s
#
# Figures per fault (PASS/FAIL, summary table last; exit status non-zero when one falls short):
# acknowledged replies lost (0), stored twice (0), seconds without writes per instance (the longest gap
# between two acknowledgements, goal <= the DCS ttl + 10 s), follow-ups of stored replies not delivered
# within 2 minutes (0), steps and snoozes missed or fired twice (0), instances that needed a restart (0),
# leaders after the fault (1). The seconds until a new primary was up are noted.
#
#          full (default)                        FAILOVER_SIZE=short (CI)
#   faults crash, freeze, pgkill, standby        crash, freeze
#   load   20 replies/s per instance             10 replies/s per instance
#          40 steps, 40 snoozes per fault        16 steps, 16 snoozes per fault
#
# Environment: FAILOVER_SIZE (full|short), FAILOVER_ONLY (e.g. freeze,crash), FAILOVER_SKIP_BUILD=1 (use the
# release binary already built), FAILOVER_BINARY (this binary instead; no build), FAILOVER_FREEZE_SECONDS
# (40), FAILOVER_PG_PORT (5441: the nodes at +0..+2), FAILOVER_PORT_BASE (18500: etcd at +0/+1, Patroni's
# REST API at +11..+13, services at +20/+21, receivers at +30), FAILOVER_KEEP=1 (keep the work folder, which
# is kept anyway, and named, when something failed). Logs of every process are in the work folder.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

size="${FAILOVER_SIZE:-full}"
freeze_seconds="${FAILOVER_FREEZE_SECONDS:-40}"
pg_port_base="${FAILOVER_PG_PORT:-5441}"
port_base="${FAILOVER_PORT_BASE:-18500}"
driver="$repo_root/bench/faults/driver.py"
standin="$repo_root/Tests/Fixtures/apns_standin.py"
pg_bin="${ACTIONHOOK_PG_BIN:-/usr/lib/postgresql/15/bin}"
patroni_pin='patroni[etcd3,psycopg3]==4.1.5'
# The DCS settings: a leader key lives `ttl` seconds; Patroni requires loop_wait + 2 * retry_timeout <= ttl.
ttl=20 loop_wait=2 retry_timeout=5

case "$size" in
    full) only="${FAILOVER_ONLY:-crash,freeze,pgkill,standby}" rate=20 steps=40 snoozes=40 ;;
    short) only="${FAILOVER_ONLY:-crash,freeze}" rate=10 steps=16 snoozes=16 ;;
    *)
        echo "failover: FAILOVER_SIZE must be full or short (got '$size')" >&2
        exit 2
        ;;
esac
faults=()
for id in ${only//,/ }; do
    case "$id" in
        crash | freeze | pgkill | standby) faults+=("$id") ;;
        *)
            echo "failover: unknown fault '$id' in FAILOVER_ONLY (crash, freeze, pgkill, standby)" >&2
            exit 2
            ;;
    esac
done

log() { echo "failover: $*" >&2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-failover.XXXXXX")"
# The nodes run as `postgres`, which must reach their folders.
chmod 755 "$work"
results="$work/results.tsv"
: >"$results"
keep_work="${FAILOVER_KEEP:-0}"

# --- Install and build -----------------------------------------------------------------------------------

bash scripts/install-deps.sh --with etcd-server etcd-client curl openssl procps python3 >/dev/null
[[ -x "$pg_bin/pg_ctl" ]] || pg_bin="$(dirname "$(find /usr/lib/postgresql -name pg_ctl -type f | sort -V | tail -n 1)")"

is_root=0
if [[ "$(id -u)" == 0 ]]; then is_root=1; fi
# as_pg COMMAND...: runs COMMAND as the `postgres` user when root (initdb refuses root), replacing this
# process (setpriv execs), so that a background start's $! is the command's own pid.
as_pg() {
    if ((is_root)); then
        exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    fi
    exec "$@"
}

# Patroni from PyPI: Debian's 3.0.2 can write the leader key back over a new leader's after a freeze (fixed
# upstream in 3.0.3, patroni PR #2689), which loses what the new primary acknowledged. It goes into the tool
# venv when the postgres user can run that venv's Python; where that Python is private (pyenv's under
# /root, say), into a venv of its own made from the system's python3.
venv="$repo_root/.build-tools/venv"
[[ -x "$venv/bin/python3" ]] || bash scripts/install-deps.sh >/dev/null
# (Through env: setpriv's own exec still passes with root's capabilities, the next one does not.)
if ((is_root)) && ! (as_pg env "$venv/bin/python3" -c '') 2>/dev/null; then
    venv="$repo_root/.build-tools/patroni-venv"
    [[ -x "$venv/bin/python3" ]] || /usr/bin/python3 -m venv "$venv"
fi
if [[ "$(cat "$venv/.actionhook-patroni" 2>/dev/null || true)" != "$patroni_pin" ]]; then
    log "installing $patroni_pin into ${venv#"$repo_root"/}"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "$patroni_pin"
    printf '%s\n' "$patroni_pin" >"$venv/.actionhook-patroni"
fi
patroni="$venv/bin/patroni"

if [[ -n "${FAILOVER_BINARY:-}" ]]; then
    binary="$(realpath "$FAILOVER_BINARY")"
else
    if [[ "${FAILOVER_SKIP_BUILD:-0}" != 1 ]]; then
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
log "binary: $binary; size: $size; faults: ${faults[*]}; $("$patroni" --version 2>&1); $(etcd --version | head -n 1)"

# --- Helpers --------------------------------------------------------------------------------------------

# check, note, print_results, wait_until, alive, now, elapsed; the ids here are fault names.
id_width=7
# shellcheck source=bench/lib/figures.sh
source "$repo_root/bench/lib/figures.sh"

json_field() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

# --- etcd and the Patroni nodes -------------------------------------------------------------------------

etcd_port=$port_base
rest_port() { echo $((port_base + 10 + $1)); }
pg_port() { echo $((pg_port_base + $1 - 1)); }
node_dir() { echo "$work/n$1"; }
hosts="127.0.0.1:$(pg_port 1),127.0.0.1:$(pg_port 2),127.0.0.1:$(pg_port 3)"
database_url="postgresql://postgres@$hosts/actionhook?target_session_attrs=read-write"
sql() {
    PGOPTIONS=-cclient_min_messages=warning psql \
        "postgresql://postgres@$hosts/actionhook?target_session_attrs=read-write&connect_timeout=2" -v ON_ERROR_STOP=1 -qtAX "$@"
}

etcd --name actionhook-failover --data-dir "$work/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-cluster "actionhook-failover=http://127.0.0.1:$((etcd_port + 1))" >"$work/etcd.log" 2>&1 &
etcd_pid=$!

# The superuser's and the replication user's passwords: written only to the nodes' own files (mode 600).
superuser_password="$(openssl rand -hex 16)"
replication_password="$(openssl rand -hex 16)"
write_node_config() {
    local index="$1" dir
    dir="$(node_dir "$index")"
    mkdir -p "$dir"
    (
        umask 077
        cat >"$dir/patroni.yml" <<YAML
scope: actionhook
namespace: /actionhook-failover/
name: n$index
restapi:
  listen: 127.0.0.1:$(rest_port "$index")
  connect_address: 127.0.0.1:$(rest_port "$index")
etcd3:
  host: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    ttl: $ttl
    loop_wait: $loop_wait
    retry_timeout: $retry_timeout
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        synchronous_commit: "on"
        wal_log_hints: "on"
        max_connections: 200
        wal_keep_size: 512MB
  initdb:
    - encoding: UTF8
    - locale: C
postgresql:
  listen: 127.0.0.1:$(pg_port "$index")
  connect_address: 127.0.0.1:$(pg_port "$index")
  data_dir: $dir/data
  bin_dir: $pg_bin
  pgpass: $dir/pgpass
  authentication:
    superuser:
      username: postgres
      password: "$superuser_password"
    replication:
      username: replicator
      password: "$replication_password"
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication replicator 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: "$dir"
YAML
    )
    if ((is_root)); then chown -R postgres:postgres "$dir"; fi
}

# start_node INDEX: Patroni for node INDEX, as the postgres user; its pid goes to the node's patroni.pid.
start_node() {
    local dir
    dir="$(node_dir "$1")"
    (cd "$dir" && as_pg env -i PATH=/usr/bin:/bin "HOME=$dir" LANG=C.UTF-8 "$patroni" "$dir/patroni.yml") \
        >>"$dir/patroni.log" 2>&1 &
    echo $! >"$dir/patroni.pid"
    # Killed on purpose by the faults: no job report from the shell.
    disown $!
}

# ours_node PID INDEX: PID is node INDEX's Patroni or one of its PostgreSQL processes (never anyone else's).
patroni_pid() {
    local pid
    pid="$(cat "$(node_dir "$1")/patroni.pid" 2>/dev/null)" || return 1
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "$(node_dir "$1")/patroni.yml" || return 1
    echo "$pid"
}
postmaster_pid() {
    local pid
    pid="$(head -n 1 "$(node_dir "$1")/data/postmaster.pid" 2>/dev/null)" || return 1
    [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == "$(node_dir "$1")/data" ]] || return 1
    echo "$pid"
}
# node_pids INDEX [postgres]: node INDEX's Patroni (unless `postgres`), postmaster and its children.
node_pids() {
    local postmaster
    if [[ "${2:-}" != postgres ]]; then patroni_pid "$1" || true; fi
    if postmaster="$(postmaster_pid "$1")"; then
        echo "$postmaster"
        pgrep -P "$postmaster" || true
    fi
}
signal_node() {
    local pid
    for pid in $(node_pids "$2" "${3:-}"); do kill -"$1" "$pid" 2>/dev/null || true; done
}

# cluster: one line per member, "name role state timeline", from the first REST API that answers.
cluster() {
    local index answer
    for index in 1 2 3; do
        if answer="$(curl -fsS -m 1 "http://127.0.0.1:$(rest_port "$index")/cluster" 2>/dev/null)"; then
            python3 -c 'import json, sys
for m in json.load(sys.stdin)["members"]:
    print(m["name"], m["role"], m["state"], m.get("timeline", "-"))' <<<"$answer"
            return 0
        fi
    done
    return 1
}
leader() { cluster | awk '$2 == "leader" && $3 == "running" { print $1 }'; }
has_leader() { [[ -n "$(leader)" ]]; }
sync_standby() { cluster | awk '$2 == "sync_standby" && $3 == "streaming" { print $1 }'; }
# healthy: three members, one running leader, one streaming synchronous standby, every replica streaming,
# one timeline.
healthy() {
    local members
    members="$(cluster)" || return 1
    [[ "$(wc -l <<<"$members")" == 3 ]] &&
        [[ "$(awk '$2 == "leader" && $3 == "running"' <<<"$members" | wc -l)" == 1 ]] &&
        [[ "$(awk '$2 == "sync_standby" && $3 == "streaming"' <<<"$members" | wc -l)" == 1 ]] &&
        [[ "$(awk '$2 != "leader" && $3 != "streaming"' <<<"$members" | wc -l)" == 0 ]] &&
        [[ "$(awk '{ print $4 }' <<<"$members" | sort -u | wc -l)" == 1 ]]
}
# is_replica NAME: member NAME streams from the leader, on its timeline.
is_replica() {
    local members timeline
    members="$(cluster)" || return 1
    timeline="$(awk '$2 == "leader" && $3 == "running" { print $4 }' <<<"$members")"
    awk -v n="$1" -v t="$timeline" '$1 == n && $2 != "leader" && $3 == "streaming" && $4 == t { f = 1 } END { exit !f }' <<<"$members"
}
# writable: the primary takes a write (a transaction that waits for its synchronous standby).
# psql waits for the commit as long as it takes (no statement_timeout, whose cancel would end the wait for the
# standby with a WARNING and a local commit): `timeout` gives up on it instead.
writable() {
    timeout 5 psql "postgresql://postgres@$hosts/actionhook?target_session_attrs=read-write&connect_timeout=2" \
        -v ON_ERROR_STOP=1 -qtAX -c "CREATE TABLE IF NOT EXISTS failover_probe (at timestamptz)" \
        -c "INSERT INTO failover_probe VALUES (now())"
}

cleanup() {
    local index pid
    for index in 1 2 3; do signal_node CONT "$index"; done
    for pid in "${service_pids[@]}" "${helper_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for index in 1 2 3; do
        if pid="$(patroni_pid "$index")"; then kill -TERM "$pid" 2>/dev/null || true; fi
    done
    for _ in $(seq 1 150); do
        local left=0
        for index in 1 2 3; do if [[ -n "$(node_pids "$index")" ]]; then left=1; fi; done
        ((left)) || break
        sleep 0.2
    done
    for index in 1 2 3; do signal_node KILL "$index"; done
    kill -TERM "$etcd_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    if [[ "$keep_work" == 1 ]]; then
        log "logs kept in $work"
    else
        rm -rf "$work"
    fi
}
service_pids=()
helper_pids=()
trap cleanup EXIT

wait_until 30 "etcd" curl -fs "http://127.0.0.1:$etcd_port/health"
for index in 1 2 3; do write_node_config "$index"; done
# The first node bootstraps the cluster; the others join it as replicas.
start_node 1
wait_until 120 "the first node to lead" has_leader || exit 1
start_node 2
start_node 3
wait_until 180 "three healthy nodes" healthy || {
    cluster >&2 || true
    exit 1
}
log "cluster: $(cluster | tr '\n' ';')"
psql "postgresql://postgres@127.0.0.1:$(pg_port 1)/postgres" -qtAX -c "CREATE DATABASE actionhook" >/dev/null
DATABASE_URL="$database_url" "$binary" migrate >"$work/migrate.log" 2>&1

# --- ActionHook, the receivers, the APNs stand-in ----------------------------------------------------------

admin_token="$(openssl rand -hex 24)"
admin_header="$work/admin-header"
(umask 077 && printf 'Authorization: Bearer %s\n' "$admin_token" >"$admin_header")
service_port() { echo $((port_base + 20 + $1)); }
receiver_port=$((port_base + 30))

python3 "$driver" receive --ports "$receiver_port" --log "$work/received.tsv" --stats "$work/received.stats.json" \
    2>"$work/receiver.log" &
helper_pids+=($!)
wait_until 30 "the receiver" curl -fs -o /dev/null "http://127.0.0.1:$receiver_port/_stats"

# The APNs stand-in (snoozes re-send through it), its CA and certificate and the provider key, as in faults.sh R6.
tls="$work/tls"
mkdir -p "$tls"
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' \
    >"$tls/server.ext"
{
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/ca.key" -out "$tls/ca.pem" \
        -days 2 -subj "/CN=ActionHook failover CA" -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/server.key" \
        -out "$tls/server.csr" -subj /CN=127.0.0.1
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
        -out "$tls/server.pem" -days 2 -extfile "$tls/server.ext"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tls/authkey.p8"
    openssl pkey -in "$tls/authkey.p8" -pubout -out "$tls/authkey.pub"
} >"$tls/openssl.log" 2>&1
"$repo_root/.build-tools/venv/bin/python3" "$standin" --cert "$tls/server.pem" --key "$tls/server.key" \
    --auth-key "KEYID12345:TEAM123456:$tls/authkey.pub" --topic com.example.faults \
    --log "$work/apns.jsonl" --ignore-stdin >"$work/apns.port" 2>"$work/apns.log" </dev/null &
helper_pids+=($!)
wait_until 30 "the APNs stand-in" test -s "$work/apns.port"

# Two instances on the multi-host URL. A short lease, so that a claim whose instance lost its database in
# the fault is taken over well within the 2 minutes the follow-ups have.
for index in 0 1; do
    env "ACTIONHOOK_ADMIN_TOKEN=$admin_token" "DATABASE_URL=$database_url" ACTIONHOOK_HOST=127.0.0.1 \
        "ACTIONHOOK_PORT=$(service_port "$index")" ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 ACTIONHOOK_LOG_LEVEL=notice \
        ACTIONHOOK_RATE_LIMIT_PER_SECOND=100000 ACTIONHOOK_WORKER_POLL_MS=500 ACTIONHOOK_WORKER_LEASE_SECONDS=15 \
        "ACTIONHOOK_RETRY_SCHEDULE=1,2,3,5,5,5,5,5,5,5" "ACTIONHOOK_APNS_CA_FILE=$tls/ca.pem" \
        "ACTIONHOOK_APNS_URL=https://127.0.0.1:$(head -n 1 "$work/apns.port")" \
        "$binary" serve >>"$work/service-$index.log" 2>&1 &
    service_pids+=($!)
    wait_until 60 "instance $index to be ready" curl -fs -o /dev/null "http://127.0.0.1:$(service_port "$index")/readyz"
done

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

# make_app ID: an app whose webhooks go to the receiver, with the invite rules of faults.sh (accept makes
# one webhook, decline two, dismiss none), a snoozable category and its snooze rules, an ingest key (to
# ID.ingest-key) and a send key (to ID.send-key), never printed.
snooze_delays=8,10,12,14
step_delays=8,10,12,14
make_app() {
    local created apns delay
    apns="$(python3 -c 'import json, sys
print(json.dumps({"teamId": "TEAM123456", "keyId": "KEYID12345", "privateKey": open(sys.argv[1]).read(),
                  "topic": "com.example.faults", "environment": "sandbox"}))' "$tls/authkey.p8")"
    created="$(admin POST /v1/apps "{\"id\": \"$1\", \"name\": \"$1\",
        \"webhook\": {\"url\": \"http://127.0.0.1:$receiver_port/$1\"}, \"apns\": $apns}")"
    (umask 077 && printf '%s' "$created" | json_field '["ingestKey"]["secret"]' >"$work/$1.ingest-key")
    admin POST "/v1/apps/$1/rules" '{"id": "invite-accept", "match": {"action": "accept"},
        "handler": {"type": "accept"}, "followUps": [{"channel": "webhook"}]}' >/dev/null
    admin POST "/v1/apps/$1/rules" '{"id": "invite-decline", "match": {"action": "decline"},
        "handler": {"type": "decline"}, "followUps": [{"channel": "webhook"},
            {"channel": "webhook", "delaySeconds": 1, "body": {"event": "declined-later"}}]}' >/dev/null
    admin POST "/v1/apps/$1/rules" '{"id": "invite-dismiss", "match": {"action": "dismiss"},
        "handler": {"type": "record"}}' >/dev/null
    admin PUT "/v1/apps/$1/categories/timer" '{"actions": [{"identifier": "snooze", "title": "Snooze"}]}' >/dev/null
    for delay in ${snooze_delays//,/ }; do
        admin POST "/v1/apps/$1/rules" "{\"id\": \"snooze-$delay\", \"match\": {\"action\": \"snooze-$delay\"},
            \"handler\": {\"type\": \"snooze\", \"delaySeconds\": $delay, \"maxSnoozes\": 3}}" >/dev/null
    done
    (umask 077 && admin POST "/v1/apps/$1/keys" '{"scope": "send"}' | json_field '["secret"]' >"$work/$1.send-key")
}

sql_is() { [[ "$(sql -c "$1")" == "$2" ]]; }

load_table() {
    sql -c "DROP TABLE IF EXISTS $1" -c "CREATE TABLE $1 ($2)" -c "\\copy $1 FROM '$3'"
}

# --- One fault --------------------------------------------------------------------------------------------

run_fault() {
    local fault="$1" app="f_$1" dir="$work/$1"
    mkdir -p "$dir"
    make_app "$app"
    local load=$((freeze_seconds + 45)) started old_leader old_index faulted recovered=
    [[ "$fault" == freeze ]] || load=45
    # Replies through each instance, for the whole load time; steps and snoozes sent before the fault, due
    # from 8 to 14 s after (so around the fault and the election).
    local index
    for index in 0 1; do
        FAULTS_INGEST_KEY="$(cat "$work/$app.ingest-key")" python3 "$driver" ingest \
            --url "http://127.0.0.1:$(service_port "$index")/v1/responses" --count $((rate * load)) --rate "$rate" \
            --duration "$load" --concurrency 8 --key-prefix "$fault-$index" --timeout 5 \
            --log "$dir/sent_$index.tsv" >"$dir/ingest_$index.json" 2>"$dir/ingest_$index.log" &
        helper_pids+=($!)
        echo $! >"$dir/ingest_$index.pid"
    done
    FAULTS_SERVER_KEY="$(cat "$work/$app.send-key")" FAULTS_INGEST_KEY="$(cat "$work/$app.ingest-key")" \
        python3 "$driver" send --url "http://127.0.0.1:$(service_port 0)/v1/apps/$app/notifications" \
        --count "$steps" --concurrency 4 --step-delays "$step_delays" --answer 2 --log "$dir/steps.tsv" \
        2>"$dir/steps.log"
    FAULTS_SERVER_KEY="$(cat "$work/$app.send-key")" FAULTS_INGEST_KEY="$(cat "$work/$app.ingest-key")" \
        python3 "$driver" ingest --url "http://127.0.0.1:$(service_port 1)/v1/responses" --kind snooze \
        --snooze-delays "$snooze_delays" --count "$snoozes" --concurrency 4 --key-prefix "$fault-snooze" \
        --send-url "http://127.0.0.1:$(service_port 1)/v1/apps/$app/notifications" --log "$dir/snoozes.tsv" \
        >"$dir/snoozes.json" 2>"$dir/snoozes.log"
    sleep 2

    old_leader="$(leader)"
    old_index="${old_leader#n}"
    local target="$old_index"
    if [[ "$fault" == standby ]]; then
        target="$(sync_standby)"
        target="${target#n}"
    fi
    rewinds() { grep -c "running pg_rewind" "$(node_dir "$target")/patroni.log" || true; }
    if [[ ! "$target" =~ ^[123]$ ]]; then
        log "$fault: no node to fault (cluster: $(cluster 2>/dev/null | tr '\n' ';'))"
        return 1
    fi
    local rewound_before
    rewound_before="$(rewinds)"
    faulted="$(now)"
    case "$fault" in
        crash) signal_node KILL "$target" ;;
        freeze) signal_node STOP "$target" ;;
        pgkill) signal_node KILL "$target" postgres ;;
        standby) signal_node KILL "$target" ;;
    esac
    local role=primary
    if [[ "$fault" == standby ]]; then role="synchronous standby"; fi
    log "$fault: n$target ($role) at $(date -u +%T)"
    # The primary takes writes again (a new one, or the same one restarted by its Patroni).
    if wait_until 120 "a primary that takes writes" writable; then
        recovered="$(elapsed "$faulted" "$(now)")"
    fi
    note "$fault" "a primary took writes again ${recovered:-never} s after the fault; leader now $(leader 2>/dev/null || echo none) (was $old_leader)"
    case "$fault" in
        crash)
            start_node "$target"
            ;;
        freeze)
            sleep "$(awk -v f="$freeze_seconds" -v e="$(elapsed "$faulted" "$(now)")" 'BEGIN { d = f - e; print (d > 0 ? d : 0) }')"
            signal_node CONT "$target"
            note "$fault" "n$target thawed after $(elapsed "$faulted" "$(now)") s"
            ;;
        standby)
            sleep 10
            start_node "$target"
            ;;
    esac
    for index in 0 1; do wait "$(cat "$dir/ingest_$index.pid")" || true; done
    wait_until 180 "the cluster healthy again" healthy || true
    note "$fault" "cluster: $(cluster 2>/dev/null | tr '\n' ';')"
    if [[ "$fault" != pgkill ]]; then
        check "$fault" "n$target back as a replica of the leader's timeline" \
            "$(is_replica "n$target" && echo 1 || echo 0)" == 1
    fi
    check "$fault" "leaders after the fault" "$(cluster | awk '$2 == "leader"' | wc -l)" == 1
    local rewound=no
    if (($(rewinds) > rewound_before)); then rewound=yes; fi
    note "$fault" "n$target ran pg_rewind on its way back: $rewound"

    # Replies.
    cat "$dir"/sent_0.tsv "$dir"/sent_1.tsv >"$dir/sent.tsv"
    load_table "${fault}_sent" "key text, attempt int, started float8, finished float8, status int, retry_after text,
        response_id uuid" "$dir/sent.tsv"
    check "$fault" "replies acknowledged" "$(sql -c "SELECT count(DISTINCT key) FROM ${fault}_sent WHERE status IN (200, 202)")" \
        ">=" $((rate * 2 * 20))
    check "$fault" "acknowledged replies lost" "$(sql -c "SELECT count(*) FROM ${fault}_sent s WHERE s.status IN (200, 202)
        AND NOT EXISTS (SELECT 1 FROM responses r WHERE r.app_id = '$app' AND r.idempotency_key = s.key AND r.id = s.response_id)")" == 0
    check "$fault" "replies stored twice (rows per key > 1)" "$(sql -c "SELECT count(*) FROM (SELECT idempotency_key
        FROM responses WHERE app_id = '$app' GROUP BY 1 HAVING count(*) > 1) AS d")" == 0
    for index in 0 1; do
        check "$fault" "seconds without writes, instance $index (ttl $ttl s + 10 s)" "$(sql -c "
            SELECT coalesce(round(max(gap)::numeric, 1), 0) FROM (SELECT finished - lag(finished) OVER (ORDER BY finished) AS gap
            FROM ${fault}_sent WHERE key LIKE '$fault-$index-%' AND status IN (200, 202)) AS g")" "<=" $((ttl + 10)) s
    done
    note "$fault" "answers: $(sql -c "SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM (
        SELECT status, count(*) AS n FROM ${fault}_sent GROUP BY 1) AS s")"

    # Follow-ups: every one of the app's stored replies', steps' and snoozes' delivered within 2 minutes.
    wait_until 120 "the follow-ups delivered" sql_is "SELECT count(*) FROM followups WHERE app_id = '$app'
        AND status NOT IN ('delivered', 'cancelled', 'skipped', 'dead')" 0 || true
    sleep 2
    load_table "${fault}_received" "event text, at float8, port int, webhook_id text, status int" "$work/received.tsv"
    check "$fault" "follow-ups of stored replies not delivered within 2 min" "$(sql -c "SELECT count(*) FROM followups f
        JOIN responses r ON r.app_id = f.app_id AND r.id = f.response_id
        WHERE f.app_id = '$app' AND f.channel = 'webhook' AND f.status <> 'delivered'")" == 0
    check "$fault" "webhooks recorded delivered that never arrived" "$(sql -c "SELECT count(*) FROM followups f
        WHERE f.app_id = '$app' AND f.channel = 'webhook' AND f.status = 'delivered' AND NOT EXISTS (
            SELECT 1 FROM ${fault}_received p WHERE p.event = 'arrive' AND p.webhook_id = f.id::text)")" == 0
    # Steps: each of an unanswered notification fires once; none of an answered one.
    local steps_view="SELECT f.id::text AS id, n.answered_at IS NOT NULL AND n.answered_at < f.due_at AS answered
        FROM followups f JOIN notifications n ON n.app_id = f.app_id AND n.id = f.notification_id
        WHERE f.app_id = '$app' AND f.kind = 'step'"
    check "$fault" "steps missed" "$(sql -c "SELECT count(*) FROM ($steps_view) s WHERE NOT s.answered
        AND NOT EXISTS (SELECT 1 FROM ${fault}_received p WHERE p.event = 'arrive' AND p.webhook_id = s.id)")" == 0
    check "$fault" "steps fired twice (webhook-id seen > once)" "$(sql -c "SELECT count(*) FROM (SELECT p.webhook_id
        FROM ${fault}_received p JOIN ($steps_view) s ON s.id = p.webhook_id WHERE p.event = 'arrive'
        GROUP BY 1 HAVING count(*) > 1) AS d")" == 0
    check "$fault" "steps of answered notifications fired" "$(sql -c "SELECT count(*) FROM ($steps_view) s
        WHERE s.answered AND EXISTS (SELECT 1 FROM ${fault}_received p WHERE p.event = 'arrive' AND p.webhook_id = s.id)")" == 0
    # Snoozes: each re-notification pushed once (the stand-in logs every push with its apns-id).
    sql -c "DROP TABLE IF EXISTS ${fault}_apns" -c "CREATE TABLE ${fault}_apns (line jsonb)" \
        -c "\\copy ${fault}_apns FROM '$work/apns.jsonl' WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')"
    local pushes="SELECT lower(line -> 'headers' ->> 'apns-id') AS id, (line ->> 'status')::int AS status
        FROM ${fault}_apns WHERE line ->> 'kind' = 'request'"
    check "$fault" "snoozes scheduled" "$(sql -c "SELECT count(*) FROM followups WHERE app_id = '$app' AND is_snooze")" == "$snoozes"
    check "$fault" "snoozes missed" "$(sql -c "SELECT count(*) FROM followups f WHERE f.app_id = '$app' AND f.is_snooze
        AND NOT EXISTS (SELECT 1 FROM ($pushes) p WHERE p.id = f.id::text AND p.status = 200)")" == 0
    check "$fault" "snoozes pushed twice (apns-id seen > once)" "$(sql -c "SELECT count(*) FROM (SELECT p.id FROM ($pushes) p
        JOIN followups f ON f.id::text = p.id WHERE f.app_id = '$app' AND f.is_snooze GROUP BY 1 HAVING count(*) > 1) AS d")" == 0
    # The instances went through it without a restart, and answer.
    local restarted=0
    for index in 0 1; do
        if ! alive "${service_pids[index]}" || ! curl -fs -o /dev/null "http://127.0.0.1:$(service_port "$index")/readyz"; then
            restarted=$((restarted + 1))
        fi
    done
    check "$fault" "instances that needed a restart" "$restarted" == 0
}

# --- Run ---------------------------------------------------------------------------------------------------

for fault in "${faults[@]}"; do
    log "=== $fault ==="
    started=$SECONDS
    before="$(wc -l <"$results")"
    wait_until 180 "a healthy cluster before $fault" healthy || true
    set +e
    (
        set -e
        run_fault "$fault"
    )
    status=$?
    set -e
    if ((status != 0)); then
        keep_work=1
        printf '%s\t%s\t%s\t%s\t%s\n' "$fault" "fault stopped by an error" "exit $status" "" FAIL >>"$results"
        log "$fault stopped by an error (exit $status)"
    elif [[ "$(wc -l <"$results")" == "$before" ]]; then
        printf '%s\t%s\t%s\t%s\t%s\n' "$fault" "no figure recorded" "" "" FAIL >>"$results"
    fi
    log "$fault took $((SECONDS - started))s"
done

echo
echo "Failover ($size size, $(date -u +%Y-%m-%dT%H:%MZ), $("$patroni" --version 2>&1), ttl ${ttl}s, $(basename "$binary") at ${binary%/*})"
print_results fault
failed="$(awk -F'\t' '$5 == "FAIL"' "$results" | wc -l)"
if ((failed > 0)); then
    keep_work=1
    echo "failover: FAIL ($failed of $(wc -l <"$results") checks)"
    exit 1
fi
echo "failover: PASS ($(wc -l <"$results") checks)"
