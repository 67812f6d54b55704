import AMQP
import Foundation
import Logging
import Postgres

/// The settings every service reads, the workers and the gateway alike: the broker, the
/// database and its pool, the HTTP address, logging.
///
/// Each has an environment variable (`ServiceConfiguration.variables`); a malformed one stops
/// start-up with a `ConfigurationError` that names it. What only a worker reads (prefetch,
/// retries, group commit, the outbox) is `WorkerConfiguration`'s, so a service that does not
/// consume jobs neither reads nor validates it.
public struct ServiceConfiguration: Sendable {
    /// Broker connection (`AMQP_URL`; `MAX_MESSAGE_BYTES` bounds the bodies).
    public var amqp: AMQPConfiguration
    /// Database connection (`DATABASE_URL`, `DB_*_TIMEOUT_MS`, `DB_TCP_*`).
    public var database: PostgresConfiguration
    /// HTTP address (`HTTP_HOST`, `HTTP_PORT`; port 0 picks a free one).
    public var httpHost: String = "0.0.0.0"
    public var httpPort: Int
    /// Log level (`LOG_LEVEL`: trace, debug, info, notice, warning, error, critical).
    public var logLevel: Logger.Level = .info
    /// Log format (`LOG_FORMAT`: text or json).
    public var logFormat: LogFormat = .text
    /// Database connections per process (`DB_POOL_SIZE`).
    public var databasePoolSize: Int = 8
    /// How long a caller waits for a free database connection (`DB_ACQUIRE_TIMEOUT_MS`).
    public var databaseAcquireTimeout: Duration = .seconds(10)
    /// The variables that were not set, so the built-in development defaults apply (`AMQP_URL`,
    /// `DATABASE_URL`): a service says so in a warning at start-up.
    public var developmentDefaults: [String] = []

    /// `MAX_MESSAGE_BYTES`'s default (256 KiB), the broker's `max_message_size` in every
    /// deployment of this repository.
    public static let defaultMaxMessageBytes = 262_144

    public enum LogFormat: String, Sendable, CaseIterable {
        case text, json
    }

    /// A configuration with local defaults, for tests and tools.
    public init(amqp: AMQPConfiguration, database: PostgresConfiguration, httpPort: Int = 0) {
        self.amqp = amqp
        self.database = database
        self.httpPort = httpPort
        if self.amqp.maxBodyBytes == nil { self.amqp.maxBodyBytes = Self.defaultMaxMessageBytes }
    }

    /// The settings every service reads, with their defaults (`HTTP_PORT` defaults per service).
    public static let variables: [ConfigurationVariable] = [
        .init(
            name: "AMQP_URL",
            defaultValue: "amqp://guest:guest@127.0.0.1:5672/%2F",
            meaning: "RabbitMQ URL; amqps:// for TLS (?cacertfile=/path, ?heartbeat=seconds)"
        ),
        .init(
            name: "DATABASE_URL",
            defaultValue: "postgres://astro:astro@127.0.0.1:5432/astro",
            meaning: "PostgreSQL URL (?sslmode=…, ?application_name=…)"
        ),
        .init(name: "HTTP_HOST", defaultValue: "0.0.0.0", meaning: "address of /healthz, /readyz, /metrics"),
        .init(
            name: "HTTP_PORT",
            defaultValue: "8081 chart, 8082 report, 8083 billing",
            meaning: "port of /healthz, /readyz, /metrics (0: any free port)"
        ),
        .init(name: "LOG_LEVEL", defaultValue: "info", meaning: "trace, debug, info, notice, warning, error"),
        .init(name: "LOG_FORMAT", defaultValue: "text", meaning: "text or json (one object per line)"),
        .init(name: "DB_POOL_SIZE", defaultValue: "8", meaning: "database connections per process"),
        .init(name: "DB_ACQUIRE_TIMEOUT_MS", defaultValue: "10000", meaning: "wait for a free database connection"),
        .init(
            name: "MAX_MESSAGE_BYTES",
            defaultValue: "262144",
            meaning: "largest message body read or published (the broker's max_message_size)"
        ),
        .init(name: "DB_STATEMENT_TIMEOUT_MS", defaultValue: "30000", meaning: "statement_timeout (0: none)"),
        .init(name: "DB_LOCK_TIMEOUT_MS", defaultValue: "10000", meaning: "lock_timeout (0: none)"),
        .init(
            name: "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS",
            defaultValue: "60000",
            meaning: "idle_in_transaction_session_timeout (0: none)"
        ),
        .init(
            name: "DB_RESPONSE_TIMEOUT_MS",
            defaultValue: "statement timeout + 15000",
            meaning: "wait for the server's answer before a connection is given up (0: forever)"
        ),
        .init(
            name: "DB_TCP_KEEPALIVE_SECONDS",
            defaultValue: "10",
            meaning: "idle seconds before TCP keepalive probes (every half that, 3 probes; 0: kernel's)"
        ),
        .init(
            name: "DB_TCP_USER_TIMEOUT_MS",
            defaultValue: "20000",
            meaning: "unacknowledged data before the kernel drops the connection (0: kernel's)"
        ),
    ]

