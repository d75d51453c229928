#!/usr/bin/env bash
# Builds the Dockerfile's `dependencies` stage with podman: the Swift image the Dockerfile names, the same
# scripts/install-deps.sh --build-only as the scripts, and `swift package resolve` on the manifests it
# copies. That is the part of the image build that fits CI's time (a few minutes, most of them making the
# base images where no registry is reachable); `make compose-check` builds and runs the whole stack.
#
# Base images come from the registry or, where none is reachable, are built here as stand-ins from
# Debian's archive and this machine's Swift toolchain (scripts/container-engine.sh says how).
# Runs in CI and with ACTIONHOOK_TEST_FULL=1, or wherever podman is already installed; elsewhere it says it
# is skipped, since it installs podman and builds images of several GB. Needs root (rootful podman).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# shellcheck source=scripts/container-engine.sh
source scripts/container-engine.sh

log() { echo "check-image-resolve: $*" >&2; }

if [[ "${CI:-}" != true && "${CI:-}" != 1 && "${ACTIONHOOK_TEST_FULL:-}" != 1 ]] &&
    ! command -v podman >/dev/null 2>&1; then
    echo "check-image-resolve: skipped, podman is not installed (CI runs it; so does ACTIONHOOK_TEST_FULL=1 make test)"
    exit 0
fi

started=$SECONDS
log_dir="$repo_root/.build-compose"
bash scripts/install-deps.sh --with "${engine_packages[@]}" >/dev/null
engine_configure "$log_dir"

swift_image="$(sed -n 's/^ARG SWIFT_IMAGE=//p' Dockerfile)"
if [[ -z "$swift_image" ]]; then
    log "the Dockerfile names no ARG SWIFT_IMAGE default"
    exit 1
fi
ensure_base_image debian:bookworm-slim
ensure_base_image "$swift_image"
images_ready=$SECONDS

tag=localhost/actionhook-dependencies:check
build_log="$log_dir/image-resolve.log"
if ! "${engine_nice[@]}" podman build --format docker --target dependencies -t "$tag" . >"$build_log" 2>&1; then
    tail -n 40 "$build_log" >&2
    log "FAILED: the Dockerfile's dependencies stage does not build (log: ${build_log#"$repo_root"/})"
    exit 1
fi
podman rmi "$tag" >/dev/null 2>&1 || true
echo "check-image-resolve: OK, the dependencies stage of the Dockerfile builds on $swift_image" \
    "(base images $((images_ready - started))s, stage $((SECONDS - images_ready))s)"
