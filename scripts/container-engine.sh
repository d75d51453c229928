#!/usr/bin/env bash
# Sourced by scripts/compose-check.sh and scripts/check-image-resolve.sh: a rootful podman for the image
# checks, and the base images the project's Dockerfile and docker-compose.yml name.
#
#   engine_packages                the Debian packages to install (scripts/install-deps.sh --with ...)
#   engine_configure DIR           a containers.conf of its own in DIR, exported as CONTAINERS_CONF
#   engine_start DIR               engine_configure, then podman's Docker-compatible API on a socket in DIR,
#                                  exported as DOCKER_HOST (for docker-compose)
#   engine_stop                    stops that API service
#   ensure_base_image NAME         NAME (e.g. postgres:15) from the registry, or a stand-in built here
#   remove_base_images             removes the stand-ins this file built
#
# Where no image registry is reachable (as on the project's own machines), ensure_base_image builds
# stand-ins from Debian's archive and this machine's Swift toolchain, and says so: debian:bookworm-slim by
# debootstrap, swift:<version>-bookworm and postgres:15 from scripts/base-images/. They carry the label
# org.actionhook.stand-in, and the checks use them exactly as they would the official images.

engine_repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The builds run beside other work on small machines.
engine_nice=(nice -n 19)
# shellcheck disable=SC2034 # for the scripts that source this file
# iptables: netavark sets up the build containers' network with it (a machine without it fails every RUN
# with "netavark: No such file or directory").
engine_packages=(podman runc netavark aardvark-dns iptables debootstrap)
engine_service_pid=
engine_dir=
stand_in_label=org.actionhook.stand-in

engine_log() { echo "container-engine: $*" >&2; }

engine_configure() {
    engine_dir="$1"
    mkdir -p "$engine_dir"
    if [[ "$(id -u)" != 0 ]]; then
        engine_log "the image checks use rootful podman: run them as root"
        return 1
    fi
    # runc and cgroupfs because no systemd runs here (and crun is not installed); events in a file for the
    # same reason; the containers' open-file and process limits within this shell's own hard limits, which
    # a container may not exceed (podman's default asks for more).
    local nofile nproc
    nofile="$(ulimit -Hn)"
    nproc="$(ulimit -Hu)"
    [[ "$nofile" == unlimited || "$nofile" -gt 65536 ]] && nofile=65536
    [[ "$nproc" == unlimited || "$nproc" -gt 32768 ]] && nproc=32768
    cat >"$engine_dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
network_backend = "netavark"
EOF
    export CONTAINERS_CONF="$engine_dir/containers.conf"
    # Docker's image format keeps HEALTHCHECK (podman's default, OCI, drops it).
    export BUILDAH_FORMAT=docker
}

engine_start() {
    engine_configure "$1" || return 1
    local socket="$engine_dir/podman.sock"
    rm -f "$socket"
    "${engine_nice[@]}" podman system service --time=0 "unix://$socket" >"$engine_dir/podman-service.log" 2>&1 &
    engine_service_pid=$!
    local waited=0
    until curl -fsS -o /dev/null --max-time 2 --unix-socket "$socket" http://podman/_ping 2>/dev/null; do
        if ! kill -0 "$engine_service_pid" 2>/dev/null || ((waited >= 100)); then
            engine_log "podman's API service did not start (see $engine_dir/podman-service.log)"
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    export DOCKER_HOST="unix://$socket"
}

engine_stop() {
    if [[ -n "$engine_service_pid" ]]; then
        kill "$engine_service_pid" 2>/dev/null || true
        wait "$engine_service_pid" 2>/dev/null || true
        engine_service_pid=
    fi
    if [[ -n "$engine_dir" ]]; then
        rm -f "$engine_dir/podman.sock"
    fi
}

