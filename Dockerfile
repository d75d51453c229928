# ActionHook image: builds with the same scripts/install-deps.sh that CI runs, ships a slim runtime.
#   docker build -t actionhook .          (or: docker-compose up --build)
# Every RUN is plain POSIX sh and the image needs no SHELL instruction: podman's default (OCI) image
# format drops SHELL and HEALTHCHECK, and the build must behave the same under Docker and podman.
# The Swift image's version is the toolchain the code is developed and tested with.
ARG SWIFT_IMAGE=swift:6.3.1-bookworm

# The dependencies alone are a stage of their own, which CI builds (scripts/check-image-resolve.sh).
FROM ${SWIFT_IMAGE} AS dependencies
WORKDIR /build

COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh --build-only && rm -rf /var/lib/apt/lists/*

# Dependencies first, so that a change in the sources does not fetch them again. Package.swift names the
# client package by path, so its manifest must be here too for the resolve to load the graph.
COPY Package.swift ./
COPY Clients/swift/Package.swift Clients/swift/
RUN swift package resolve

# What the build reads, and no more: an edit to the README or a script leaves the compiled layer cached.
# (The manifest names the test targets too, so their folders must exist.)
FROM dependencies AS build
COPY Sources/ Sources/
COPY Tests/ Tests/
COPY sql/ sql/
COPY Clients/swift/ Clients/swift/
RUN swift build -c release --product actionhook --static-swift-stdlib \
    && bin_dir="$(swift build -c release --show-bin-path)" \
    && mkdir -p /out \
    && cp "$bin_dir/actionhook" /out/ \
    && find -L "$bin_dir" -maxdepth 1 -name '*.resources' -exec cp -R {} /out/ \; \
    && cp /usr/libexec/swift/linux/swift-backtrace-static /out/

FROM debian:bookworm-slim

# Versions come from bookworm and its security updates; pinning them would break on every update.
# curl is for the health check below.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 libpq5 ca-certificates tzdata curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin actionhook

WORKDIR /app
COPY --from=build /out/ /app/
# The versions the image was built with (Package.resolved is not committed: see docs/operations.md, "With Docker").
COPY --from=build /build/Package.resolved /app/

# Fail the build, not the first start, when the binary needs a library this image lacks (or ldd fails).
RUN ldd /app/actionhook >/tmp/ldd.txt \
    && if grep 'not found' /tmp/ldd.txt >&2; then \
        echo "actionhook needs the libraries above, which the runtime image lacks" >&2; exit 1; \
    fi \
    && rm /tmp/ldd.txt

USER 10001:10001
ENV ACTIONHOOK_HOST=0.0.0.0 \
    ACTIONHOOK_PORT=8080 \
    SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/app/swift-backtrace-static
EXPOSE 8080

# sh expands the port the service was given; curl -f fails on any status but 2xx.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/bin/sh", "-c", "curl -fsS -o /dev/null --max-time 2 \"http://127.0.0.1:${ACTIONHOOK_PORT:-8080}/healthz\""]

ENTRYPOINT ["/app/actionhook"]
CMD ["serve", "--migrate"]