    /// Reads the settings every service shares from environment variables.
    ///
    /// - Parameters:
    ///   - environment: the variables (the process environment by default).
    ///   - defaultHTTPPort: this service's default port.
    /// - Throws: `ConfigurationError` naming the first malformed variable.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        defaultHTTPPort: Int
    ) throws(ConfigurationError) -> ServiceConfiguration {
        try read(EnvironmentReader(environment), defaultHTTPPort: defaultHTTPPort)
    }

    /// `fromEnvironment` through a reader a service shares with its own settings.
    package static func read(
        _ reader: EnvironmentReader,
        defaultHTTPPort: Int
    ) throws(ConfigurationError) -> ServiceConfiguration {
        var amqp: AMQPConfiguration
        do {
            amqp = try AMQPConfiguration(
                url: reader.string("AMQP_URL", default: "amqp://guest:guest@127.0.0.1:5672/%2F")
            )
        } catch {
            throw ConfigurationError(variable: "AMQP_URL", problem: error.message)
        }
        amqp.maxBodyBytes = try reader.int(
            "MAX_MESSAGE_BYTES",
            default: defaultMaxMessageBytes,
            range: 1024...536_870_912
        )
        var database: PostgresConfiguration
        do {
            database = try PostgresConfiguration(
                url: reader.string("DATABASE_URL", default: "postgres://astro:astro@127.0.0.1:5432/astro")
            )
        } catch {
            throw ConfigurationError(variable: "DATABASE_URL", problem: error.message)
        }
        try readDatabaseTimeouts(reader, into: &database)
        var configuration = ServiceConfiguration(amqp: amqp, database: database, httpPort: defaultHTTPPort)
        configuration.developmentDefaults = ["AMQP_URL", "DATABASE_URL"].filter { !reader.isSet($0) }
        configuration.httpHost = reader.string("HTTP_HOST", default: "0.0.0.0")
        configuration.httpPort = try reader.int("HTTP_PORT", default: defaultHTTPPort, range: 0...65535)
        configuration.logLevel = try reader.choice("LOG_LEVEL", default: .info, Logger.Level.allCases)
        configuration.logFormat = try reader.choice("LOG_FORMAT", default: .text, LogFormat.allCases)
        configuration.databasePoolSize = try reader.int("DB_POOL_SIZE", default: 8, range: 1...200)
        configuration.databaseAcquireTimeout = .milliseconds(
            try reader.int("DB_ACQUIRE_TIMEOUT_MS", default: 10000, range: 1...600_000)
        )
        return configuration
    }

    /// The session timeouts and TCP settings of `DATABASE_URL`'s connections.
    static func readDatabaseTimeouts(
        _ reader: EnvironmentReader,
        into database: inout PostgresConfiguration
    ) throws(ConfigurationError) {
        func milliseconds(_ name: String, default value: Duration) throws(ConfigurationError) -> Duration? {
            let number = try reader.int(name, default: Int(value.components.seconds * 1000), range: 0...86_400_000)
            return number == 0 ? nil : .milliseconds(number)
        }
        database.statementTimeout = try milliseconds(
            "DB_STATEMENT_TIMEOUT_MS",
            default: PostgresConfiguration.defaultStatementTimeout
        )
        database.lockTimeout = try milliseconds("DB_LOCK_TIMEOUT_MS", default: PostgresConfiguration.defaultLockTimeout)
        database.idleInTransactionTimeout = try milliseconds(
            "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS",
            default: PostgresConfiguration.defaultIdleInTransactionTimeout
        )
        if reader.isSet("DB_RESPONSE_TIMEOUT_MS") {
            let response = try reader.int("DB_RESPONSE_TIMEOUT_MS", default: 0, range: 0...86_400_000)
            // 0 waits forever; an explicit value below the statement timeout would give up on
            // statements the server is still allowed to run.
            if response == 0 {
                // A year: in effect, the client waits as long as the server takes.
                database.responseTimeout = .seconds(86_400 * 365)
            } else {
                database.responseTimeout = .milliseconds(response)
                if let statement = database.statementTimeout, database.responseTimeout! <= statement {
                    throw ConfigurationError(
                        variable: "DB_RESPONSE_TIMEOUT_MS",
                        problem: "must be longer than DB_STATEMENT_TIMEOUT_MS, or 0"
                    )
                }
            }
        }
        let keepalive = try reader.int("DB_TCP_KEEPALIVE_SECONDS", default: 10, range: 0...86_400)
        database.keepalive =
            keepalive == 0
            ? nil : .init(idle: .seconds(keepalive), interval: .seconds(max(1, keepalive / 2)), count: 3)
        database.tcpUserTimeout = try milliseconds(
            "DB_TCP_USER_TIMEOUT_MS",
            default: PostgresConfiguration.defaultTCPUserTimeout
        )
    }

}

