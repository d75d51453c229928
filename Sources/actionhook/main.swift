import ActionHookCLI
import ActionHookServer
import ArgumentParser
import Dispatch
import Foundation
import Logging

/// The `actionhook` command.
struct ActionHookCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "actionhook",
        abstract: "Turns replies to actionable push notifications into backend actions.",
        subcommands: [
            Serve.self, Migrate.self, Version.self, Inbox.self, Apply.self, Export.self, TestReply.self, Apps.self,
            Keys.self, Send.self, Users.self,
        ],
        defaultSubcommand: Serve.self)
}

/// Reads the configuration and sets up logging, or exits naming the bad variable.
func loadConfiguration() throws -> (Configuration, Logger) {
    do {
        let configuration = try Configuration.fromEnvironment(ProcessInfo.processInfo.environment)
        LoggingSystem.bootstrap { label in
            switch configuration.logFormat {
            case .json:
                return JSONLogHandler(label: label, level: configuration.logLevel)
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = configuration.logLevel
                return handler
            }
        }
        return (configuration, Logger(label: "actionhook"))
    } catch {
        FileHandle.standardError.write(Data("actionhook: configuration error: \(error)\n".utf8))
        throw ExitCode(78)
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve HTTP and run the delivery worker.")

    @Flag(help: "Apply pending database migrations before serving.")
    var migrate = false

    func run() throws {
        let (configuration, logger) = try loadConfiguration()
        let service = ActionHookService(configuration: configuration, logger: logger)
        if migrate {
            do {
                try service.migrate()
            } catch {
                logger.critical("migration failed", metadata: ["error": "\(error)"])
                throw ExitCode.failure
            }
        }
        do {
            try service.start()
        } catch {
            logger.critical("could not start", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }

        waitForStopSignal()
        logger.info("stopping")
        service.stop()
    }
}

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and exit.")

    func run() throws {
        let (configuration, logger) = try loadConfiguration()
        let service = ActionHookService(configuration: configuration, logger: logger)
        defer { service.stop() }
        do {
            let applied = try service.migrate()
            logger.info("migrations done", metadata: ["applied": "\(applied.count)"])
        } catch {
            logger.critical("migration failed", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
    }
}

struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version.")

    func run() {
        print("actionhook \(ActionHookVersion.current)")
    }
}

ActionHookCommand.main()
