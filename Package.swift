// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "actionhook",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "actionhook", targets: ["actionhook"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // User tokens (JWTs the app's backend signs) are verified with jwt-kit.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The app-side package, for the tests that run it against the service; the server does not use it.
        .package(path: "Clients/swift"),
    ],
    targets: [
        // The C libraries. Only `MicroHTTPD` and `Postgres` import these.
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),

        // The leaf every other target may use: a pthread mutex around a value (locks taken on every
        // request), a monitor (mutex and condition), and the lifecycle and threads every background loop
        // shares (started in order, stopped in the reverse order).
        .target(name: "Locks"),

        // The other leaf: what the C wrappers and the domain both need (calendar arithmetic, JSON string
        // literals, field errors), so that neither writes it again.
        .target(name: "Basics"),

        // Safe Swift wrappers over the C libraries.
        .target(
            name: "MicroHTTPD",
            dependencies: [
                "Basics",
                "CMicroHTTPD",
                "Locks",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "Postgres",
            dependencies: [
                "Basics",
                "CLibPQ",
                "Locks",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The domain: pure, no I/O.
        .target(
            name: "ActionHookCore",
            dependencies: [
                "Basics",
                "Locks",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),

        // The SQL migrations in `sql/`, shipped as resources.
        .target(
            name: "ActionHookSchema",
            path: "sql",
            exclude: ["README.md"],
            resources: [.copy("migrations")]
        ),

        // The domain's ports implemented on PostgreSQL; all SQL text lives here.
        .target(
            name: "ActionHookStore",
            dependencies: [
                "Basics",
                "Locks",
                "Postgres",
                "ActionHookCore",
                "ActionHookSchema",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Follow-up delivery: the outbox worker, signed webhooks, APNs over HTTP/2.
        .target(
            name: "ActionHookDelivery",
            dependencies: [
                "ActionHookCore",
                "Locks",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The operator's console: static HTML, CSS and JavaScript modules, and the routes that serve them.
        // The files are SwiftPM resources rather than Swift string literals so that they stay plain files
        // that editors, linters and the browser test read as they are; they ship beside the binary in its
        // resource bundle, as the migrations do (the Dockerfile copies every *.resources bundle).
        .target(
            name: "ActionHookConsole",
            dependencies: ["MicroHTTPD"],
            resources: [.copy("Assets")]
        ),

        // Routes, authentication, configuration and wiring.
        .target(
            name: "ActionHookServer",
            dependencies: [
                "Basics",
                "Locks",
                "MicroHTTPD",
                "Postgres",
                "ActionHookCore",
                "ActionHookStore",
                "ActionHookDelivery",
                "ActionHookConsole",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The admin-API client commands (apply, export, test, apps, keys) and the local webhook inbox: HTTP
        // only, never the store.
        .target(
            name: "ActionHookCLI",
            dependencies: [
                "ActionHookCore",
                "Locks",
                "MicroHTTPD",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Yams", package: "Yams"),
                // `users token` mints development user tokens.
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        .executableTarget(
            name: "actionhook",
            dependencies: [
                "ActionHookServer",
                "ActionHookCLI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // The fuzz targets over the domain's parsers and validators (scripts/check-fuzz.sh builds them with
        // libFuzzer; a plain build replays inputs from files).
        .executableTarget(
            name: "ActionHookFuzz",
            dependencies: [
                "ActionHookCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),

        // Tests. `TestSupport` holds the raw HTTP client, the per-test database and a loopback listener;
        // `ServiceTestSupport` runs the service over a test database and stands in for what it talks to
        // (webhook receivers, APNs, a lossy network). The test targets mirror the source targets.
        .target(
            name: "TestSupport",
            dependencies: ["Postgres"],
            path: "Tests/TestSupport"
        ),
        .target(
            name: "ServiceTestSupport",
            dependencies: [
                "TestSupport", "ActionHookServer", "ActionHookCore", "Postgres", "MicroHTTPD",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/ServiceTestSupport"
        ),
        .testTarget(name: "LocksTests", dependencies: ["Locks"]),
        .testTarget(name: "BasicsTests", dependencies: ["Basics"]),
        .testTarget(name: "MicroHTTPDTests", dependencies: ["MicroHTTPD", "TestSupport"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(
            name: "ActionHookCoreTests",
            dependencies: ["ActionHookCore", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "ActionHookStoreTests",
            dependencies: [
                "ActionHookStore", "ActionHookCore", "ActionHookSchema", "Postgres", "TestSupport",
                "ServiceTestSupport", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ActionHookDeliveryTests",
            dependencies: [
                "ActionHookDelivery", "ActionHookServer", "ActionHookStore", "ActionHookCore", "Postgres",
                "TestSupport", "ServiceTestSupport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ActionHookServerTests",
            dependencies: [
                "ActionHookServer", "ActionHookStore", "ActionHookDelivery", "ActionHookCore", "Postgres", "MicroHTTPD",
                "ActionHookCLI", "TestSupport", "ServiceTestSupport", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ActionHookCLITests",
            dependencies: ["ActionHookCLI", "ActionHookServer", "ActionHookCore", "TestSupport", "ServiceTestSupport"]
        ),
        // ActionHookKit, the app-side package, against the service: the only target that uses it. Its suite
        // runs in a `swift test` of its own (scripts/test.sh).
        .testTarget(
            name: "ClientIntegrationTests",
            dependencies: [
                "TestSupport", "ServiceTestSupport", .product(name: "ActionHookKit", package: "swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
