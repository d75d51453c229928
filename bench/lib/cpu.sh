# shellcheck shell=bash
# CPU accounting for the benchmarks (sourced by bench/run.sh and bench/delivery.sh), from /proc/PID/stat.

ticks_per_second="$(getconf CLK_TCK)"

# Clock ticks (user + system) process $1 has used (fields 14 and 15); with "children" as $2 also its reaped
# children's (fields 16 and 17). 0 when it is gone.
process_ticks() {
    local stat fields
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || {
        echo 0
        return
    }
    stat="${stat##*) }"
    read -r -a fields <<<"$stat"
    if [[ "${2:-}" == children ]]; then
        echo $((fields[11] + fields[12] + fields[13] + fields[14]))
    else
        echo $((fields[11] + fields[12]))
    fi
}

# CPU seconds process $1 has used so far.
process_cpu_seconds() {
    echo "$(process_ticks "$1") $ticks_per_second" | awk '{ printf "%.3f\n", $1 / $2 }'
}

# CPU seconds the PostgreSQL cluster of postmaster $1 has used so far: the postmaster's own and its reaped
# children's (exited backends, autovacuum workers) plus every live child's, so that a process that comes and
# goes between two readings is counted too.
postgres_cpu_seconds() {
    local ticks pid
    ticks="$(process_ticks "$1" children)"
    for pid in $(pgrep -P "$1"); do ticks=$((ticks + $(process_ticks "$pid"))); done
    echo "$ticks $ticks_per_second" | awk '{ printf "%.3f\n", $1 / $2 }'
}