/// One documented setting: its variable, default and meaning (the README's tables mirror them).
public struct ConfigurationVariable: Sendable {
    public var name: String
    public var defaultValue: String
    public var meaning: String

    public init(name: String, defaultValue: String, meaning: String) {
        self.name = name
        self.defaultValue = defaultValue
        self.meaning = meaning
    }
}

/// Everything a worker reads from its environment, with documented defaults: the settings every
/// service reads (`service`, whose fields read as the worker's own: `configuration.amqp`) and
/// the consume loop's.
///
/// Every setting has an environment variable (see `WorkerConfiguration.variables`, which the
/// README's configuration table mirrors). A missing required or malformed setting stops start-up
/// with a `ConfigurationError` that names the variable.
@dynamicMemberLookup
public struct WorkerConfiguration: Sendable {
    /// Broker, database, HTTP address, logging and pool settings.
    public var service: ServiceConfiguration
    /// Jobs in flight at once per worker process, and the broker's prefetch (`PREFETCH`).
    public var prefetch: Int = 16
    /// Attempts before a transiently failing job is dead-lettered (`MAX_ATTEMPTS`).
    public var maxAttempts: Int = 5
    /// First retry delay (`RETRY_INITIAL_DELAY_MS`).
    public var retryInitialDelay: Duration = .seconds(1)
    /// Cap of the exponential retry delay (`RETRY_MAX_DELAY_MS`).
    public var retryMaxDelay: Duration = .seconds(60)
    /// How long a graceful shutdown waits for in-flight jobs (`SHUTDOWN_DRAIN_SECONDS`).
    public var shutdownDrainTimeout: Duration = .seconds(25)
    /// Queue type of declared queues (`QUEUE_TYPE`: classic or quorum).
    public var queueType: QueueSpec.QueueType = .classic
    /// Apply pending migrations at start-up (`MIGRATE_ON_START`).
    public var migrateOnStart: Bool = true
    /// Jobs committed together in one transaction at most (`COMMIT_BATCH_SIZE`; 1 turns group
    /// commit off).
    public var commitBatchSize: Int = 32
    /// Job transactions under way at once per process (`COMMITTERS`).
    public var committers: Int = 2
    /// Outbox rows published per batch (`OUTBOX_BATCH_SIZE`).
    public var outboxBatchSize: Int = 200
    /// How often the outbox is polled for rows other processes left behind (`OUTBOX_POLL_MS`).
    /// This process's own rows never wait for it: a commit hands them to the relay at once. What
    /// it finds is rare and not urgent (a dead relay's rows, which wait 5 s before they are
    /// looked for anyway; rows a failed publish released, which wait 1 s, 2 s, 4 s… between
    /// tries; jobs the billing start-up and the maintenance program queue), so an idle worker
    /// asks the database every 5 s rather than every second.
    public var outboxPollInterval: Duration = .seconds(5)
    /// Deliveries of one message without an outcome before it is dead-lettered with
    /// `delivery-limit` unprocessed (`DELIVERY_LIMIT`); also `x-delivery-limit` of quorum queues.
    public var deliveryLimit: Int = Self.defaultDeliveryLimit

