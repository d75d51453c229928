# ActionHook image: builds with the same scripts/install-deps.sh that CI runs, ships a slim runtime.
#   docker build -t actionhook .          (or: docker-compose up --build)
# The Swift image's version should match the toolchain the code is developed and tested with.
ARG SWIFT_IMAGE=swift:6.1-bookworm

FROM ${SWIFT_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /build

COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh --build-only && rm -rf /var/lib/apt/lists/*

# Dependencies first, so that a change in the sources does not fetch them again.
COPY Package.swift ./
RUN swift package resolve

COPY . .
RUN swift build -c release --product actionhook --static-swift-stdlib \
    && bin_dir="$(swift build -c release --show-bin-path)" \
    && mkdir -p /out \
    && cp "$bin_dir/actionhook" /out/ \
    && find -L "$bin_dir" -maxdepth 1 -name '*.resources' -exec cp -R {} /out/ \; \
    && cp /usr/libexec/swift/linux/swift-backtrace-static /out/

FROM debian:bookworm-slim
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Versions come from bookworm and its security updates; pinning them would break on every update.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 libpq5 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin actionhook

WORKDIR /app
COPY --from=build /out/ /app/

# Fail the build, not the first start, when the binary needs a library this image lacks.
RUN missing="$(ldd /app/actionhook | grep 'not found' || true)"; \
    if [[ -n "$missing" ]]; then \
        echo "actionhook needs libraries that the runtime image lacks: $missing" >&2; exit 1; \
    fi

USER 10001:10001
ENV ACTIONHOOK_HOST=0.0.0.0 \
    ACTIONHOOK_PORT=8080 \
    SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/app/swift-backtrace-static
EXPOSE 8080

# bash's /dev/tcp is enough to ask /healthz; the slim image needs no curl for it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["bash", "-c", "exec 3<>\"/dev/tcp/127.0.0.1/${ACTIONHOOK_PORT:-8080}\" && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && read -r -t 3 status <&3 && [[ \"$status\" == *' 200 '* ]]"]

ENTRYPOINT ["/app/actionhook"]
CMD ["serve", "--migrate"]
