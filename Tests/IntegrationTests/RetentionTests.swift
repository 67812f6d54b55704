import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import SampleJobs
import Schema
import Testing

@testable import Maintenance

/// Bounded growth (issue 17): the maintenance task deletes only finished, old rows — as its own
/// role, whose grants and row-level policies (migration 0021) refuse anything else — and keeps
/// the dead-letter queues within their bounds, naming what it drops.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RetentionTests {
    let owner: PostgresPool

    init() async throws {
        owner = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
    }

    func maintenancePool() async throws -> PostgresPool {
        PostgresPool(
            configuration: try PostgresConfiguration(
                url: try await RuntimeTestEnvironment.databaseURL(as: .maintenance)
            ),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
    }

    func configuration(batchSize: Int) -> RetentionConfiguration {
        var configuration = RetentionConfiguration.defaults
        configuration.batchSize = batchSize
        return configuration
    }

    /// `count` jobs of `status` finished (or, when running, created) `age` seconds ago.
    func seedJobs(_ count: Int, status: String, age: TimeInterval) async throws -> [UUID] {
        let ids = (0..<count).map { _ in UUID() }
        let text = "{" + ids.map(\.uuidString).joined(separator: ",") + "}"
        let finished = status == "running" || status == "queued" ? nil : Date().addingTimeInterval(-age)
        try await owner.withConnection { database in
            _ = try database.execute(
                """
                INSERT INTO jobs (id, kind, status, attempts, created_at, updated_at, finished_at)
                SELECT id, 'retention.test', $2, 1, now() - make_interval(secs => $3), now(), $4
                FROM unnest($1::uuid[]) AS id
                """,
                [text, status, age, finished]
            )
        }
        return ids
    }

    /// `count` outbox rows created `age` seconds ago, sent then or not at all. Rows older than
    /// a day get ids below every real one (outbox ids grow with time, and retention walks them
    /// in that order): a range of negative ids of their own, as if written before the rest.
    func seedOutbox(_ count: Int, sent: Bool, age: TimeInterval) async throws -> [Int64] {
        let base: Int64 = age > 43_200 ? -Int64.random(in: 1_000_000_000...9_000_000_000_000) : 0
        return try await owner.withConnection { database in
            if base == 0 {
                return try database.query(
                    """
                    INSERT INTO outbox (exchange, routing_key, body, created_at, sent_at)
                    SELECT 'astro.events', 'retention.test', '\\x7b7d'::bytea, now() - make_interval(secs => $2),
                           CASE WHEN $3 THEN now() - make_interval(secs => $2) END
                    FROM generate_series(1, $1)
                    RETURNING id
                    """,
                    [count, age, sent]
                ).map { try $0.decode(Int64.self, "id") }
            }
            return try database.query(
                """
                INSERT INTO outbox (id, exchange, routing_key, body, created_at, sent_at) OVERRIDING SYSTEM VALUE
                SELECT $4 + i, 'astro.events', 'retention.test', '\\x7b7d'::bytea, now() - make_interval(secs => $2),
                       CASE WHEN $3 THEN now() - make_interval(secs => $2) END
                FROM generate_series(1, $1) AS i
                RETURNING id
                """,
                [count, age, sent, base]
            ).map { try $0.decode(Int64.self, "id") }
        }
    }

    func existing(jobs ids: [UUID]) async throws -> Int {
        let text = "{" + ids.map(\.uuidString).joined(separator: ",") + "}"
        return try await owner.withConnection { database in
            try database.query("SELECT count(*) AS n FROM jobs WHERE id = ANY($1::uuid[])", [text]).first?
                .decode(Int.self, "n") ?? -1
        }
    }

    func existing(outbox ids: [Int64]) async throws -> Int {
        let text = "{" + ids.map(String.init).joined(separator: ",") + "}"
        return try await owner.withConnection { database in
            try database.query("SELECT count(*) AS n FROM outbox WHERE id = ANY($1::bigint[])", [text]).first?
                .decode(Int.self, "n") ?? -1
        }
    }

    func count(_ sql: SQL, _ parameters: [any PostgresBindable] = []) async throws -> Int {
        try await owner.withConnection { try $0.query(sql, parameters).first?.decode(Int.self, "n") ?? -1 }
    }

    @Test func onlyOldFinishedJobsAndOldSentOutboxRowsAreDeletedInBatches() async throws {
        let day: TimeInterval = 86_400
        let oldSucceeded = try await seedJobs(23, status: "succeeded", age: 8 * day)
        let oldFailed = try await seedJobs(5, status: "failed", age: 8 * day)
        let oldDead = try await seedJobs(4, status: "dead", age: 8 * day)
        let oldRunning = try await seedJobs(6, status: "running", age: 30 * day)
        let recentFinished = try await seedJobs(7, status: "succeeded", age: 6 * day)
        let oldSent = try await seedOutbox(27, sent: true, age: 2 * day)
        let oldUnsent = try await seedOutbox(9, sent: false, age: 3 * day)
        let recentSent = try await seedOutbox(8, sent: true, age: 3600)
        // The gateway's record of an old finished job goes with it; that of a running job stays.
        let user = UUID()
        try await owner.withConnection { database in
            _ = try database.execute("INSERT INTO users (id) VALUES ($1)", [user])
            for (job, created) in [(oldSucceeded[0], 8 * day), (oldRunning[0], 30 * day)] {
                _ = try database.execute(
                    """
                    INSERT INTO gateway_jobs (job_id, user_id, kind, request_hash, created_at, published_at)
                    VALUES ($1, $2, 'chart.calculate', repeat('a', 64), now() - make_interval(secs => $3), now())
                    """,
                    [job, user, created]
                )
            }
            _ = try database.execute(
                "INSERT INTO gateway_refresh_tokens (token_hash, user_id, expires_at) VALUES (repeat('b', 64), $1, now() - interval '1 day'), (repeat('c', 64), $1, now() + interval '1 day')",
                [user]
            )
        }
        let ledgerBefore = try await count("SELECT count(*) AS n FROM credit_ledger")

        let pool = try await maintenancePool()
        let summary = await MaintenanceRun(
            pool: pool,
            amqp: nil,
            configuration: configuration(batchSize: 10),
            logger: RuntimeTestEnvironment.logger
        ).run(dryRun: false)
        await pool.close()

        #expect(summary.outcome == .completed, "\(summary.error ?? "")")
        #expect(try await existing(jobs: oldSucceeded + oldFailed + oldDead) == 0)
        #expect(try await existing(jobs: oldRunning) == oldRunning.count)
        #expect(try await existing(jobs: recentFinished) == recentFinished.count)
        #expect(try await existing(outbox: oldSent) == 0)
        #expect(try await existing(outbox: oldUnsent) == oldUnsent.count)
        #expect(try await existing(outbox: recentSent) == recentSent.count)
        #expect(summary.retention.deleted[.jobs] == 32)
        #expect(summary.retention.deleted[.outbox] == 27)
        // 32 jobs in batches of 10 take four statements, 27 outbox rows three: never one big delete.
        #expect(summary.retention.batches >= 7)
        #expect(try await count("SELECT count(*) AS n FROM gateway_jobs WHERE job_id = $1", [oldSucceeded[0]]) == 0)
        #expect(try await count("SELECT count(*) AS n FROM gateway_jobs WHERE job_id = $1", [oldRunning[0]]) == 1)
        #expect(try await count("SELECT count(*) AS n FROM gateway_refresh_tokens WHERE user_id = $1", [user]) == 1)
        #expect(try await count("SELECT count(*) AS n FROM credit_ledger") == ledgerBefore)
        // The run is recorded with its counts.
        #expect(
            try await count(
                "SELECT (deleted->>'jobs')::int AS n FROM maintenance_runs WHERE NOT dry_run ORDER BY id DESC LIMIT 1"
            ) == 32
        )
    }

    @Test func aDryRunCountsAndDeletesNothing() async throws {
        let old = try await seedJobs(12, status: "succeeded", age: 9 * 86_400)
        let pool = try await maintenancePool()
        let summary = await MaintenanceRun(
            pool: pool,
            amqp: nil,
            configuration: configuration(batchSize: 10),
            logger: RuntimeTestEnvironment.logger
        ).run(dryRun: true)
        await pool.close()
        #expect(summary.outcome == .completed)
        #expect((summary.retention.deleted[.jobs] ?? 0) >= 12)
        #expect(try await existing(jobs: old) == 12)
    }

    @Test func theMaintenanceRoleCannotDeleteUnfinishedWorkNorMoneyRecords() async throws {
        let running = try await seedJobs(3, status: "running", age: 30 * 86_400)
        let unsent = try await seedOutbox(3, sent: false, age: 30 * 86_400)
        let pool = try await maintenancePool()
        func attempt(_ sql: SQL) async -> (deleted: Int?, state: String?) {
            do {
                return (try await pool.withConnection { try $0.execute(sql) }, nil)
            } catch let error as PostgresError {
                return (nil, error.sqlState ?? "\(error)")
            } catch {
                return (nil, "\(error)")
            }
        }
        // Whatever the statement says, the row-level policies let it delete nothing unfinished.
        #expect(await attempt("DELETE FROM jobs WHERE finished_at IS NULL").deleted == 0)
        #expect(await attempt("DELETE FROM outbox WHERE sent_at IS NULL").deleted == 0)
        #expect(try await existing(jobs: running) == 3)
        #expect(try await existing(outbox: unsent) == 3)
        // It cannot read what jobs and messages say, nor touch the money records or people.
        let denied = "42501"
        #expect(await attempt("SELECT count(*) FROM jobs WHERE result IS NOT NULL").state == denied)
        #expect(await attempt("SELECT count(*) FROM outbox WHERE body IS NOT NULL").state == denied)
        #expect(await attempt("UPDATE jobs SET status = 'succeeded' WHERE false").state == denied)
        for table in [
            "credit_ledger", "purchase_records", "purchase_credits", "report_purchases", "store_notifications",
            "users", "user_profiles", "birth_charts", "stories.stories",
        ] {
            #expect(await attempt(SQL(unsafeSQL: "DELETE FROM \(table) WHERE false")).state == denied, "\(table)")
        }
        await pool.close()
    }

    /// Workers run and relay while retention runs in small batches over a backlog of old rows:
    /// every new job keeps its row and every event is published; only the old finished rows go.
    @Test func retentionUnderLoadLosesNoJobAndNoUnsentEvent() async throws {
        let day: TimeInterval = 86_400
        let oldFinished = try await seedJobs(3000, status: "succeeded", age: 10 * day)
        let oldRunning = try await seedJobs(50, status: "running", age: 10 * day)
        let oldSent = try await seedOutbox(3000, sent: true, age: 2 * day)
        let oldUnsent = try await seedOutbox(50, sent: false, age: 2 * day)

        let running = try await RunningWorker.start(handlers: { [SampleJobHandler(queue: $0)] }, prefetch: 32)
        let events = try await running.eventQueue(routingKey: "sample.done")
        let jobs = (0..<300).map { _ in JobID.random() }
        let pool = try await maintenancePool()
        let retention = Task {
            var runs: [MaintenanceRun.Summary] = []
            // Several runs while the jobs flow: each walks the backlog in batches of 50.
            for _ in 0..<4 {
                runs.append(
                    await MaintenanceRun(
                        pool: pool,
                        amqp: nil,
                        configuration: configuration(batchSize: 50),
                        logger: RuntimeTestEnvironment.logger
                    ).run(dryRun: false)
                )
            }
            return runs
        }
        for id in jobs { try await running.publish(#"{"jobId":"\#(id)","note":"load"}"#) }
        let runs = await retention.value
        await pool.close()
        for id in jobs { try await running.waitForStatus(id, "succeeded") }
        let delivered = try await running.drain(events, count: jobs.count, timeout: .seconds(60))
        #expect(Set(delivered.map { $0.properties.correlationID ?? "" }) == Set(jobs.map(\.description)))
        try await running.stop()

        #expect(runs.allSatisfy { $0.outcome != .failed })
        #expect(try await existing(jobs: oldFinished) == 0)
        #expect(try await existing(jobs: oldRunning) == oldRunning.count)
        #expect(try await existing(outbox: oldSent) == 0)
        #expect(try await existing(outbox: oldUnsent) == oldUnsent.count)
        // Every new job's row and its (recent, sent) outbox row are still there.
        let text = "{" + jobs.map(\.description).joined(separator: ",") + "}"
        #expect(
            try await count(
                "SELECT count(*) AS n FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'succeeded'",
                [text]
            )
                == jobs.count
        )
        #expect(
            try await count(
                "SELECT count(*) AS n FROM outbox WHERE job_id = ANY($1::uuid[]) AND sent_at IS NOT NULL",
                [text]
            )
                == jobs.count
        )
        // Cleanup of this test's leftovers that retention never deletes.
        try await owner.withConnection { database in
            _ = try database.execute("DELETE FROM outbox WHERE routing_key = 'retention.test'")
            _ = try database.execute("DELETE FROM jobs WHERE kind = 'retention.test'")
        }
    }

    @Test func deadLetterQueuesAreBoundedOldestFirstAndEachDropIsNamed() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [])
        let queue = "rt." + UUID().uuidString.lowercased().prefix(8) + ".dead"
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        let now = Date()
        // Three dead-lettered eight days ago, then five an hour ago, in that order.
        var ids: [String] = []
        for age in [8.0, 8.0, 8.0, 0.04, 0.04, 0.04, 0.04, 0.04] {
            let id = UUID().uuidString.lowercased()
            ids.append(id)
            try await publisher.publish(
                OutgoingMessage(
                    exchange: "",
                    routingKey: queue,
                    body: Data(#"{"jobId":"\#(id)"}"#.utf8),
                    properties: MessageProperties(
                        headers: [
                            BrokerNames.Header.deadLetteredAt: .string(ISO8601.string(from: now - age * 86_400)),
                            BrokerNames.Header.reasonCode: "invalid-input",
                        ]
                    )
                )
            )
        }
        let bound = DeadLetterBound(
            amqp: try RuntimeTestEnvironment.amqpConfiguration(),
            maxAge: .seconds(7 * 86_400),
            maxLength: 6,
            logger: RuntimeTestEnvironment.logger
        )
        let dry = try await bound.run(queues: [queue], now: now, dryRun: true)
        #expect(dry.count == 3)
        #expect(try await publisher.queueState(queue).messageCount == 8)

        let dropped = try await bound.run(queues: [queue], now: now, dryRun: false)
        // Two over the length bound, then the third for its age; the young five stay, in order.
        #expect(dropped.map(\.jobID) == Array(ids.prefix(3)))
        #expect(dropped.map(\.reason) == [.maxLength, .maxLength, .maxAge])
        #expect(dropped.allSatisfy { $0.deadLetterCode == "invalid-input" })
        let left = try await RuntimeTestEnvironment.drain(queue, count: 5)
        #expect(left.compactMap { DeadLetterBound.jobID($0.body) } == Array(ids.suffix(5)))
        #expect(try await publisher.queueState(queue).messageCount == 0)
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }
}
