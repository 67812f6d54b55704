import Foundation
import Logging
import Postgres

/// The tables retention deletes from, as `maintenance_runs.deleted` and the logs name them.
public enum RetentionTable: String, Sendable, CaseIterable, Hashable {
    /// Finished jobs older than `JOB_RETENTION`.
    case jobs
    /// The gateway's record of each deleted job, and records that never became a job.
    case gatewayJobs = "gateway_jobs"
    /// Sent outbox rows older than `OUTBOX_RETENTION`.
    case outbox
    /// Redelivery counts untouched for a week.
    case deliveryCounts = "delivery_counts"
    /// Refresh tokens past their expiry.
    case gatewayRefreshTokens = "gateway_refresh_tokens"
    /// App Attest challenges past their expiry.
    case gatewayAttestChallenges = "gateway_attest_challenges"
    /// The task's own history, after 90 days.
    case maintenanceRuns = "maintenance_runs"
    /// Stories nobody opened for `CHILD_DATA_RETENTION` (their illustration files are handed to
    /// the story-worker).
    case stories = "stories.stories"
    /// The pages of those stories (deleted with them).
    case storyPages = "stories.pages"
    /// Children nobody opened for `CHILD_DATA_RETENTION` who have no story left.
    case childProfiles = "stories.child_profiles"
    /// Users' exports (their zips) past their `expires_at` (USER_EXPORT_TTL_SECONDS).
    case userExports = "user_exports"
    /// Stored chart results not used for `CHART_RESULT_RETENTION`, or never read for
    /// `CHART_RESULT_UNREAD_RETENTION`.
    case chartResults = "chart_results"
}

/// What one retention pass did.
public struct RetentionReport: Sendable, Equatable {
    /// Rows deleted per table (for a dry run: rows that would be, counted up to `dryRunCountCap`).
    public var deleted: [RetentionTable: Int] = [:]
    /// Statements run that deleted (or, dry, counted) rows.
    public var batches = 0
    /// Whether everything due was deleted; false when the time budget ran out or a batch met a
    /// lock it would have had to wait for (the rest waits for the next run).
    public var complete = true
    /// Why the pass stopped early, when it did.
    public var stoppedBecause: String?

    public init() {}

    /// The total over every table.
    public var total: Int { deleted.values.reduce(0, +) }
}

/// Deletes finished, old rows in small batches, each its own short transaction with a lock
/// timeout, so that retention never holds a lock a worker waits for for long and never blocks
/// behind one: a batch that would wait is abandoned (the run ends `partial`) rather than queued
/// behind a worker's transaction.
///
/// What it may delete is also bounded by the database: as `astro_maintenance` (migration 0021)
/// it can delete only finished jobs and sent outbox rows, and nothing of the ledger.
public struct Retention: Sendable {
    // Every delete names its rows as `id = ANY(ARRAY(…))` of a bounded subquery, so the plan is
    // a primary-key lookup per row whatever the statistics say: a join with the batch could be
    // planned as a hash join over the whole table, a full scan per batch.

    /// The statement and lock timeouts of every batch.
    public static let lockTimeout = "2s"
    public static let statementTimeout = "60s"
    /// A dry run counts at most this many rows per table (and says "at least").
    public static let dryRunCountCap = 1_000_000
    /// Redelivery counts are kept a week, as the workers' own clearing does.
    public static let deliveryCountRetention: TimeInterval = 7 * 86_400
    /// The task's own history is kept 90 days.
    public static let runHistoryRetention: TimeInterval = 90 * 86_400

    let pool: PostgresPool
    let configuration: RetentionConfiguration
    let logger: Logger

