// UIKit is used from this file only: swift-testing looks for a UIKit cross-import overlay in any file that
// imports both, and there is none on Linux.
import ActionHookKit
import UIKit

/// The stand-in UIApplication, as the tests read it.
@MainActor
enum StandInApplication {
    static func backgroundTasks() -> ApplicationBackgroundTasks { ApplicationBackgroundTasks(application: .shared) }
    nonisolated static var begun: Int { MainActor.assumeIsolated { UIApplication.shared.standInBegun } }
    nonisolated static var openTasks: Int { MainActor.assumeIsolated { UIApplication.shared.standInOpenTasks.count } }
}
