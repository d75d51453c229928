#!/usr/bin/env bash
# A local PostgreSQL cluster kept in one folder, for development and tests.
#
#   scripts/pg-local.sh start   <dir> [port] [name=value ...]  create on first start, then start (no-op if running)
#   scripts/pg-local.sh stop    <dir>                           stop (no-op if not running)
#   scripts/pg-local.sh status  <dir>                           exit 0 if running, 3 if not
#   scripts/pg-local.sh url     <dir> [port] [db]               print postgresql://postgres@127.0.0.1:<port>/<db>
#   scripts/pg-local.sh destroy <dir>                           stop, then delete the cluster
#
# <dir> holds data/ (the cluster), postgres.log and the unix socket. The server listens on 127.0.0.1 only,
# with trust authentication for the user `postgres`, UTF8, locale C. The port defaults to 5433 and the
# database to `actionhook` (created if missing). Settings given as name=value (e.g. max_connections=300
# fsync=off) apply to this start; fsync stays on unless a setting turns it off.
# As root, the server runs as the `postgres` user. When that user cannot reach <dir> (a parent such as
# /root is not traversable) or the socket path would be too long, the cluster lives in
# /tmp/actionhook-pg-<hash of dir> instead, and the script says so.
# ACTIONHOOK_PG_BIN names the folder of initdb/pg_ctl/psql (default: /usr/lib/postgresql/15/bin).
set -euo pipefail

note() { echo "pg-local: $*" >&2; }
die() {
    note "$*"
    exit 1
}
usage() {
    sed -n '2,8s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 2
}

default_port=5433
default_db=actionhook
conf_name=actionhook-local.conf

