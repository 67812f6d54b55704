import AMQP
import ArgumentParser
import Foundation
import Logging
import Postgres
import WorkerRuntime

/// Connection options shared by every subcommand that talks to a server.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .customLong("amqp-url"),
        help: "RabbitMQ URL (default: $AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/%2F)."
    )
    var amqpURL: String?

    @Option(
        name: .customLong("database-url"),
        help: "PostgreSQL URL (default: $DATABASE_URL, else postgres://astro:astro@127.0.0.1:5432/astro)."
    )
    var databaseURL: String?

    @Flag(name: .long, help: "Log what happens underneath (connections, retries).")
    var verbose = false

    var logger: Logger {
        // Logs go to standard error so standard output stays clean for results (jobIds, JSON).
        LogSetup.bootstrap(format: .text, level: verbose ? .debug : .warning)
        var logger = Logger(label: "astroctl")
        logger.logLevel = verbose ? .debug : .warning
        return logger
    }

    /// The broker URL in effect: --amqp-url, else $AMQP_URL, else the local default.
    var resolvedAMQPURL: String {
        amqpURL ?? ProcessInfo.processInfo.environment["AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2F"
    }

    /// The database URL in effect: --database-url, else $DATABASE_URL, else the local default.
    var resolvedDatabaseURL: String {
        databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"]
            ?? "postgres://astro:astro@127.0.0.1:5432/astro"
    }

    func amqpConfiguration() throws -> AMQPConfiguration {
        let url = resolvedAMQPURL
        do {
            var configuration = try AMQPConfiguration(url: url)
            configuration.connectionName = "astroctl"
            return configuration
        } catch {
            throw ValidationError("--amqp-url / AMQP_URL: \(error.message)")
        }
    }

    func databaseConfiguration() throws -> PostgresConfiguration {
        let url = resolvedDatabaseURL
        do {
            var configuration = try PostgresConfiguration(url: url)
            configuration.applicationName = "astroctl"
            return configuration
        } catch {
            throw ValidationError("--database-url / DATABASE_URL: \(error.message)")
        }
    }

    /// A small pool for one command; closed by `withPool`.
    func withPool<T: Sendable>(size: Int = 2, _ body: (PostgresPool) async throws -> T) async throws -> T {
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
    func withPublisher<T: Sendable>(_ body: (AMQPPublisher) async throws -> T) async throws -> T {
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
struct CommandFailure: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// Retry settings that name the delay queues (they must match the workers' to share queues).
struct RetryOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: "Attempts before dead-lettering (workers: MAX_ATTEMPTS).")
    var maxAttempts: Int = Int(ProcessInfo.processInfo.environment["MAX_ATTEMPTS"] ?? "") ?? 5

    @Option(parsing: .unconditional, help: "First retry delay in ms (workers: RETRY_INITIAL_DELAY_MS).")
    var retryInitialDelayMs: Int = Int(ProcessInfo.processInfo.environment["RETRY_INITIAL_DELAY_MS"] ?? "") ?? 1000

    @Option(parsing: .unconditional, help: "Retry delay cap in ms (workers: RETRY_MAX_DELAY_MS).")
    var retryMaxDelayMs: Int = Int(ProcessInfo.processInfo.environment["RETRY_MAX_DELAY_MS"] ?? "") ?? 60000

    @Option(help: "classic or quorum (workers: QUEUE_TYPE).")
    var queueType: String = ProcessInfo.processInfo.environment["QUEUE_TYPE"] ?? "classic"

    func validate() throws {
        guard maxAttempts >= 1 else { throw ValidationError("--max-attempts must be at least 1") }
        guard retryInitialDelayMs >= 1, retryMaxDelayMs >= retryInitialDelayMs else {
            throw ValidationError("--retry-max-delay-ms must be at least --retry-initial-delay-ms (both ≥ 1)")
        }
        guard QueueSpec.QueueType(rawValue: queueType) != nil else {
            throw ValidationError("--queue-type must be classic or quorum, not \(queueType.debugDescription)")
        }
    }
}
