import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import WorkerRuntime

/// One run of the maintenance task: retention, then the dead-letter bound, then one row in
/// `maintenance_runs` and one summary log line.
public struct MaintenanceRun: Sendable {
    /// How a run ended.
    public enum Outcome: String, Sendable {
        /// Everything due was done.
        case completed
        /// Stopped by its time budget or a lock; the next run continues.
        case partial
        /// An error ended it.
        case failed
    }

    /// What a run did.
    public struct Summary: Sendable {
        public var retention: RetentionReport
        public var dropped: [DroppedDeadLetter]
        public var outcome: Outcome
        public var error: String?
        public var duration: Duration

        /// Dead letters dropped per queue and reason, as `maintenance_runs` records them.
        public var droppedByQueue: [String: [String: Int]] {
            var counts: [String: [String: Int]] = [:]
            for drop in dropped { counts[drop.queue, default: [:]][drop.reason.rawValue, default: 0] += 1 }
            return counts
        }
    }

    /// The migration that created `maintenance_runs` and the maintenance role.
    public static let requiredSchemaVersion = 21
    /// The migration children's retention needs (`last_opened_at`, `stories.expire_unopened`).
    public static let childRetentionSchemaVersion = 29

    let pool: PostgresPool
    let amqp: AMQPConfiguration?
    let configuration: RetentionConfiguration
    let logger: Logger
    /// The dead-letter queues bounded (every job type's; tests name queues of their own).
    var deadLetterQueues = DeadLetterBound.contractQueues

    /// - Parameters:
    ///   - pool: connections as `astro_maintenance` (or the owner).
    ///   - amqp: the broker for the dead-letter bound; nil leaves the dead-letter queues alone.
    ///   - configuration: ages, bounds and batch size.
    ///   - logger: where the run's lines go.
    public init(pool: PostgresPool, amqp: AMQPConfiguration?, configuration: RetentionConfiguration, logger: Logger) {
        self.pool = pool
        self.amqp = amqp
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs retention and the dead-letter bound, records the run and logs its summary. Never
    /// throws: a failure is the summary's `outcome` and `error` (also recorded when the
    /// database can still be written).
    ///
    /// - Parameters:
    ///   - now: the moment ages are counted from; never later than the real clock.
    ///   - dryRun: count, delete nothing, drop nothing.
    public func run(now requested: Date = Date(), dryRun: Bool) async -> Summary {
        let startedAt = Date()
        // A moment in the future would delete what is not yet due: the clock caps it.
        let now = min(requested, startedAt)
        let started = ContinuousClock.now
        let deadline = started + configuration.maxDuration
        var summary = Summary(retention: RetentionReport(), dropped: [], outcome: .completed, duration: .zero)
        do {
            try await checkSchema()
            summary.retention = try await Retention(pool: pool, configuration: configuration, logger: logger)
                .run(now: now, dryRun: dryRun, deadline: deadline)
            if let amqp {
                let bound = DeadLetterBound(
                    amqp: amqp,
                    maxAge: configuration.deadLetterMaxAge,
                    maxLength: configuration.deadLetterMaxLength,
                    logger: logger
                )
                summary.dropped = try await bound.run(queues: deadLetterQueues, now: now, dryRun: dryRun)
                // What the broker's backstop dropped since the last run, counted one by one.
                summary.dropped += try await bound.drainBrokerDrops(dryRun: dryRun)
            } else {
                logger.notice("AMQP_URL not set: the dead-letter queues were not bounded")
            }
            summary.outcome = summary.retention.complete ? .completed : .partial
            summary.error = summary.retention.stoppedBecause
        } catch {
            summary.outcome = .failed
            summary.error = String("\(error)".prefix(2000))
        }
        summary.duration = ContinuousClock.now - started
        await record(summary, startedAt: startedAt, dryRun: dryRun)
        log(summary, dryRun: dryRun)
        return summary
    }

    private func checkSchema() async throws {
        var required = [(Self.requiredSchemaVersion, "retention")]
        if configuration.childDataRetention != nil {
            required.append((Self.childRetentionSchemaVersion, "children's data retention"))
        }
        for (version, what) in required {
            // Migration numbers have gaps: ask for this one, not for a maximum.
            let applied = try await pool.withConnection { database in
                try database.query(
                    "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1) AS applied",
                    [version]
                ).first?.decode(Bool.self, "applied") ?? false
            }
            guard applied else {
                throw MaintenanceError(
                    code: .schemaOutOfDate,
                    message: "migration \(version) (\(what)) is not applied: run astroctl migrate"
                )
            }
        }
    }

    private func record(_ summary: Summary, startedAt: Date, dryRun: Bool) async {
        var deleted: [String: JSONValue] = [:]
        for (table, count) in summary.retention.deleted { deleted[table.rawValue] = .number(Double(count)) }
        var dropped: [String: JSONValue] = [:]
        for (queue, reasons) in summary.droppedByQueue {
            dropped[queue] = .object(reasons.mapValues { .number(Double($0)) })
        }
        let deletedText = JSONValue.object(deleted).jsonString()
        let droppedText = JSONValue.object(dropped).jsonString()
        let outcome = summary.outcome.rawValue
        let error = summary.error.map { String($0.prefix(2000)) }
        do {
            _ = try await pool.withConnection { database in
                try database.execute(
                    """
                    INSERT INTO maintenance_runs (started_at, finished_at, dry_run, deleted, dead_letters_dropped,
                        outcome, error)
                    VALUES ($1, greatest($1, now()), $2, $3::jsonb, $4::jsonb, $5, $6)
                    """,
                    [startedAt, dryRun, deletedText, droppedText, outcome, error]
                )
            }
        } catch {
            logger.error("the run could not be recorded in maintenance_runs", metadata: ["error": "\(error)"])
        }
    }

    private func log(_ summary: Summary, dryRun: Bool) {
        var metadata: Logger.Metadata = [
            "outcome": "\(summary.outcome.rawValue)",
            "dry_run": "\(dryRun)",
            "duration_ms":
                "\(summary.duration.components.seconds * 1000 + summary.duration.components.attoseconds / 1_000_000_000_000_000)",
            "batches": "\(summary.retention.batches)",
            "dead_letters_dropped": "\(summary.dropped.count)",
        ]
        for table in RetentionTable.allCases {
            metadata["deleted_\(table.rawValue)"] = "\(summary.retention.deleted[table] ?? 0)"
        }
        if let error = summary.error { metadata["error"] = "\(error)" }
        switch summary.outcome {
        case .completed: logger.info("maintenance run", metadata: metadata)
        case .partial: logger.warning("maintenance run stopped early; the next run continues", metadata: metadata)
        case .failed: logger.error("maintenance run failed", metadata: metadata)
        }
    }
}

/// A maintenance run could not go ahead; `code` is stable.
public struct MaintenanceError: Error, Sendable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var description: String { "\(code): \(message)" }
}

