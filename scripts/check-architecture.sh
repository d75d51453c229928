#!/usr/bin/env bash
# ARCHITECTURE.md agrees with the code, wherever that can be checked mechanically:
#
# - its target table names every target of Package.swift and no other, each of the kind Package.swift gives it;
# - each target's "may import" column is the target's own first-party dependencies in Package.swift;
# - no Swift file of a target imports a first-party target (or C module) that its row does not list;
# - every file path it cites in backticks exists (from the repository root, from Sources/, or, for a bare
#   file name, as exactly one file under Sources/ or Tests/);
# - every Swift type it cites in backticks (`IngestWriter`, `OutboxStore.claimBatch`) is declared under
#   Sources/, with the member, when one is named, declared in some file of the sources.
#
#   scripts/check-architecture.sh [root]   root defaults to the repository
#
# Fails listing each disagreement.
set -euo pipefail

root="${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}"
cd "$root"

python3 - <<'PY'
import os
import re
import sys

problems = []


# Package.swift: each target's kind, folder and first-party dependencies.
def targets_of_package(text):
    found = {}
    for match in re.finditer(r"\.(target|testTarget|executableTarget|systemLibrary)\(\s*name:\s*\"([^\"]+)\"", text):
        kind, name = match.group(1), match.group(2)
        # The call's arguments: up to the parenthesis that closes it.
        depth, index = 1, match.end()
        while depth and index < len(text):
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            index += 1
        arguments = text[match.end():index - 1]
        dependencies = set()
        listed = re.search(r"dependencies:\s*\[", arguments)
        if listed:
            depth, end = 1, listed.end()
            while depth and end < len(arguments):
                depth += {"[": 1, "]": -1}.get(arguments[end], 0)
                end += 1
            inner = arguments[listed.end():end - 1]
            inner = re.sub(r"\.product\([^)]*\)", "", inner)  # other packages' products
            dependencies = set(re.findall(r"\"([^\"]+)\"", inner))
        path = re.search(r"path:\s*\"([^\"]+)\"", arguments)
        folder = path.group(1) if path else ("Tests/" if kind == "testTarget" else "Sources/") + name
        found[name] = {"kind": kind, "dependencies": dependencies, "folder": folder}
    return found


package = targets_of_package(open("Package.swift", encoding="utf-8").read())
architecture = open("ARCHITECTURE.md", encoding="utf-8").read()

# The target table: | `Name` | kind | `A`, `B` or — | what it holds |
KINDS = {"C library": "systemLibrary", "library": "target", "executable": "executableTarget", "tests": "testTarget"}
table = {}
for line in architecture.splitlines():
    row = re.match(r"^\|\s*`([A-Za-z][A-Za-z0-9]*)`\s*\|\s*([^|]+?)\s*\|([^|]*)\|", line)
    if not row or row.group(2) not in KINDS:
        continue
    name = row.group(1)
    if name in table:
        problems.append(f"ARCHITECTURE.md: target {name} has two rows")
    table[name] = {"kind": KINDS[row.group(2)], "imports": set(re.findall(r"`([A-Za-z][A-Za-z0-9]*)`", row.group(3)))}

if not table:
    problems.append("ARCHITECTURE.md: no target table found (rows of | `Target` | kind | may import | … |)")
for name in sorted(set(package) - set(table)):
    problems.append(f"ARCHITECTURE.md: target {name} of Package.swift is missing from the target table")
for name in sorted(set(table) - set(package)):
    problems.append(f"ARCHITECTURE.md: target {name} is not a target of Package.swift")
for name in sorted(set(table) & set(package)):
    row, target = table[name], package[name]
    if row["kind"] != target["kind"]:
        problems.append(f"ARCHITECTURE.md: target {name} is a .{target['kind']} in Package.swift, not a .{row['kind']}")
    if row["imports"] != target["dependencies"]:
        missing = sorted(target["dependencies"] - row["imports"])
        extra = sorted(row["imports"] - target["dependencies"])
        problems.append(
            f"ARCHITECTURE.md: target {name} may import {', '.join(sorted(row['imports'])) or 'nothing'}, but "
            f"Package.swift gives it {', '.join(sorted(target['dependencies'])) or 'nothing'}"
            + (f" (not in the table: {', '.join(missing)})" if missing else "")
            + (f" (not in Package.swift: {', '.join(extra)})" if extra else ""))

# The sources: a file imports only what its target's row allows. Other packages' modules and the system's are
# not this check's business (SwiftPM refuses an undeclared product).
IMPORT = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"
    r"(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_][A-Za-z0-9_]*)")
