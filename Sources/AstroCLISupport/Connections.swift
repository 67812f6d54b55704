import AMQP
import ArgumentParser
import Foundation
import Logging
import Postgres
import WorkerRuntime

/// Connection options shared by every subcommand that talks to a server. Sendable (stated, as
/// a public type is not inferred to be) so the commands holding it can be captured by tasks.
public struct ConnectionOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("amqp-url"),
        help: "RabbitMQ URL (default: $AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/%2F)."
    )
    public var amqpURL: String?

    @Option(
        name: .customLong("database-url"),
        help: "PostgreSQL URL (default: $DATABASE_URL, else postgres://astro:astro@127.0.0.1:5432/astro)."
    )
    public var databaseURL: String?

    @Flag(name: .long, help: "Log what happens underneath (connections, retries).")
    public var verbose = false

    public init() {}

    /// The program's name (astroctl, astro-bench): the logger's label, and the connection name
    /// the broker and the database show, so an operator can tell the tools' connections apart.
    private var programName: String { ProcessInfo.processInfo.processName }

    /// A logger for the command, at debug level with --verbose and warning otherwise.
    public var logger: Logger {
        // Logs go to standard error so standard output stays clean for results (jobIds, JSON).
        LogSetup.bootstrap(format: .text, level: verbose ? .debug : .warning)
        var logger = Logger(label: programName)
        logger.logLevel = verbose ? .debug : .warning
        return logger
    }

    /// The broker URL in effect: --amqp-url, else $AMQP_URL, else the local default.
    public var resolvedAMQPURL: String {
        amqpURL ?? ProcessInfo.processInfo.environment["AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2F"
    }

    /// The database URL in effect: --database-url, else $DATABASE_URL, else the local default.
    public var resolvedDatabaseURL: String {
        databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"]
            ?? "postgres://astro:astro@127.0.0.1:5432/astro"
    }

    /// The broker settings in effect.
    /// - Throws: `ValidationError` (exit status 2) when the URL does not parse.
    public func amqpConfiguration() throws -> AMQPConfiguration {
        let url = resolvedAMQPURL
        do {
            var configuration = try AMQPConfiguration(url: url)
            configuration.connectionName = programName
            return configuration
        } catch {
            throw ValidationError("--amqp-url / AMQP_URL: \(error.message)")
        }
    }

    /// The database settings in effect.
    /// - Throws: `ValidationError` (exit status 2) when the URL does not parse.
    public func databaseConfiguration() throws -> PostgresConfiguration {
        let url = resolvedDatabaseURL
        do {
            var configuration = try PostgresConfiguration(url: url)
            configuration.applicationName = programName
            return configuration
        } catch {
            throw ValidationError("--database-url / DATABASE_URL: \(error.message)")
        }
    }

    /// A small pool for one command; closed by `withPool`.
    public func withPool<T: Sendable>(size: Int = 2, _ body: (PostgresPool) async throws -> T) async throws -> T {
        let pool = PostgresPool(
            configuration: try databaseConfiguration(),
            options: .init(maxConnections: size, acquireTimeout: .seconds(10)),
            logger: logger
        )
        do {
            let result = try await body(pool)
            await pool.close()
            return result
        } catch {
            await pool.close()
            throw error
        }
    }

    /// A connected publisher for one command; closed by `withPublisher`.
    public func withPublisher<T: Sendable>(_ body: (AMQPPublisher) async throws -> T) async throws -> T {
        let publisher = AMQPPublisher(configuration: try amqpConfiguration(), logger: logger)
        do {
            try await publisher.connect()
            let result = try await body(publisher)
            await publisher.close()
            return result
        } catch {
            await publisher.close()
            throw error
        }
    }
}

/// A failure the user can act on: printed as one line, exit status 1.
public struct CommandFailure: Error, CustomStringConvertible {
    /// The line printed.
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