    /// `DELIVERY_LIMIT`'s default.
    public static let defaultDeliveryLimit = 10
    /// `MAX_MESSAGE_BYTES`'s default (`ServiceConfiguration.defaultMaxMessageBytes`).
    public static let defaultMaxMessageBytes = ServiceConfiguration.defaultMaxMessageBytes

    public typealias LogFormat = ServiceConfiguration.LogFormat
    public typealias Variable = ConfigurationVariable

    /// A configuration with local defaults, for tests and tools.
    public init(amqp: AMQPConfiguration, database: PostgresConfiguration, httpPort: Int = 0) {
        self.service = ServiceConfiguration(amqp: amqp, database: database, httpPort: httpPort)
    }

    /// The shared settings read as the worker's own (`configuration.amqp`, `configuration.httpPort`).
    public subscript<Value>(dynamicMember keyPath: WritableKeyPath<ServiceConfiguration, Value>) -> Value {
        get { service[keyPath: keyPath] }
        set { service[keyPath: keyPath] = newValue }
    }

    /// The settings every worker reads, with their defaults (`HTTP_PORT` defaults per worker):
    /// the shared ones (`ServiceConfiguration.variables`) and the consume loop's.
    public static let variables: [Variable] =
        ServiceConfiguration.variables + [
            .init(
                name: "PREFETCH",
                defaultValue: "16 (report-worker 32)",
                meaning: "jobs in flight per process (broker prefetch)"
            ),
            .init(name: "MAX_ATTEMPTS", defaultValue: "5", meaning: "attempts before a failing job is dead-lettered"),
            .init(name: "RETRY_INITIAL_DELAY_MS", defaultValue: "1000", meaning: "first retry delay"),
            .init(name: "RETRY_MAX_DELAY_MS", defaultValue: "60000", meaning: "cap of the exponential retry delay"),
            .init(
                name: "SHUTDOWN_DRAIN_SECONDS",
                defaultValue: "25",
                meaning: "graceful shutdown: wait for in-flight jobs"
            ),
            .init(name: "QUEUE_TYPE", defaultValue: "classic", meaning: "classic or quorum (declared queues)"),
            .init(name: "MIGRATE_ON_START", defaultValue: "true", meaning: "apply pending migrations at start-up"),
            .init(
                name: "COMMIT_BATCH_SIZE",
                defaultValue: "32",
                meaning: "jobs committed together at most (group commit)"
            ),
            .init(name: "COMMITTERS", defaultValue: "2", meaning: "job transactions under way at once per process"),
            .init(name: "OUTBOX_BATCH_SIZE", defaultValue: "200", meaning: "outbox rows published per batch"),
            .init(
                name: "OUTBOX_POLL_MS",
                defaultValue: "5000",
                meaning: "outbox poll interval for rows left by others"
            ),
            .init(
                name: "DELIVERY_LIMIT",
                defaultValue: "10",
                meaning: "deliveries without an outcome before a message is dead-lettered unprocessed"
            ),
        ]