files_checked = 0
for name, row in sorted(table.items()):
    if name not in package:
        continue
    folder = package[name]["folder"]
    for directory, _, names in os.walk(folder):
        for file_name in sorted(names):
            if not file_name.endswith(".swift"):
                continue
            path = os.path.join(directory, file_name)
            files_checked += 1
            with open(path, encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    match = IMPORT.match(line)
                    if not match:
                        continue
                    module = match.group(1)
                    if module in package and module != name and module not in row["imports"]:
                        problems.append(f"{path}:{number}: imports {module}, which ARCHITECTURE.md does not let {name} import")

# Every cited file path exists.
source_files = {}
for top in ("Sources", "Tests"):
    for directory, _, names in os.walk(top):
        for file_name in names:
            source_files.setdefault(file_name, []).append(os.path.join(directory, file_name))
spans = re.findall(r"`([^`\n]+)`", architecture)
PATH = re.compile(r"^[A-Za-z0-9_.*/-]+\.(swift|sql|md|sh|yaml|yml|json|py|c|h)$|^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*-]+)+/?$")
paths_checked = 0
for span in sorted(set(spans)):
    if not PATH.match(span) or span.startswith("/"):
        continue
    paths_checked += 1
    if "*" in span or span.endswith("/"):
        # `*` is any name part and `NNN` a migration's number.
        pattern = re.escape(span.rstrip("/")).replace(r"\*", "[^/]*").replace("NNN", "[0-9]{3}")
        candidates = [span.rstrip("/"), "Sources/" + span.rstrip("/")]
        ok = any(os.path.exists(c) for c in candidates if "*" not in c)
        if not ok:
            for directory, dirs, names in os.walk("."):
                for entry in dirs + names:
                    relative = os.path.relpath(os.path.join(directory, entry), ".")
                    if re.fullmatch(pattern, relative) or re.fullmatch("Sources/" + pattern, relative):
                        ok = True
                        break
                if ok:
                    break
        if not ok:
            problems.append(f"ARCHITECTURE.md: `{span}` matches no file")
        continue
    if os.path.exists(span) or os.path.exists(os.path.join("Sources", span)):
        continue
    if "/" not in span:
        found = source_files.get(span, [])
        if len(found) == 1:
            continue
        if found:
            problems.append(f"ARCHITECTURE.md: `{span}` names {len(found)} files ({', '.join(sorted(found))}); give its folder")
            continue
    # A shortened path (`Ingest/IngestPlan.swift`): the end of exactly one file's path.
    if "/" in span:
        matches = [p for paths in source_files.values() for p in paths if p.endswith("/" + span)]
        if len(matches) == 1:
            continue
    problems.append(f"ARCHITECTURE.md: `{span}` is not a file of the repository")

# Every cited Swift type (and member) is declared.
declared_types, declared_members = set(), set()
DECLARATION = re.compile(r"\b(?:struct|class|enum|protocol|actor|typealias|extension)\s+([A-Z][A-Za-z0-9_]*)")
MEMBER = re.compile(r"\b(?:func|var|let|case|init)\s+`?([a-z_][A-Za-z0-9_]*)")
for directory, _, names in os.walk("Sources"):
    for file_name in names:
        if file_name.endswith(".swift"):
            text = open(os.path.join(directory, file_name), encoding="utf-8").read()
            declared_types.update(DECLARATION.findall(text))
            declared_members.update(MEMBER.findall(text))
symbols_checked = 0
for span in sorted(set(spans)):
    symbol = re.fullmatch(r"([A-Z][a-z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)(?:\.([a-z][A-Za-z0-9]*)(?:\([^)]*\))?)?", span)
    if not symbol or span in package or span in table or PATH.match(span):
        continue
    type_name, member = symbol.group(1), symbol.group(2)
    symbols_checked += 1
    if type_name not in declared_types:
        problems.append(f"ARCHITECTURE.md: `{span}`: no type {type_name} is declared under Sources/")
    elif member and member not in declared_members:
        problems.append(f"ARCHITECTURE.md: `{span}`: no member {member} is declared under Sources/")
# Members cited on their own, as `.name` or `name(_:…)`.
for span in sorted(set(spans)):
    member = re.fullmatch(r"\.?([a-z][A-Za-z0-9]*)\((?:[A-Za-z_]+:)*\)", span)
    if member:
        symbols_checked += 1
        if member.group(1) not in declared_members:
            problems.append(f"ARCHITECTURE.md: `{span}`: no member {member.group(1)} is declared under Sources/")

for problem in problems:
    print(problem)
if problems:
    print(f"check-architecture: {len(problems)} problem(s)", file=sys.stderr)
    sys.exit(1)
print(
    f"check-architecture: OK ({len(table)} targets as in Package.swift, imports of {files_checked} Swift files, "
    f"{paths_checked} paths, {symbols_checked} symbols)")
PY
