#!/usr/bin/env bash
# ActionHookKit (Clients/swift), the package iOS apps add: builds it on its own, as an app's SwiftPM would
# (none of the server's dependencies), and runs its tests, among them the UserNotifications glue compiled
# against the stand-in with Apple's signatures. Its tests against the real service run in `swift test`
# of the root package (the ClientIntegrationTests target).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../Clients/swift"

swift build --build-tests
swift test --skip-build --disable-xctest
# The package must not reach for anything the server builds: no dependency on Apple platforms, and on Linux only
# swift-crypto (in place of CryptoKit), which the manifest adds under `#if os(Linux)`.
direct="$(swift package show-dependencies --format json | python3 -c '
import json, sys
print(" ".join(sorted(d["identity"] for d in json.load(sys.stdin)["dependencies"])))')"
if [[ "$direct" != "swift-crypto" ]]; then
    echo "check-client-package: ActionHookKit may depend on swift-crypto (Linux only), not on: $direct" >&2
    exit 1
fi
if ! grep -q '^#if os(Linux)' Package.swift || [[ "$(sed -n '/^#if os(Linux)/,$p' Package.swift | grep -c 'swift-crypto.git')" != 1 ]] ||
    [[ "$(grep -c 'swift-crypto.git' Package.swift)" != 1 ]]; then
    echo "check-client-package: swift-crypto must be added under #if os(Linux) only" >&2
    exit 1
fi
echo "ActionHookKit builds alone and its tests pass"