    /// Reads the configuration from environment variables.
    ///
    /// - Parameters:
    ///   - environment: the variables (the process environment by default).
    ///   - defaultHTTPPort: this worker's default health port.
    ///   - defaultPrefetch: this worker's default `PREFETCH` (jobs in flight).
    /// - Throws: `ConfigurationError` naming the first malformed variable.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        defaultHTTPPort: Int,
        defaultPrefetch: Int = 16
    ) throws(ConfigurationError) -> WorkerConfiguration {
        let reader = EnvironmentReader(environment)
        let service = try ServiceConfiguration.read(reader, defaultHTTPPort: defaultHTTPPort)
        var configuration = WorkerConfiguration(amqp: service.amqp, database: service.database)
        configuration.service = service
        configuration.deliveryLimit = try reader.int("DELIVERY_LIMIT", default: defaultDeliveryLimit, range: 1...1000)
        configuration.prefetch = try reader.int("PREFETCH", default: defaultPrefetch, range: 1...1000)
        configuration.maxAttempts = try reader.int("MAX_ATTEMPTS", default: 5, range: 1...100)
        configuration.retryInitialDelay = .milliseconds(
            try reader.int("RETRY_INITIAL_DELAY_MS", default: 1000, range: 1...3_600_000)
        )
        configuration.retryMaxDelay = .milliseconds(
            try reader.int("RETRY_MAX_DELAY_MS", default: 60000, range: 1...86_400_000)
        )
        guard configuration.retryMaxDelay >= configuration.retryInitialDelay else {
            throw ConfigurationError(
                variable: "RETRY_MAX_DELAY_MS",
                problem: "must not be smaller than RETRY_INITIAL_DELAY_MS"
            )
        }
        configuration.shutdownDrainTimeout = .seconds(
            try reader.int("SHUTDOWN_DRAIN_SECONDS", default: 25, range: 0...3600)
        )
        configuration.queueType = try reader.choice("QUEUE_TYPE", default: .classic, [.classic, .quorum])
        configuration.migrateOnStart = try reader.bool("MIGRATE_ON_START", default: true)
        configuration.commitBatchSize = try reader.int("COMMIT_BATCH_SIZE", default: 32, range: 1...1000)
        configuration.committers = try reader.int("COMMITTERS", default: 2, range: 1...64)
        guard configuration.committers < configuration.databasePoolSize else {
            throw ConfigurationError(
                variable: "COMMITTERS",
                problem:
                    "must be smaller than DB_POOL_SIZE (\(configuration.databasePoolSize)) so look-ups and the outbox relay keep a connection"
            )
        }
        configuration.outboxBatchSize = try reader.int("OUTBOX_BATCH_SIZE", default: 200, range: 1...10000)
        configuration.outboxPollInterval = .milliseconds(
            try reader.int("OUTBOX_POLL_MS", default: 5000, range: 10...600_000)
        )
        return configuration
    }

    /// The retry policy these settings describe.
    public var retryPolicy: RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, initialDelay: retryInitialDelay, maxDelay: retryMaxDelay)
    }
}

/// A setting is missing or malformed; start-up stops with this message.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The environment variable at fault.
    public var variable: String
    /// What is wrong with it and what is expected.
    public var problem: String

    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }

    public var description: String { "configuration error: \(variable): \(problem)" }
}

/// Typed access to environment variables; every error names the variable.
package struct EnvironmentReader {
    package let environment: [String: String]

    package init(_ environment: [String: String]) { self.environment = environment }

    /// The variable's value without surrounding blanks; nil when unset or blank.
    package func value(_ name: String) -> String? {
        guard let raw = environment[name]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
        return raw
    }

    package func string(_ name: String, default defaultValue: String) -> String { value(name) ?? defaultValue }

    /// Whether the variable is set to something other than blanks.
    package func isSet(_ name: String) -> Bool { value(name) != nil }

    package func int(
        _ name: String,
        default defaultValue: Int,
        range: ClosedRange<Int>
    ) throws(ConfigurationError) -> Int {
        guard let raw = value(name) else { return defaultValue }
        guard let number = Int(raw) else {
            throw ConfigurationError(variable: name, problem: "expected a whole number, got \(raw.debugDescription)")
        }
        guard range.contains(number) else {
            throw ConfigurationError(
                variable: name,
                problem: "\(number) is out of range \(range.lowerBound)…\(range.upperBound)"
            )
        }
        return number
    }

    /// A decimal number in `range` (at most 20 characters: no value is parsed at length).
    package func number(
        _ name: String,
        default defaultValue: Double,
        range: ClosedRange<Double>
    ) throws(ConfigurationError) -> Double {
        guard let raw = value(name) else { return defaultValue }
        guard raw.utf8.count <= 20, let number = Double(raw), number.isFinite, range.contains(number) else {
            throw ConfigurationError(
                variable: name,
                problem: "expected a number in \(range.lowerBound)…\(range.upperBound), got \(raw.debugDescription)"
            )
        }
        return number
    }

    package func bool(_ name: String, default defaultValue: Bool) throws(ConfigurationError) -> Bool {
        guard let raw = value(name) else { return defaultValue }
        switch raw.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            throw ConfigurationError(variable: name, problem: "expected true or false, got \(raw.debugDescription)")
        }
    }

    package func choice<T: RawRepresentable>(
        _ name: String,
        default defaultValue: T,
        _ choices: [T]
    ) throws(ConfigurationError) -> T where T.RawValue == String {
        guard let raw = value(name) else { return defaultValue }
        guard let match = choices.first(where: { $0.rawValue == raw.lowercased() }) else {
            let allowed = choices.map(\.rawValue).joined(separator: ", ")
            throw ConfigurationError(variable: name, problem: "expected one of \(allowed), got \(raw.debugDescription)")
        }
        return match
    }
}
