#!/usr/bin/env bash
# Only the two wrapper targets may import the C modules, and only with `internal import`, so that no
# public API can mention a C type (style.md, rule 1).
#
#   scripts/check-c-imports.sh [root]   root defaults to the repository; checks Swift files under
#                                       root/Sources and root/Tests
#
# Fails, naming file and line, when a Swift file outside Sources/MicroHTTPD and Sources/Postgres imports
# CMicroHTTPD or CLibPQ in any form, or when a file inside them imports one without `internal import`.
set -euo pipefail

root="${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}"
cd "$root"

c_modules='CMicroHTTPD|CLibPQ'
wrappers=(Sources/MicroHTTPD Sources/Postgres)

# Any import declaration of a C module: attributes (@testable, @_exported, @preconcurrency, ...), an access
# level, and a kind (`import func CLibPQ.PQexec`) may come before the module name. Comment lines are skipped.
import_pattern="^[[:space:]]*(@[[:alnum:]_]+(\\([^)]*\\))?[[:space:]]+)*([[:alpha:]]+[[:space:]]+)?import[[:space:]]+((typealias|struct|class|enum|protocol|let|var|func)[[:space:]]+)?($c_modules)([.[:space:];]|\$)"
internal_pattern="^[[:space:]]*(@[[:alnum:]_]+(\\([^)]*\\))?[[:space:]]+)*internal[[:space:]]+import[[:space:]]"

files=()
for top in Sources Tests; do
    if [[ -d "$top" ]]; then
        while IFS= read -r -d '' file; do
            files+=("$file")
        done < <(find "$top" -type f -name '*.swift' -print0 | sort -z)
    fi
done

in_wrapper() {
    local wrapper
    for wrapper in "${wrappers[@]}"; do
        [[ "$1" == "$wrapper"/* ]] && return 0
    done
    return 1
}

problems=0
for file in "${files[@]}"; do
    while IFS= read -r hit; do
        line_number="${hit%%:*}"
        line="${hit#*:}"
        if ! in_wrapper "$file"; then
            echo "$file:$line_number: imports a C module outside ${wrappers[*]}: ${line#"${line%%[![:space:]]*}"}"
            problems=$((problems + 1))
        elif ! [[ "$line" =~ $internal_pattern ]]; then
            echo "$file:$line_number: must be \`internal import\`: ${line#"${line%%[![:space:]]*}"}"
            problems=$((problems + 1))
        fi
    done < <(grep -nE "$import_pattern" "$file" || true)
done

if ((problems > 0)); then
    echo "check-c-imports: $problems forbidden C import(s); only ${wrappers[*]} may import $c_modules, with \`internal import\`" >&2
    exit 1
fi
echo "check-c-imports: OK (${#files[@]} Swift files)"
