import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import Schema
import Synchronization
import Testing
import WorkerRuntime

@testable import Maintenance

/// What falls off a dead-letter queue, and what retention deletes, is counted exactly, logged and
/// exported as metrics by a long-running worker (issue 17): the broker's length backstop
/// dead-letters what it drops into `astro.dead-dropped`, the maintenance task (as its own
/// least-privileged broker user and database role) drains and records it, and the
/// billing-worker's probe (as its own database role, migration 0022) exports the totals.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct MaintenanceMetricsTests {
    /// Log lines at notice and above, kept for the test to read.
    final class Lines: Sendable {
        let lines = Mutex<[(message: String, metadata: [String: String])]>([])
        var all: [(message: String, metadata: [String: String])] { lines.withLock { $0 } }
    }

    struct Capture: LogHandler {
        let sink: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            var all: [String: String] = [:]
            for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
                all[key] = "\(value)"
            }
            sink.lines.withLock { $0.append(("\(event.message)", all)) }
        }
    }

    func pool(as role: WorkerRole) async throws -> PostgresPool {
        PostgresPool(
            configuration: try PostgresConfiguration(url: try await RuntimeTestEnvironment.databaseURL(as: role)),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
    }

    /// The value of one series in the exposition text, or nil when it is not there.
    static func value(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    /// One reading of the billing-worker's maintenance probe, as the billing-worker's role.
    func exported() async throws -> String {
        let billing = try await pool(as: .billingWorker)
        let metrics = WorkerMetrics()
        try await MaintenanceMetricsProbe.probe().read(billing, metrics)
        await billing.close()
        return metrics.render()
    }

    @Test func aDeadLetterTheBrokerDropsIsCountedLoggedAndExported() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [])
        defer { Task { await admin.close() } }
        _ = try await admin.purgeQueue(BrokerNames.deadDroppedQueue)
        // A dead-letter queue of this test's own under the backstop's own policy definition
        // (BrokerAccess), with a length of 3 instead of a million.
        let queue = "rt." + UUID().uuidString.lowercased().prefix(8) + ".dead"
        let policies = try #require(BrokerAccess.definitionsTemplate()["policies"]?.arrayValue)
        let backstop = try #require(policies.first { $0["name"]?.stringValue == BrokerAccess.deadLetterBackstopPolicy })
        guard case .object(var definition)? = backstop["definition"] else {
            Issue.record("the backstop policy has no definition")
            return
        }
        #expect(definition["dead-letter-exchange"] == .string(BrokerNames.deadLetterExchange))
        #expect(definition["dead-letter-routing-key"] == .string(BrokerNames.deadDroppedQueue))
        definition["max-length"] = .number(3)
        let policy = "rt-backstop-" + queue
        try await AMQPTestEnvironment.stack(
            "rabbit-ctl",
            [
                "set_policy", "-p", try AMQPTestEnvironment.virtualHost(), "--priority", "10", "--apply-to", "queues",
                policy,
                "^" + queue.replacingOccurrences(of: ".", with: "\\.") + "$", JSONValue.object(definition).jsonString(),
            ]
        )
        try await admin.declare(Topology(queues: [QueueSpec(name: queue)]))
        var ids: [String] = []
        for _ in 0..<5 {
            let id = UUID().uuidString.lowercased()
            ids.append(id)
            try await admin.publish(
                OutgoingMessage(
                    exchange: "",
                    routingKey: queue,
                    body: Data(#"{"jobId":"\#(id)"}"#.utf8),
                    properties: MessageProperties(
                        headers: [
                            BrokerNames.Header.deadLetteredAt: .string(ISO8601.string(from: Date())),
                            BrokerNames.Header.reasonCode: "invalid-input",
                        ],
                        type: "chart.calculate"
                    )
                )
            )
        }
        // The broker kept the newest three and dead-lettered the two oldest into astro.dead-dropped:
        // the dead-lettering is the broker's own, after the publishes' confirms (under load the
        // count was read as less than 2 once).
        #expect(try await admin.queueState(queue).messageCount == 3)
        try await RuntimeTestEnvironment.eventually(
            "2 messages in \(BrokerNames.deadDroppedQueue)",
            observe: { try await admin.queueState(BrokerNames.deadDroppedQueue).messageCount },
            until: { $0 >= 2 }
        )
        #expect(try await admin.queueState(BrokerNames.deadDroppedQueue).messageCount == 2)

        let before = try await exported()
        let lines = Lines()
        var logger = Logger(label: "maintenance") { _ in Capture(sink: lines) }
        logger.logLevel = .info
        let maintenance = try await pool(as: .maintenance)
        // The maintenance task as its own broker user and database role.
        var run = MaintenanceRun(
            pool: maintenance,
            amqp: try AMQPConfiguration(url: try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.maintenance)),
            configuration: .defaults,
            logger: logger
        )
        // Only astro.dead-dropped is under test here (the maintenance user may not read this
        // test's own queue; the contract's .dead queues are other suites').
        run.deadLetterQueues = []
        let summary = await run.run(dryRun: false)
        await maintenance.close()
        #expect(summary.outcome == .completed, "\(summary.error ?? "")")
        let drops = summary.dropped.filter { $0.reason == .brokerMaxLength }
        #expect(drops.map(\.jobID) == Array(ids.prefix(2)))
        #expect(drops.allSatisfy { $0.queue == queue && $0.deadLetterCode == "invalid-input" })
        #expect(summary.droppedByQueue[queue] == ["broker-max-length": 2])
        #expect(try await admin.queueState(BrokerNames.deadDroppedQueue).messageCount == 0)
        #expect(try await admin.queueState(queue).messageCount == 3)
        // Each drop is logged by job id, queue and reason.
        let logged = lines.all.filter { $0.message == "dead letter dropped by the broker" }
        #expect(logged.compactMap { $0.metadata["job_id"] } == Array(ids.prefix(2)))
        #expect(logged.allSatisfy { $0.metadata["queue"] == queue && $0.metadata["reason"] == "broker-max-length" })
        #expect(logged.allSatisfy { $0.metadata["job_type"] == "chart.calculate" })

        // The billing-worker exports the count: a queue outside the contract's is `other`.
        let after = try await exported()
        let series = #"astro_dead_letters_dropped_total{queue="other",reason="broker-max-length"}"#
        #expect((Self.value(after, series) ?? 0) - (Self.value(before, series) ?? 0) == 2, "\(after)")

        try await AMQPTestEnvironment.stack(
            "rabbit-ctl",
            ["clear_policy", "-p", try AMQPTestEnvironment.virtualHost(), policy]
        )
        try await admin.deleteQueue(queue)
    }

    @Test func retentionDeletionsAndTheLastSuccessfulRunAreExported() async throws {
        let owner = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let ids = (0..<7).map { _ in UUID().uuidString }
        try await owner.withConnection { database in
            _ = try database.execute(
                """
                INSERT INTO jobs (id, kind, status, attempts, created_at, updated_at, finished_at)
                SELECT id, 'retention.metrics', 'succeeded', 1, now() - interval '9 days', now(),
                       now() - interval '9 days'
                FROM unnest($1::uuid[]) AS id
                """,
                ["{" + ids.joined(separator: ",") + "}"]
            )
        }
        let before = try await exported()
        let started = Date()
        let maintenance = try await pool(as: .maintenance)
        let summary = await MaintenanceRun(
            pool: maintenance,
            amqp: nil,
            configuration: .defaults,
            logger: RuntimeTestEnvironment.logger
        ).run(dryRun: false)
        await maintenance.close()
        #expect(summary.outcome == .completed, "\(summary.error ?? "")")
        let deleted = summary.retention.deleted[.jobs] ?? 0
        #expect(deleted >= 7)
        // A dry run counts nowhere.
        let dryPool = try await pool(as: .maintenance)
        _ = await MaintenanceRun(
            pool: dryPool,
            amqp: nil,
            configuration: .defaults,
            logger: RuntimeTestEnvironment.logger
        )
        .run(dryRun: true)
        await dryPool.close()

        let after = try await exported()
        let jobs = #"astro_retention_deleted_rows_total{table="jobs"}"#
        // Other suites' runs may add to the shared totals at the same time: at least this run's.
        #expect((Self.value(after, jobs) ?? 0) - (Self.value(before, jobs) ?? 0) >= Double(deleted), "\(after)")
        let runs = #"astro_maintenance_runs_total{outcome="completed"}"#
        #expect((Self.value(after, runs) ?? 0) - (Self.value(before, runs) ?? 0) >= 1)
        let last = try #require(Self.value(after, "astro_maintenance_last_success_timestamp_seconds"))
        #expect(last >= started.timeIntervalSince1970 - 1)
        // The totals equal the recorded runs (none of which is older than this test database).
        let recorded = try await owner.withConnection { database in
            try database.query(
                """
                SELECT (SELECT coalesce(sum((deleted->>'jobs')::bigint), 0) FROM maintenance_runs WHERE NOT dry_run)
                    = (SELECT total FROM maintenance_totals WHERE counter = 'deleted_rows' AND subject = 'jobs') AS equal
                """
            ).first?.decode(Bool?.self, "equal")
        }
        #expect(recorded == true)
        await owner.close()
    }

    /// The billing-worker's role reads the totals and when runs finished, nothing else of the
    /// task's history; it cannot change the totals.
    @Test func theExporterRoleOnlyReads() async throws {
        let billing = try await pool(as: .billingWorker)
        defer { Task { await billing.close() } }
        await #expect(throws: PostgresError.self) {
            try await billing.withConnection { try $0.query("SELECT error FROM maintenance_runs LIMIT 1") }
        }
        await #expect(throws: PostgresError.self) {
            try await billing.withConnection {
                try $0.execute("UPDATE maintenance_totals SET total = total + 1")
            }
        }
    }
}
