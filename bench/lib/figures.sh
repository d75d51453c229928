# shellcheck shell=bash
# Figures with their verdicts, and waiting for a condition: shared by bench/faults.sh and bench/failover.sh.
# The sourcing script defines `results` (the file each figure is appended to, tab-separated), a `log`
# function, and may set `id_width` (how wide the figure ids are printed; 4 by default).

# check ID LABEL VALUE OP GOAL [UNIT]: records one figure and its verdict (OP is ==, <= or >=).
check() {
    local id="$1" label="$2" value="$3" op="$4" goal="$5" unit="${6:-}" verdict=FAIL
    if awk -v v="$value" -v g="$goal" -v op="$op" 'BEGIN {
        if (v !~ /^-?[0-9.]+$/) exit 1
        exit !(op == "==" ? v + 0 == g + 0 : op == "<=" ? v + 0 <= g + 0 : v + 0 >= g + 0) }'; then
        verdict=PASS
    fi
    # shellcheck disable=SC2154 # results is the sourcing script's
    printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$label" "$value${unit:+ $unit}" "$op $goal${unit:+ $unit}" "$verdict" >>"$results"
    printf '  %-*s %-58s %14s   goal %-12s %s\n' "${id_width:-4}" "$id" "$label" "$value${unit:+ $unit}" \
        "$op $goal${unit:+ $unit}" "$verdict"
}

# note ID TEXT: a figure without a goal, printed with the others.
note() { printf '  %-*s %s\n' "${id_width:-4}" "$1" "${*:2}"; }

# print_results [FIRST]: every figure recorded, as a table whose first column is headed FIRST (`id`).
print_results() {
    local width="${id_width:-4}"
    printf "%-${width}s  %-58s  %14s  %-14s  %s\n" "${1:-id}" check figure goal verdict
    awk -F'\t' -v w="$width" '{ printf "%-" w "s  %-58s  %14s  %-14s  %s\n", $1, $2, $3, $4, $5 }' "$results"
}

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 0.1 s until it succeeds; fails after SECONDS.
wait_until() {
    local limit="$1" what="$2" deadline
    shift 2
    deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            log "timed out after ${limit}s waiting for $what"
            return 1
        fi
        sleep 0.1
    done
}

# alive PID: the process exists and is not a zombie.
alive() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [[ "${stat:0:1}" != Z ]]
}

# Seconds since the epoch, with fractions.
now() { date +%s.%N; }
# elapsed FROM TO: seconds between two `now`s, to the hundredth.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
