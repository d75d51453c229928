#!/usr/bin/env bash
# ActionHookKit (Clients/swift), the package iOS apps add: builds it on its own, as an app's SwiftPM would
# (none of the server's dependencies), and runs its tests, among them the UserNotifications glue compiled
# against the stand-in with Apple's signatures. Its tests against the real service run in `swift test`
# of the root package (the ClientIntegrationTests target).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../Clients/swift"

swift build --build-tests
swift test --skip-build --disable-xctest
# The package must not reach for anything the server builds.
if ! swift package show-dependencies --format json | tr -d ' \n' | grep -q '"dependencies":\[\]'; then
    echo "check-client-package: ActionHookKit must have no package dependencies" >&2
    exit 1
fi
echo "ActionHookKit builds alone and its tests pass"