# stand_in_recipe NAME: what NAME's stand-in is built from, as a digest; the stand-in carries it in its
# label, and one with another digest (its recipe changed since) is built again.
stand_in_recipe() {
    local folder
    case "$1" in
        debian:*) folder= ;;
        swift:*) folder=swift ;;
        postgres:*) folder=postgres ;;
    esac
    {
        sed -n '/^build_debian_slim()/,/^}/p' "$engine_repo_root/scripts/container-engine.sh"
        if [[ -n "$folder" ]]; then
            cat "$engine_repo_root/scripts/base-images/$folder"/*
        fi
    } | sha256sum | cut -c1-16
}

# ensure_base_image NAME: present locally, pulled, or built here as a stand-in.
ensure_base_image() {
    local name="$1" reference="docker.io/library/$1" recipe built
    recipe="$(stand_in_recipe "$name")"
    if podman image exists "$reference"; then
        built="$(podman image inspect --format "{{index .Labels \"$stand_in_label\"}}" "$reference" 2>/dev/null || true)"
        if [[ -z "$built" ]]; then
            engine_log "$name: present"
            return 0
        elif [[ "$built" == "$recipe" ]]; then
            engine_log "$name: the stand-in built here earlier"
            return 0
        fi
        engine_log "$name: the stand-in here was built from an older recipe; building it again"
        podman rmi "$reference" >/dev/null 2>&1 || true
    fi
    if timeout 120 podman pull --quiet "$reference" >/dev/null 2>&1; then
        engine_log "$name: pulled from the registry"
        return 0
    fi
    engine_log "$name: no image registry is reachable; building a stand-in from Debian's archive"
    case "$name" in
        debian:bookworm-slim) build_debian_slim "$reference" "$recipe" ;;
        swift:*-bookworm) build_swift_stand_in "$name" "$reference" "$recipe" ;;
        postgres:15)
            ensure_base_image debian:bookworm-slim &&
                engine_build postgres "$recipe" -t "$reference" "$engine_repo_root/scripts/base-images/postgres"
            ;;
        *)
            engine_log "$name: no stand-in is known for it"
            return 1
            ;;
    esac
}

# engine_build NAME RECIPE ARGS...: podman build ARGS of a stand-in, its log in the engine's directory.
engine_build() {
    local name="$1" recipe="$2"
    shift 2
    if ! "${engine_nice[@]}" podman build --format docker --label "$stand_in_label=$recipe" "$@" \
        >"$engine_dir/stand-in-$name.log" 2>&1; then
        tail -n 30 "$engine_dir/stand-in-$name.log" >&2
        engine_log "building the $name stand-in failed (see $engine_dir/stand-in-$name.log)"
        return 1
    fi
}

# debian:bookworm-slim: a minimal bookworm from the machine's Debian mirror, with the official image's
# package sources (bookworm, its updates and security updates) and command.
build_debian_slim() {
    local reference="$1" recipe="$2" mirror rootfs status=0
    mirror="$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)" || true
    mirror="${mirror:-http://deb.debian.org/debian}"
    rootfs="$(mktemp -d "${TMPDIR:-/tmp}/actionhook-rootfs.XXXXXX")"
    engine_log "debootstrap --variant=minbase bookworm from $mirror"
    if "${engine_nice[@]}" debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$engine_dir/debootstrap.log" 2>&1; then
        rm -f "$rootfs/etc/apt/sources.list"
        cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
        tar -C "$rootfs" -c . | podman import --quiet --change 'CMD ["bash"]' \
            --change "LABEL $stand_in_label=$recipe" - "$reference" >/dev/null || status=$?
    else
        status=$?
        engine_log "debootstrap failed (see $engine_dir/debootstrap.log)"
    fi
    rm -rf "$rootfs"
    return "$status"
}

# swift:<version>-bookworm from this machine's toolchain, which must be that version.
build_swift_stand_in() {
    local name="$1" reference="$2" recipe="$3" version toolchain swift_bin mirror mounts=()
    version="${name#swift:}"
    version="${version%-bookworm}"
    swift_bin="$(command -v swift || true)"
    [[ -n "$swift_bin" ]] || swift_bin=/opt/swift/usr/bin/swift
    toolchain="$(cd "$(dirname "$(readlink -f "$swift_bin")")/../.." && pwd)"
    if [[ ! -x "$toolchain/usr/bin/swift" ]]; then
        engine_log "$name: no Swift toolchain here to stand in with"
        return 1
    fi
    if [[ "$("$toolchain/usr/bin/swift" --version 2>/dev/null)" != *"Swift version $version "* ]]; then
        engine_log "$name: the toolchain in $toolchain is not Swift $version, so it cannot stand in for it"
        return 1
    fi
    ensure_base_image debian:bookworm-slim || return 1
    mounts=(-v "$toolchain:/toolchain:ro")
    # The machine's Swift package mirror (git's url.<mirror>.insteadOf https://github.com/), when it has one.
    mirror="$(git config --get-regexp '^url\..*\.insteadof$' 2>/dev/null |
        awk '$2 == "https://github.com/" && !found { sub(/^url\./, "", $1); sub(/\.insteadof$/, "", $1); print $1; found = 1 }')" || true
    if [[ -n "$mirror" && -d "$mirror" ]]; then
        mounts+=(-v "$mirror:/packages:ro")
        engine_log "$name: Debian's packages, the toolchain in $toolchain and the package mirror in $mirror"
    else
        engine_log "$name: Debian's packages and the toolchain in $toolchain"
    fi
    engine_build swift "$recipe" "${mounts[@]}" -t "$reference" "$engine_repo_root/scripts/base-images/swift"
}

remove_base_images() {
    local ids
    ids="$(podman images --quiet --filter "label=$stand_in_label" | sort -u)"
    if [[ -n "$ids" ]]; then
        # shellcheck disable=SC2086 # one id a word
        podman rmi --force $ids >/dev/null 2>&1 || engine_log "could not remove every stand-in image"
    fi
}