    /// - Parameters:
    ///   - pool: connections as `astro_maintenance` (or the owner).
    ///   - configuration: the ages and the batch size.
    ///   - logger: receives one line per table and per abandoned batch.
    public init(pool: PostgresPool, configuration: RetentionConfiguration, logger: Logger) {
        self.pool = pool
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs one pass over every table.
    ///
    /// - Parameters:
    ///   - now: the moment the ages are counted from (a run `--as-of` an earlier moment deletes
    ///     a subset of what a run now would).
    ///   - dryRun: count what would be deleted, delete nothing.
    ///   - deadline: stop starting new batches after this instant.
    /// - Returns: what was deleted (or would be).
    /// - Throws: `PostgresError` for anything but a lock or statement timeout (those end the
    ///   table's pass and make the report incomplete).
    public func run(now: Date, dryRun: Bool, deadline: ContinuousClock.Instant) async throws -> RetentionReport {
        var report = RetentionReport()
        let jobCutoff = now.addingTimeInterval(-seconds(configuration.jobRetention))
        let outboxCutoff = now.addingTimeInterval(-seconds(configuration.outboxRetention))
        let countCutoff = now.addingTimeInterval(-Self.deliveryCountRetention)
        let historyCutoff = now.addingTimeInterval(-Self.runHistoryRetention)
        if dryRun {
            try await countDue(into: &report, jobCutoff: jobCutoff, outboxCutoff: outboxCutoff, now: now)
            return report
        }
        let batch = configuration.batchSize
        try await pass(.jobs, into: &report, deadline: deadline) { database, _ in
            let row = try database.query(
                """
                WITH deleted AS (
                    DELETE FROM jobs
                    WHERE id = ANY(ARRAY(
                        SELECT id FROM jobs WHERE finished_at < $1 AND status IN ('succeeded', 'failed', 'dead', 'cancelled')
                        ORDER BY finished_at LIMIT $2
                    ))
                    AND finished_at < $1 AND status IN ('succeeded', 'failed', 'dead', 'cancelled')
                    RETURNING id
                ), records AS (
                    DELETE FROM gateway_jobs WHERE job_id = ANY(ARRAY(SELECT id FROM deleted)) RETURNING 1
                )
                SELECT (SELECT count(*) FROM deleted) AS jobs, (SELECT count(*) FROM records) AS records
                """,
                [jobCutoff, batch]
            ).first
            let jobs = try row?.decode(Int.self, "jobs") ?? 0
            return BatchOutcome(
                deleted: [.jobs: jobs, .gatewayJobs: try row?.decode(Int.self, "records") ?? 0],
                // Fewer than a batch: none left, or a row changed under the statement (the
                // next run takes it).
                more: jobs == batch
            )
        }
        // outbox.id grows with time, sent_at has no index (one more index on the relay's hot
        // path): walk the primary key from the oldest row and stop at the first batch holding
        // nothing created before the cutoff (a row sent before the cutoff was created before it).
        try await pass(.outbox, into: &report, deadline: deadline) { database, cursor in
            let row = try database.query(
                """
                WITH batch AS MATERIALIZED (
                    SELECT id, created_at, sent_at FROM outbox WHERE id > $1 ORDER BY id LIMIT $2
                ), deleted AS (
                    DELETE FROM outbox
                    WHERE id = ANY(ARRAY(SELECT id FROM batch WHERE sent_at < $3)) AND sent_at < $3
                    RETURNING 1
                )
                SELECT (SELECT max(id) FROM batch) AS last_id, (SELECT count(*) FROM batch) AS scanned,
                       (SELECT count(*) FROM batch WHERE created_at < $3) AS old,
                       (SELECT count(*) FROM deleted) AS deleted
                """,
                [cursor, batch, outboxCutoff]
            ).first
            let scanned = try row?.decode(Int.self, "scanned") ?? 0
            let old = try row?.decode(Int.self, "old") ?? 0
            if let last = try row?.decode(Int64?.self, "last_id") { cursor = last }
            return BatchOutcome(
                deleted: [.outbox: try row?.decode(Int.self, "deleted") ?? 0],
                more: scanned > 0 && old > 0
            )
        }
        // Records of jobs that never ran: the publish was never confirmed (or the message never
        // reached a worker) and the window for a retry with the same key is over.
        try await pass(.gatewayJobs, into: &report, deadline: deadline) { database, _ in
            let deleted = try database.execute(
                """
                DELETE FROM gateway_jobs WHERE job_id = ANY(ARRAY(
                    SELECT g.job_id FROM gateway_jobs AS g
                    WHERE g.created_at < $1 AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = g.job_id)
                    LIMIT $2
                ))
                """,
                [jobCutoff, batch]
            )
            return BatchOutcome(deleted: [.gatewayJobs: deleted], more: deleted == batch)
        }
        try await simplePass(
            .deliveryCounts,
            into: &report,
            deadline: deadline,
            sql: """
                DELETE FROM delivery_counts WHERE digest = ANY(ARRAY(
                    SELECT digest FROM delivery_counts WHERE last_delivered_at < $1 LIMIT $2
                ))
                """,
            cutoff: countCutoff
        )
        try await simplePass(
            .gatewayRefreshTokens,
            into: &report,
            deadline: deadline,
            sql: """
                DELETE FROM gateway_refresh_tokens WHERE token_hash = ANY(ARRAY(
                    SELECT token_hash FROM gateway_refresh_tokens WHERE expires_at < $1 LIMIT $2
                ))
                """,
            cutoff: now
        )
        try await simplePass(
            .gatewayAttestChallenges,
            into: &report,
            deadline: deadline,
            sql: """
                DELETE FROM gateway_attest_challenges WHERE challenge_hash = ANY(ARRAY(
                    SELECT challenge_hash FROM gateway_attest_challenges WHERE expires_at < $1 LIMIT $2
                ))
                """,
            cutoff: now
        )
        try await simplePass(
            .maintenanceRuns,
            into: &report,
            deadline: deadline,
            sql: """
                DELETE FROM maintenance_runs WHERE id = ANY(ARRAY(
                    SELECT id FROM maintenance_runs WHERE started_at < $1 LIMIT $2
                ))
                """,
            cutoff: historyCutoff
        )
        try await simplePass(
            .userExports,
            into: &report,
            deadline: deadline,
            sql: """
                DELETE FROM user_exports WHERE id = ANY(ARRAY(
                    SELECT id FROM user_exports WHERE expires_at < $1 LIMIT $2
                ))
                """,
            cutoff: now
        )
        if let retention = configuration.chartResultRetention {
            try await simplePass(
                .chartResults,
                into: &report,
                deadline: deadline,
                sql: """
                    DELETE FROM chart_results WHERE id = ANY(ARRAY(
                        SELECT id FROM chart_results WHERE last_used_at < $1 LIMIT $2
                    ))
                    """,
                cutoff: now.addingTimeInterval(-seconds(retention))
            )
        }
        if let retention = configuration.chartResultUnreadRetention {
            // Results computed and never read (`read_at`, migration 0034): requested, perhaps
            // by a script, and not wanted; asked again, they are computed again.
            try await simplePass(
                .chartResults,
                into: &report,
                deadline: deadline,
                sql: """
                    DELETE FROM chart_results WHERE id = ANY(ARRAY(
                        SELECT id FROM chart_results WHERE read_at IS NULL AND created_at < $1 LIMIT $2
                    ))
                    """,
                cutoff: now.addingTimeInterval(-seconds(retention))
            )
        }
        if let retention = configuration.childDataRetention {
            try await expireChildrensData(
                cutoff: now.addingTimeInterval(-seconds(retention)),
                into: &report,
                deadline: deadline
            )
        }
        return report
    }

    /// Children's data not opened since `cutoff`, a batch at a time, through
    /// `stories.expire_unopened` (migration 0029): the maintenance role has no delete right of
    /// its own on the stories schema, and the function refuses a cutoff nearer than 30 days.
    private func expireChildrensData(
        cutoff: Date,
        into report: inout RetentionReport,
        deadline: ContinuousClock.Instant
    ) async throws {
        let batch = configuration.batchSize
        try await pass(.stories, into: &report, deadline: deadline) { database, _ in
            let row = try database.query(
                "SELECT stories, pages, children FROM stories.expire_unopened($1, $2::integer)",
                [cutoff, batch]
            ).first
            let stories = try row?.decode(Int.self, "stories") ?? 0
            let children = try row?.decode(Int.self, "children") ?? 0
            return BatchOutcome(
                deleted: [
                    .stories: stories, .storyPages: try row?.decode(Int.self, "pages") ?? 0,
                    .childProfiles: children,
                ],
                more: stories == batch || children == batch
            )
        }
        logger.info(
            "children's data retention",
            metadata: [
                "stories": "\(report.deleted[.stories] ?? 0)",
                "pages": "\(report.deleted[.storyPages] ?? 0)",
                "child_profiles": "\(report.deleted[.childProfiles] ?? 0)",
            ]
        )
    }

    struct BatchOutcome {
        var deleted: [RetentionTable: Int]
        var more: Bool
    }

    private func simplePass(
        _ table: RetentionTable,
        into report: inout RetentionReport,
        deadline: ContinuousClock.Instant,
        sql: SQL,
        cutoff: Date
    ) async throws {
        let batch = configuration.batchSize
        try await pass(table, into: &report, deadline: deadline) { database, _ in
            let deleted = try database.execute(sql, [cutoff, batch])
            return BatchOutcome(deleted: [table: deleted], more: deleted == batch)
        }
    }

    /// Runs `batch` until it says there is no more, the deadline passes, or a batch times out.
    /// `batch` may move a cursor (a key to continue after), kept from one batch to the next.
    private func pass(
        _ table: RetentionTable,
        into report: inout RetentionReport,
        deadline: ContinuousClock.Instant,
        batch: @escaping @Sendable (PostgresConnection, inout Int64) throws -> BatchOutcome
    ) async throws {
        let started = ContinuousClock.now
        var cursor = Int64.min
        var deletedHere: [RetentionTable: Int] = [:]
        var more = true
        while more {
            if ContinuousClock.now >= deadline {
                report.complete = false
                report.stoppedBecause =
                    report.stoppedBecause ?? "RETENTION_MAX_DURATION reached during \(table.rawValue)"
                break
            }
            try Task.checkCancellation()
            let outcome: BatchOutcome
            do {
                let from = cursor
                (outcome, cursor) = try await pool.withTransaction { database in
                    try database.execute("SELECT set_config('lock_timeout', $1, true)", [Self.lockTimeout])
                    try database.execute("SELECT set_config('statement_timeout', $1, true)", [Self.statementTimeout])
                    var next = from
                    let outcome = try batch(database, &next)
                    return (outcome, next)
                }
            } catch let error as PostgresError where Self.isTimeout(error) {
                // A worker (or an operator's replay) holds a row this batch wanted: give way.
                logger.warning(
                    "retention batch abandoned; the rest waits for the next run",
                    metadata: ["table": "\(table.rawValue)", "error": "\(error)"]
                )
                report.complete = false
                report.stoppedBecause = report.stoppedBecause ?? "\(table.rawValue): \(error.message)"
                break
            }
            report.batches += 1
            for (name, count) in outcome.deleted {
                deletedHere[name, default: 0] += count
                report.deleted[name, default: 0] += count
            }
            more = outcome.more
        }
        let elapsed = ContinuousClock.now - started
        logger.info(
            "retention pass",
            metadata: [
                "table": "\(table.rawValue)",
                "deleted_rows": "\(deletedHere[table] ?? 0)",
                "duration_ms":
                    "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)",
            ]
        )
    }

    /// 55P03 lock_not_available, 57014 query_canceled (statement_timeout).
    static func isTimeout(_ error: PostgresError) -> Bool {
        error.sqlState == "55P03" || error.sqlState == "57014"
    }

    /// A dry run: what each table would lose, counted up to `dryRunCountCap`.
    private func countDue(
        into report: inout RetentionReport,
        jobCutoff: Date,
        outboxCutoff: Date,
        now: Date
    ) async throws {
        let cap = Self.dryRunCountCap
        let countCutoff = now.addingTimeInterval(-Self.deliveryCountRetention)
        let historyCutoff = now.addingTimeInterval(-Self.runHistoryRetention)
        // With children's retention off, a cutoff before any row counts nothing.
        let childCutoff =
            configuration.childDataRetention.map { now.addingTimeInterval(-seconds($0)) }
            ?? Date(timeIntervalSince1970: 0)
        let chartResultCutoff =
            configuration.chartResultRetention.map { now.addingTimeInterval(-seconds($0)) }
            ?? Date(timeIntervalSince1970: 0)
        let unreadChartResultCutoff =
            configuration.chartResultUnreadRetention.map { now.addingTimeInterval(-seconds($0)) }
            ?? Date(timeIntervalSince1970: 0)
        let row = try await pool.withTransaction { database in
            try database.execute("SELECT set_config('statement_timeout', $1, true)", ["300s"])
            return try database.query(
                """
                SELECT
                  (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE finished_at < $1
                      AND status IN ('succeeded', 'failed', 'dead', 'cancelled') LIMIT $3) AS s) AS jobs,
                  (SELECT count(*) FROM (SELECT 1 FROM outbox WHERE sent_at < $2 LIMIT $3) AS s) AS outbox,
                  (SELECT count(*) FROM (SELECT 1 FROM gateway_jobs AS g WHERE g.created_at < $1 AND (
                      NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = g.job_id)
                      OR EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = g.job_id AND j.finished_at < $1))
                      LIMIT $3) AS s) AS gateway_jobs,
                  (SELECT count(*) FROM (SELECT 1 FROM delivery_counts WHERE last_delivered_at < $4 LIMIT $3) AS s)
                      AS delivery_counts,
                  (SELECT count(*) FROM (SELECT 1 FROM gateway_refresh_tokens WHERE expires_at < $5 LIMIT $3) AS s)
                      AS gateway_refresh_tokens,
                  (SELECT count(*) FROM (SELECT 1 FROM gateway_attest_challenges WHERE expires_at < $5 LIMIT $3) AS s)
                      AS gateway_attest_challenges,
                  (SELECT count(*) FROM (SELECT 1 FROM maintenance_runs WHERE started_at < $6 LIMIT $3) AS s)
                      AS maintenance_runs,
                  (SELECT count(*) FROM (SELECT 1 FROM stories.stories WHERE last_opened_at < $7 LIMIT $3) AS s)
                      AS "stories.stories",
                  (SELECT count(*) FROM (SELECT 1 FROM stories.pages WHERE story_id IN (
                      SELECT id FROM stories.stories WHERE last_opened_at < $7) LIMIT $3) AS s) AS "stories.pages",
                  (SELECT count(*) FROM (SELECT 1 FROM stories.child_profiles AS c WHERE c.last_opened_at < $7
                      AND NOT EXISTS (SELECT 1 FROM stories.stories AS t WHERE t.child_profile_id = c.id
                          AND t.last_opened_at >= $7) LIMIT $3) AS s) AS "stories.child_profiles",
                  (SELECT count(*) FROM (SELECT 1 FROM user_exports WHERE expires_at < $5 LIMIT $3) AS s)
                      AS user_exports,
                  (SELECT count(*) FROM (SELECT 1 FROM chart_results WHERE last_used_at < $8
                      OR (read_at IS NULL AND created_at < $9) LIMIT $3) AS s) AS chart_results
                """,
                [
                    jobCutoff, outboxCutoff, cap, countCutoff, now, historyCutoff, childCutoff, chartResultCutoff,
                    unreadChartResultCutoff,
                ]
            ).first
        }
        report.batches += 1
        for table in RetentionTable.allCases {
            report.deleted[table] = try row?.decode(Int.self, table.rawValue) ?? 0
        }
    }

    private func seconds(_ duration: Duration) -> TimeInterval {
        TimeInterval(duration.components.seconds)
    }
}
