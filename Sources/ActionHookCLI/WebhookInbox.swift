import ActionHookCore
import Foundation
import Logging
import MicroHTTPD

/// A webhook receiver for local development (`actionhook inbox`): it checks the Standard Webhooks
/// signature of each delivery with the app's secret and reports it (id, valid or not, body).
///
/// Every delivery is answered `204`: it is a place to look at what arrives, and the verdict is in what
/// it prints (a production receiver would refuse a bad signature instead).
public final class WebhookInbox: Sendable {
    /// One delivery as the inbox saw it.
    public struct Delivery: Sendable {
        /// The request's path.
        public let path: String
        /// `webhook-id`, when sent.
        public let id: String?
        /// `webhook-timestamp`, when sent.
        public let timestamp: String?
        /// Why the signature failed, or `nil` when it is valid.
        public let failure: WebhookSignature.Failure?
        /// The body as sent.
        public let body: [UInt8]

        /// Creates a delivery record.
        public init(path: String, id: String?, timestamp: String?, failure: WebhookSignature.Failure?, body: [UInt8]) {
            self.path = path
            self.id = id
            self.timestamp = timestamp
            self.failure = failure
            self.body = body
        }

        /// Whether the signature is valid.
        public var isValid: Bool { failure == nil }

        /// The lines the inbox prints: a head line, then the body (pretty when it is JSON). Whatever the
        /// sender chose (path, headers, body) has its control characters written out visibly, signed or
        /// not: it is printed to a terminal.
        public var report: String {
            let verdict = failure.map { "INVALID signature (\($0))" } ?? "valid signature"
            let head = "webhook \(id ?? "(no webhook-id)") at \(timestamp ?? "(no timestamp)") on \(path): \(verdict)"
            let text: String
            if let object = try? JSONSerialization.jsonObject(with: Data(body)),
                let pretty = try? JSONSerialization.data(
                    withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            {
                text = String(decoding: pretty, as: UTF8.self)
            } else {
                text = String(decoding: body, as: UTF8.self)
            }
            return TerminalText.escaped(head + "\n" + text) + "\n"
        }
    }

    let server: HTTPServer

    /// Creates the inbox; `onDelivery` is called once per request, on a server thread.
    public init(
        host: String = "127.0.0.1", port: Int = 8081, secret: String, logger: Logger,
        onDelivery: @escaping @Sendable (Delivery) -> Void
    ) {
        var router = Router()
        let handler: @Sendable (HTTPRequest) -> HTTPResponse = { request in
            var failure: WebhookSignature.Failure?
            do throws(WebhookSignature.Failure) {
                try WebhookSignature.verify(
                    id: request.headers["webhook-id"], timestamp: request.headers["webhook-timestamp"],
                    signature: request.headers["webhook-signature"], body: request.body, secret: secret)
            } catch {
                failure = error
            }
            onDelivery(
                Delivery(
                    path: request.path, id: request.headers["webhook-id"],
                    timestamp: request.headers["webhook-timestamp"],
                    failure: failure, body: request.body))
            return HTTPResponse(status: 204)
        }
        // Any path: the app's webhook URL may carry one.
        for pattern in ["/", "/{a}", "/{a}/{b}", "/{a}/{b}/{c}", "/{a}/{b}/{c}/{d}"] {
            router.add(.post, pattern, bodyLimit: 1 << 20, handler)
        }
        server = HTTPServer(
            configuration: HTTPServerConfiguration(host: host, port: port, threads: 2), router: router, logger: logger)
    }

    /// The port it listens on.
    public var port: Int { server.port }

    /// Starts listening.
    public func start() throws {
        try server.start()
    }

    /// Stops listening.
    public func stop() {
        server.stop(gracePeriod: .seconds(1))
    }
}