[[ $# -ge 2 && -n "$2" ]] || usage
command="$1"
requested_dir="$(realpath -m -- "$2")"
shift 2
[[ "$requested_dir" != / ]] || die "refusing to use / as the cluster folder"

pg_bin=
find_pg_bin() {
    if [[ -n "${ACTIONHOOK_PG_BIN:-}" ]]; then
        pg_bin="$ACTIONHOOK_PG_BIN"
    elif [[ -x /usr/lib/postgresql/15/bin/pg_ctl ]]; then
        pg_bin=/usr/lib/postgresql/15/bin
    else
        pg_bin="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
    fi
    [[ -n "$pg_bin" && -x "$pg_bin/pg_ctl" && -x "$pg_bin/initdb" ]] ||
        die "no PostgreSQL server binaries found (set ACTIONHOOK_PG_BIN, or run scripts/install-deps.sh)"
}

# initdb refuses to run as root, so as root the server's files and processes belong to `postgres`.
is_root=0
if [[ "$(id -u)" == 0 ]]; then
    is_root=1
fi
as_owner() {
    if ((is_root)); then
        # Start in / so that the tools never fail on a working directory they cannot read.
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}
give_to_owner() {
    if ((is_root)); then
        chown postgres:postgres "$@"
    fi
}
if ((is_root)) && [[ "$command" != url ]]; then
    getent passwd postgres >/dev/null || die "no 'postgres' user: install PostgreSQL (scripts/install-deps.sh)"
fi

# Decides where the cluster lives: the requested folder, or the /tmp fallback (see the header).
fallback_dir="/tmp/actionhook-pg-$(printf '%s' "$requested_dir" | sha256sum | cut -c1-16)"
dir="$requested_dir"
resolve_dir() {
    local reason=
    if [[ -f "$fallback_dir/data/PG_VERSION" ]]; then
        reason="its cluster was created there"
    elif ((${#requested_dir} > 80)); then
        reason="its unix socket path would be too long"
    elif ((is_root)); then
        local parent
        parent="$(dirname "$requested_dir")"
        while [[ ! -d "$parent" ]]; do parent="$(dirname "$parent")"; done
        if ! as_owner test -x "$parent"; then
            # Name the first folder on the way that blocks it (often /root, mode 700).
            local blocker="$parent"
            while [[ "$blocker" != / ]] && ! as_owner test -x "$(dirname "$blocker")"; do
                blocker="$(dirname "$blocker")"
            done
            reason="the postgres user cannot enter $blocker"
        fi
    fi
    if [[ -n "$reason" ]]; then
        dir="$fallback_dir"
        if [[ "$command" != url ]]; then
            note "using $dir for $requested_dir ($reason)"
        fi
    fi
}

data=
pidfile=
set_paths() {
    dir="$(realpath -m -- "$dir")"
    data="$dir/data"
    pidfile="$data/postmaster.pid"
}

# The postmaster's pid if the cluster is running. A pid is only believed when that process works in
# this data folder (every PostgreSQL process does), so a pid reused after a kill -9 is not mistaken.
running_pid() {
    [[ -f "$pidfile" ]] || return 1
    local pid
    pid="$(head -n 1 "$pidfile" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null || true)" == "$data" ]] || return 1
    echo "$pid"
}
running_port() { sed -n '4p' "$pidfile"; }
configured_port() {
    sed -n "s/^port = '\\([0-9]*\\)'\$/\\1/p" "$data/$conf_name" 2>/dev/null | tail -n 1
}
processes_in_data() {
    local proc
    for proc in /proc/[0-9]*; do
        if [[ "$(readlink "$proc/cwd" 2>/dev/null || true)" == "$data" ]]; then
            printf '%s ' "${proc#/proc/}"
        fi
    done
}

# A postmaster.pid left by a killed server: wait for its children to go, then remove it (PostgreSQL would
# refuse to start while they hold the old shared memory, and after a pid reuse it would not start at all).
clear_stale_pidfile() {
    note "removing a stale postmaster.pid (the previous server was killed); waiting for its processes to exit"
    local left='' waited=0
    while left="$(processes_in_data)" && [[ -n "$left" ]] && ((waited < 60)); do
        sleep 0.5
        waited=$((waited + 1))
    done
    [[ -z "$left" ]] || die "processes ${left% } still use $data: stop them first"
    rm -f "$pidfile" "$dir"/.s.PGSQL.*
}

sql_quote() { printf "'%s'" "${1//\'/\'\'}"; }

psql_at() {
    local port="$1"
    shift
    "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres "$@"
}

ensure_database() {
    local port="$1" found
    found="$(psql_at "$port" -d postgres -tA -c "SELECT 1 FROM pg_database WHERE datname = '$default_db'")"
    if [[ "$found" != 1 ]]; then
        psql_at "$port" -d postgres -c "CREATE DATABASE $default_db"
        note "created database $default_db"
    fi
}

cmd_start() {
    local port="$default_port"
    if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
        port="$1"
        shift
    fi
    local setting settings=() no_sync=()
    for setting in "$@"; do
        [[ "$setting" =~ ^[a-z_][a-z0-9_.]*=.*$ ]] || die "not a name=value setting: $setting"
        settings+=("$setting")
        if [[ "$setting" == fsync=off ]]; then
            no_sync=(--no-sync)
        fi
    done
    find_pg_bin

    mkdir -p "$(dirname "$requested_dir")"
    resolve_dir
    set_paths
    mkdir -p "$dir"
    give_to_owner "$dir"

    local pid
    if pid="$(running_pid)"; then
        local actual
        actual="$(running_port)"
        [[ "$actual" == "$port" ]] || die "already running on port $actual (pid $pid); stop it first to use port $port"
        note "already running on 127.0.0.1:$port (pid $pid)"
        ensure_database "$port"
        return 0
    fi
    if [[ -f "$pidfile" ]]; then
        clear_stale_pidfile
    fi

    if [[ ! -f "$data/PG_VERSION" ]]; then
        if [[ -e "$data" ]] && [[ -n "$(ls -A "$data")" ]]; then
            die "$data exists but holds no cluster: move it away first"
        fi
        note "creating a cluster in $data"
        if ! as_owner "$pg_bin/initdb" -D "$data" -A trust -U postgres -E UTF8 --locale=C "${no_sync[@]}" \
            >"$dir/initdb.log" 2>&1; then
            cat "$dir/initdb.log" >&2
            die "initdb failed"
        fi
        printf "\ninclude_if_exists = '%s'\n" "$conf_name" >>"$data/postgresql.conf"
    fi

    {
        echo "# Written by scripts/pg-local.sh at every start; edits are lost."
        echo "listen_addresses = '127.0.0.1'"
        echo "port = '$port'"
        echo "unix_socket_directories = $(sql_quote "$dir")"
        for setting in "${settings[@]}"; do
            echo "${setting%%=*} = $(sql_quote "${setting#*=}")"
        done
    } >"$data/$conf_name"
    give_to_owner "$data/$conf_name"
    if [[ -e "$dir/postgres.log" ]]; then
        give_to_owner "$dir/postgres.log"
    fi

    if ! as_owner "$pg_bin/pg_ctl" -D "$data" -l "$dir/postgres.log" -w -t 60 -s start; then
        tail -n 20 "$dir/postgres.log" >&2 || true
        die "could not start PostgreSQL on port $port (log: $dir/postgres.log)"
    fi
    ensure_database "$port"
    note "running on 127.0.0.1:$port (data: $data, log: $dir/postgres.log)"
}

cmd_stop() {
    find_pg_bin
    resolve_dir
    set_paths
    local pid
    if pid="$(running_pid)"; then
        as_owner "$pg_bin/pg_ctl" -D "$data" -w -t 60 -s -m fast stop
        note "stopped (was pid $pid)"
    else
        note "not running"
    fi
}

cmd_status() {
    resolve_dir
    set_paths
    local pid
    if pid="$(running_pid)"; then
        echo "running: pid $pid, port $(running_port), data $data"
    else
        echo "not running (data $data)"
        exit 3
    fi
}

cmd_url() {
    local port="${1:-}" db="${2:-$default_db}"
    resolve_dir
    set_paths
    if [[ -z "$port" ]]; then
        if running_pid >/dev/null; then
            port="$(running_port)"
        else
            port="$(configured_port)"
        fi
    fi
    [[ "${port:=$default_port}" =~ ^[0-9]+$ ]] || die "not a port: $port"
    echo "postgresql://postgres@127.0.0.1:$port/$db"
}

cmd_destroy() {
    cmd_stop
    if [[ -d "$dir" ]]; then
        # Only ever delete what this script creates.
        local entry
        for entry in "$dir"/* "$dir"/.[!.]*; do
            [[ -e "$entry" ]] || continue
            case "${entry##*/}" in
                data | postgres.log | initdb.log | .s.PGSQL.*) ;;
                *) die "refusing to delete $dir: it holds ${entry##*/}, which this script did not create" ;;
            esac
        done
        rm -rf "$dir"
        note "deleted $dir"
    fi
    if [[ "$dir" != "$requested_dir" ]]; then
        rmdir "$requested_dir" 2>/dev/null || true
    fi
}

case "$command" in
    start) cmd_start "$@" ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    url) cmd_url "$@" ;;
    destroy) cmd_destroy ;;
    *) usage ;;
esac
