#!/usr/bin/env bash
# Every relative link of the documentation resolves: the file (or folder) it names exists, and its `#anchor`
# matches a heading of the target file as GitHub makes heading anchors (lower case, punctuation dropped,
# spaces to hyphens, a repeated heading suffixed -1, -2, …) or an explicit `<a id>`/`<a name>`.
#
#   scripts/check-docs.sh [root]   root defaults to the repository
#
# Checks README.md, ARCHITECTURE.md, CHANGELOG.md, docs/*.md, sql/README.md, Clients/swift/README.md and
# Clients/swift/CHANGELOG.md. Links inside code blocks and code spans are not links and are skipped, as are
# absolute URLs (http:, https:, mailto:). Fails listing each broken link with its file and line.
set -euo pipefail

root="${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}"
cd "$root"

files=(README.md ARCHITECTURE.md CHANGELOG.md sql/README.md Clients/swift/README.md Clients/swift/CHANGELOG.md)
for page in docs/*.md; do
    [[ -f "$page" ]] && files+=("$page")
done

python3 - "${files[@]}" <<'PY'
import os
import re
import sys
import unicodedata

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
ANCHOR_TAG = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)")


def strip_code_spans(line):
    return re.sub(r"(`+)(.+?)\1", "", line)


def prose_lines(path):
    """The file's lines outside fenced code blocks, with their numbers."""
    fence = None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            match = FENCE.match(line)
            if match:
                marker = match.group(1)
                if fence is None:
                    fence = marker[0] * len(marker)
                    continue
                if marker[0] == fence[0] and len(marker) >= len(fence):
                    fence = None
                    continue
            if fence is None:
                yield number, line.rstrip("\n")


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML goes
    text = text.replace("`", "").lower()
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in " -_" or category[0] in "LN" or category == "Mn":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            for tag in ANCHOR_TAG.findall(line):
                found.add(tag)
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        anchor_cache[path] = found
    return anchor_cache[path]


def targets(path):
    for number, line in prose_lines(path):
        reference = REFERENCE.match(line)
        if reference:
            yield number, reference.group(1)
            continue
        for match in LINK.finditer(strip_code_spans(line)):
            yield number, match.group(1)


broken = []
checked = 0
for path in sys.argv[1:]:
    for number, target in targets(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # absolute: http:, https:, mailto:
        checked += 1
        name, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), name)) if name else path
        if not os.path.exists(resolved):
            broken.append(f"{path}:{number}: {target}: no file {resolved}")
            continue
        if not anchor:
            continue
        if os.path.isdir(resolved) or not resolved.endswith(".md"):
            broken.append(f"{path}:{number}: {target}: an anchor into {resolved}, which has no headings")
        elif anchor not in anchors(resolved):
            broken.append(f"{path}:{number}: {target}: no heading of {resolved} has the anchor #{anchor}")

for line in broken:
    print(line)
if broken:
    print(f"check-docs: {len(broken)} broken link(s) of {checked}", file=sys.stderr)
    sys.exit(1)
print(f"check-docs: OK ({checked} relative links in {len(sys.argv) - 1} files)")
PY
