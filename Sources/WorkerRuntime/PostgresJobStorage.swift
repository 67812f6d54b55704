import AstroDomain
import Foundation
import Postgres

/// The production job store: the `jobs`, `outbox` and `delivery_counts` tables of PostgreSQL,
/// through a connection pool. Each row operation is one statement of `JobStore`'s SQL; handlers'
/// commits get the transaction's `PostgresConnection`.
package struct PostgresJobStorage: JobStorage {
    package typealias Transaction = PostgresConnection

    let pool: PostgresPool

    package init(pool: PostgresPool) {
        self.pool = pool
    }

    /// The row written once instead of inserted as running and rewritten as finished: one
    /// statement less per batch, and fewer row versions and index entries per job.
    package var writesFirstDeliveriesUnclaimed: Bool { true }

    /// - Throws: as `PostgresPool.withTransaction`.
    package func withTransaction<T: Sendable>(
        _ body: @Sendable @escaping (PostgresConnection) throws -> T
    ) async throws -> T {
        try await pool.withTransaction(body)
    }

    /// - Throws: as `PostgresPool.withConnection`.
    package func withConnection<T: Sendable>(
        _ body: @Sendable @escaping (PostgresConnection) throws -> T
    ) async throws -> T {
        try await pool.withConnection(body)
    }

    package func claim(_ jobs: [JobClaimRequest], in database: PostgresConnection) throws -> [JobID: JobClaim] {
        try JobStore.claim(jobs, database: database)
    }

    package func recorded(_ jobID: JobID, in database: PostgresConnection) throws -> RecordedJob? {
        try JobStore.recorded(jobID, database: database)
    }

    package func finish(_ jobs: [JobFinish], in database: PostgresConnection) throws -> Set<JobID> {
        try JobStore.finish(jobs, database: database)
    }

    package func enqueue(
        _ messages: [(message: OutboxMessage, jobID: JobID?)],
        lease: Duration?,
        in database: PostgresConnection
    ) throws -> [PendingOutboxMessage] {
        try JobStore.enqueueClaimed(messages, lease: lease, database: database)
    }

    package func recordAttempt(
        jobID: JobID,
        kind: JobType,
        attempt: Int,
        error: JobError,
        in database: PostgresConnection
    ) throws {
        try JobStore.recordAttempt(jobID: jobID, kind: kind, attempt: attempt, error: error, database: database)
    }

    package func countDelivery(
        queue: String,
        body: Data,
        atLeast: Int,
        in database: PostgresConnection
    ) throws -> Int {
        try JobStore.countDelivery(queue: queue, body: body, atLeast: atLeast, database: database)
    }

    package func uncountDelivery(queue: String, body: Data, in database: PostgresConnection) throws {
        try JobStore.uncountDelivery(queue: queue, body: body, database: database)
    }

    package func claimPending(
        limit: Int,
        lease: Duration,
        in database: PostgresConnection
    ) throws -> [PendingOutboxMessage] {
        try JobStore.claimPending(limit: limit, lease: lease, database: database)
    }

    package func markSent(ids: [Int64], in database: PostgresConnection) throws {
        try JobStore.markSent(ids: ids, database: database)
    }

    package func markFailed(ids: [Int64], error: String, in database: PostgresConnection) throws {
        try JobStore.markFailed(ids: ids, error: error, database: database)
    }
}
