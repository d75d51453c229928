import ArgumentParser
import Dispatch
import Foundation
import Logging

/// `actionhook inbox`: a local webhook receiver that checks and prints each signed delivery.
public struct Inbox: ParsableCommand {
    public static let configuration = CommandConfiguration(
        abstract: "Receive webhooks locally: check each delivery's signature and print it.",
        discussion: """
            Point an app's webhook at http://127.0.0.1:<port>/ (the service needs \
            ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS=1 to deliver to this machine). Each delivery's \
            Standard Webhooks signature is checked and printed with it; every delivery is answered 204.
            """)

    @Option(help: "The app's webhook signing secret (whsec_…); ACTIONHOOK_INBOX_SECRET when omitted.")
    var secret: String?

    @Option(help: "The port to listen on.")
    var port = 8081

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    /// Creates the command (ArgumentParser fills its options).
    public init() {}

    public func run() throws {
        // The secret may come from the environment so that it stays out of the process list.
        guard let secret = secret ?? ProcessInfo.processInfo.environment["ACTIONHOOK_INBOX_SECRET"],
            secret.hasPrefix("whsec_")
        else {
            throw ValidationError("--secret (or ACTIONHOOK_INBOX_SECRET) must be a whsec_ secret")
        }
        // Deliveries arrive on several server threads; one queue keeps each report in one piece.
        let printing = DispatchQueue(label: "actionhook.inbox.output")
        let inbox = WebhookInbox(
            host: host, port: port, secret: secret, logger: Logger(label: "actionhook-inbox"),
            onDelivery: { delivery in
                printing.sync { FileHandle.standardOutput.write(Data(delivery.report.utf8)) }
            })
        do {
            try inbox.start()
        } catch {
            FileHandle.standardError.write(
                Data("actionhook inbox: could not listen on \(host):\(port): \(error)\n".utf8))
            throw ExitCode.failure
        }
        FileHandle.standardOutput.write(Data("actionhook inbox: listening on http://\(host):\(inbox.port)/\n".utf8))

        waitForStopSignal()
        inbox.stop()
    }
}