extension MaintenanceError {
    /// A refusal with a catalogued code.
    init(code: ErrorCode, message: String) {
        self.init(code: code.rawValue, message: message)
    }
}

/// The `main` of the `maintenance` executable.
public enum MaintenanceMain {
    /// Reads the environment (`DATABASE_URL`, `AMQP_URL`, the retention settings, `LOG_LEVEL`,
    /// `LOG_FORMAT`), runs once and returns the exit status: 0 completed or partial (the next
    /// run continues), 1 failed, 2 a setting that does not parse or is out of bounds.
    public static func run(environment: [String: String] = ProcessInfo.processInfo.environment) async -> Int32 {
        let format = WorkerConfiguration.LogFormat(rawValue: environment["LOG_FORMAT"] ?? "text")
        let level = Logger.Level(rawValue: environment["LOG_LEVEL"] ?? "info")
        guard let format, let level else {
            FileHandle.standardError.write(
                Data("maintenance: LOG_FORMAT is text or json; LOG_LEVEL trace…critical\n".utf8)
            )
            return 2
        }
        LogSetup.bootstrap(format: format, level: level)
        var logger = Logger(label: "maintenance")
        logger.logLevel = level
        let configuration: RetentionConfiguration
        let database: PostgresConfiguration
        var amqp: AMQPConfiguration?
        do {
            configuration = try RetentionConfiguration.fromEnvironment(environment)
            guard let url = environment["DATABASE_URL"], !url.isEmpty else {
                throw RetentionConfigurationError(variable: "DATABASE_URL", message: "is required")
            }
            do {
                database = try PostgresConfiguration(url: url)
            } catch {
                throw RetentionConfigurationError(variable: "DATABASE_URL", message: error.message)
            }
            if let url = environment["AMQP_URL"], !url.isEmpty {
                do {
                    amqp = try AMQPConfiguration(url: url)
                    amqp?.connectionName = "maintenance"
                } catch {
                    throw RetentionConfigurationError(variable: "AMQP_URL", message: error.message)
                }
            }
        } catch {
            logger.critical(
                "invalid configuration",
                metadata: ["code": "\(RetentionConfigurationError.code)", "error": "\(error)"]
            )
            return 2
        }
        var named = database
        named.applicationName = "maintenance"
        let pool = PostgresPool(configuration: named, options: .init(maxConnections: 1), logger: logger)
        let summary = await MaintenanceRun(pool: pool, amqp: amqp, configuration: configuration, logger: logger)
            .run(dryRun: false)
        await pool.close()
        return summary.outcome == .failed ? 1 : 0
    }
}
