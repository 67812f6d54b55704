import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Maintenance

/// `astroctl retention run`: the maintenance task's run, by hand (the same code as the
/// `maintenance` executable a CronJob starts).
struct RetentionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retention",
        abstract: "Delete finished jobs, sent outbox rows and expired gateway records; bound the dead-letter queues.",
        subcommands: [Run.self]
    )

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run retention once (what the maintenance CronJob runs).",
            discussion: """
                Ages and bounds come from the environment as for the maintenance task: JOB_RETENTION \
                (7d), OUTBOX_RETENTION (1d), RETENTION_BATCH_SIZE (1000), RETENTION_MAX_DURATION (30m), \
                DEAD_LETTER_MAX_AGE (7d), DEAD_LETTER_MAX_LENGTH (10000). Prints what was deleted per \
                table and which dead letters were dropped, and records the run in maintenance_runs.
                """
        )

        @Flag(name: .customLong("dry-run"), help: "Count what would be deleted or dropped; change nothing.")
        var dryRun = false

        @Flag(name: .customLong("no-dead-letters"), help: "Leave the dead-letter queues alone.")
        var noDeadLetters = false

        @Option(
            name: .customLong("as-of"),
            help:
                "Count ages from this earlier moment (ISO 8601) instead of now: deletes a subset of what a run now would."
        )
        var asOf: String?

        @Option(name: .customLong("batch-size"), help: "Rows per statement (10…10000; default RETENTION_BATCH_SIZE).")
        var batchSize: Int?

        @Flag(help: "Print JSON instead of lines.")
        var json = false

        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            var configuration: RetentionConfiguration
            do {
                configuration = try RetentionConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
                if let batchSize { configuration.batchSize = batchSize }
                try configuration.validated()
            } catch {
                throw ValidationError(
                    error.variable == "RETENTION_BATCH_SIZE" && batchSize != nil
                        ? "--batch-size: \(error.message)" : error.description
                )
            }
            var now = Date()
            if let asOf {
                guard let moment = ISO8601.date(from: asOf) else {
                    throw ValidationError("--as-of: expected an ISO 8601 moment such as 2026-01-31T12:00:00Z")
                }
                guard moment <= now else { throw ValidationError("--as-of: \(asOf) is in the future") }
                now = moment
            }
            let amqp = noDeadLetters ? nil : try connection.amqpConfiguration()
            let logger = connection.logger
            let summary = try await connection.withPool(size: 1) { pool in
                await MaintenanceRun(pool: pool, amqp: amqp, configuration: configuration, logger: logger)
                    .run(now: now, dryRun: dryRun)
            }
            if json {
                var deleted: [String: JSONValue] = [:]
                for table in RetentionTable.allCases {
                    deleted[table.rawValue] = .number(Double(summary.retention.deleted[table] ?? 0))
                }
                let dropped: [JSONValue] = summary.dropped.map { drop in
                    [
                        "queue": .string(drop.queue), "jobId": drop.jobID.map(JSONValue.string) ?? .null,
                        "reason": .string(drop.reason.rawValue),
                    ]
                }
                let object: JSONValue = [
                    "outcome": .string(summary.outcome.rawValue), "dryRun": .bool(dryRun),
                    "deleted": .object(deleted), "deadLettersDropped": .array(dropped),
                    "error": summary.error.map(JSONValue.string) ?? .null,
                ]
                print(object.jsonString())
            } else {
                let verb = dryRun ? "would delete" : "deleted"
                for table in RetentionTable.allCases {
                    print("\(table.rawValue): \(verb) \(summary.retention.deleted[table] ?? 0)")
                }
                for drop in summary.dropped {
                    print(
                        "\(drop.queue): \(dryRun ? "would drop" : "dropped") \(drop.jobID ?? "-") (\(drop.reason.rawValue))"
                    )
                }
                print("outcome: \(summary.outcome.rawValue)" + (summary.error.map { " (\($0))" } ?? ""))
            }
            if summary.outcome == .failed { throw CommandFailure("retention failed: \(summary.error ?? "")") }
        }
    }
}
