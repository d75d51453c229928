#!/usr/bin/env bash
# Fuzzes the domain's parsers and validators (quality figure F1): builds Sources/ActionHookFuzz with
# libFuzzer and AddressSanitizer (release, scratch folder .build-fuzz) and runs each target for
# FUZZ_SECONDS (default 20) from its seeds in Tests/Fixtures/fuzz/<target>/. Fails on the first crash,
# sanitizer report or broken invariant; the input that found it is kept in .build-fuzz/findings/ and
# can be replayed with a plain build:
#   ACTIONHOOK_FUZZ_TARGET=<target> swift run ActionHookFuzz .build-fuzz/findings/<file>
# Targets: ingest, rule, template, address, signature, reply-signature (FUZZ_TARGETS picks some). FUZZ_SECONDS=0 runs
# the seeds once without fuzzing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${FUZZ_SECONDS:-20}"
[[ "$seconds" =~ ^[0-9]+$ ]] || {
    echo "check-fuzz: FUZZ_SECONDS must be a whole number of seconds" >&2
    exit 2
}
read -r -a targets <<<"${FUZZ_TARGETS:-ingest rule template address signature reply-signature}"

swift build -c release --product ActionHookFuzz --scratch-path .build-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -parse-as-library 2>&1 | tail -n 3
binary=.build-fuzz/release/ActionHookFuzz
findings=.build-fuzz/findings
mkdir -p "$findings"

for target in "${targets[@]}"; do
    seeds="Tests/Fixtures/fuzz/$target"
    [[ -d "$seeds" ]] || {
        echo "check-fuzz: no seeds for '$target' in $seeds" >&2
        exit 2
    }
    # New inputs go to a scratch corpus; the checked-in seeds are only read.
    corpus="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-fuzz-$target.XXXXXX")"
    limit=(-max_total_time="$seconds")
    ((seconds > 0)) || limit=(-runs=0)
    status=0
    ACTIONHOOK_FUZZ_TARGET="$target" "$binary" "${limit[@]}" -rss_limit_mb=2048 -max_len=16384 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$findings/$target-" "$corpus" "$seeds" \
        >"$findings/$target.log" 2>&1 || status=$?
    rm -rf "$corpus"
    if ((status != 0)); then
        tail -n 40 "$findings/$target.log" >&2
        echo "check-fuzz: '$target' failed (exit $status); the input is in $findings/" >&2
        exit 1
    fi
    runs="$(awk '/stat::number_of_executed_units:/ { print $2 }' "$findings/$target.log")"
    echo "check-fuzz: $target: ${runs:-?} inputs in ${seconds}s, no crash"
done
echo "check-fuzz: OK (${#targets[@]} targets)"
