// swift-tools-version:6.0
import PackageDescription

// ActionHookKit: the app side of ActionHook. Its core is plain Swift (Foundation, URLSession, and CryptoKit's
// P-256 for reply signatures, which is swift-crypto's identical API on Linux), so it builds and is tested on Linux
// as well as on Apple platforms; the glue to UserNotifications, the background URLSession, UIKit's background
// tasks, Network and the Keychain compiles on Apple platforms. On Apple platforms it has no package dependency;
// swift-crypto is added on Linux only (below), where CryptoKit does not exist.
let package = Package(
    name: "ActionHookKit",
    platforms: [.iOS(.v15), .macOS(.v12), .watchOS(.v8)],
    products: [
        .library(name: "ActionHookKit", targets: ["ActionHookKit"])
    ],
    targets: [
        .target(name: "ActionHookKit"),
        .testTarget(name: "ActionHookKitTests", dependencies: ["ActionHookKit"]),
        // The queue's cost (`make bench-client` in the ActionHook repository); not part of the product.
        .executableTarget(name: "ActionHookKitBenchmark", dependencies: ["ActionHookKit"], path: "Benchmarks"),
    ],
    swiftLanguageModes: [.v6]
)

#if os(Linux)
    // Reply signatures (P-256) on Linux: swift-crypto, the same API as CryptoKit, which Apple platforms use instead.
    package.dependencies += [.package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2")]
    for target in package.targets where ["ActionHookKit", "ActionHookKitTests"].contains(target.name) {
        target.dependencies += [.product(name: "Crypto", package: "swift-crypto")]
    }

    // The Apple frameworks the glue uses do not exist on Linux (and corelibs Foundation has no background
    // URLSession). To type-check the glue here anyway, test-only modules declare the subset of Apple's API the glue
    // uses, with Apple's names and signatures: `UserNotifications`, `UIKit`, `Network` and `Security` under their
    // own names, `URLSessionStandIn` for the background session, and `SecureEnclaveStandIn` for CryptoKit's Secure
    // Enclave (beside swift-crypto; not named CryptoKit, which the library's core checks for). A test target
    // compiles the glue's own files (symbolic links, with ACTIONHOOKKIT_GLUE_CHECK defined) against them and runs
    // them. None of this is part of the library product.
    package.targets += [
        .target(name: "UserNotifications", path: "Tests/UserNotificationsStandIn"),
        .target(name: "UIKit", path: "Tests/UIKitStandIn"),
        .target(name: "Network", path: "Tests/NetworkStandIn"),
        .target(name: "URLSessionStandIn", path: "Tests/URLSessionStandIn"),
        .target(name: "Security", path: "Tests/SecurityStandIn"),
        .target(
            name: "SecureEnclaveStandIn",
            dependencies: ["Security", .product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/SecureEnclaveStandIn"
        ),
        .testTarget(
            name: "GlueTypeCheck",
            dependencies: [
                "ActionHookKit", "UserNotifications", "UIKit", "Network", "URLSessionStandIn", "Security",
                "SecureEnclaveStandIn", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: [.define("ACTIONHOOKKIT_GLUE_CHECK")]
        ),
    ]
#endif
