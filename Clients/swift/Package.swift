// swift-tools-version:6.0
import PackageDescription

// ActionHookKit: the app side of ActionHook. Plain Swift (Foundation and URLSession only), so it builds and
// is tested on Linux as well as on Apple platforms; the UserNotifications glue compiles on Apple platforms.
let package = Package(
    name: "ActionHookKit",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "ActionHookKit", targets: ["ActionHookKit"])
    ],
    targets: [
        .target(name: "ActionHookKit"),
        .testTarget(name: "ActionHookKitTests", dependencies: ["ActionHookKit"]),
    ],
    swiftLanguageModes: [.v6]
)

#if os(Linux)
// UserNotifications does not exist on Linux. To type-check the glue here anyway, a test-only module named
// `UserNotifications` declares the subset of Apple's API the glue uses, with Apple's names and signatures,
// and a test target compiles the glue's own files (symbolic links, with ACTIONHOOKKIT_GLUE_CHECK defined)
// against it and runs the conversions. None of this is part of the library product.
package.targets += [
    .target(name: "UserNotifications", path: "Tests/UserNotificationsStandIn"),
    .testTarget(
        name: "GlueTypeCheck",
        dependencies: ["ActionHookKit", "UserNotifications"],
        swiftSettings: [.define("ACTIONHOOKKIT_GLUE_CHECK")]
    ),
]
#endif
