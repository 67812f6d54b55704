import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import UUIDText

/// Publishes committed outbox rows to the broker with publisher confirms and marks them sent.
///
/// Wakes at once when this process commits messages, and polls for rows other processes left
/// behind (a crash between commit and publish). Rows are claimed for a lease with
/// `FOR UPDATE SKIP LOCKED`, so several relays share the work without publishing a row twice
/// in the normal case; a relay that dies mid-batch only delays its rows until the lease ends,
/// after which another relay publishes them (at-least-once: consumers dedupe by jobId).
public final class OutboxRelay: Service, Sendable {
    /// How long a claimed row is this relay's before another may publish it.
    static let defaultLease: Duration = .seconds(30)

    private let pool: PostgresPool
    private let publisher: AMQPPublisher
    private let signal: WakeSignal
    private let batchSize: Int
    private let pollInterval: Duration
    private let lease: Duration
    private let metrics: WorkerMetrics
    private let logger: Logger

    init(
        pool: PostgresPool,
        publisher: AMQPPublisher,
        signal: WakeSignal,
        batchSize: Int,
        pollInterval: Duration,
        metrics: WorkerMetrics,
        logger: Logger,
        lease: Duration = OutboxRelay.defaultLease
    ) {
        self.pool = pool
        self.publisher = publisher
        self.signal = signal
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.lease = lease
        self.metrics = metrics
        self.logger = logger
    }

    /// Relays until graceful shutdown, then flushes what is pending once more and returns.
    public func run() async throws {
        let signal = self.signal
        let pollInterval = self.pollInterval
        // A ticker task turns the poll interval into wake-ups, so one loop serves both.
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: pollInterval)
                signal.notify()
            }
        }
        defer { ticker.cancel() }
        await cancelWhenGracefulShutdown {
            for await _ in signal.notifications {
                if Task.isCancelled { break }
                await self.drain()
            }
        }
        // Shutdown: the consumers have stopped (they shut down first); publish what they committed.
        await drain()
    }

    /// Publishes batches until nothing is pending or an error stops this round: first the rows
    /// this process's commits handed over (claimed when inserted), then any rows left claimable.
    func drain() async {
        while true {
            let handedOff = signal.takeHandedOff(limit: batchSize)
            if !handedOff.isEmpty {
                do {
                    try await publish(handedOff)
                } catch {
                    logger.warning("outbox relay round failed; will retry", metadata: [LogKey.reason: "\(error)"])
                }
                continue
            }
            do {
                let published = try await relayOnce()
                if published < batchSize { return }
            } catch {
                logger.warning("outbox relay round failed; will retry", metadata: [LogKey.reason: "\(error)"])
                return
            }
        }
    }

    /// Claims one batch, publishes it, records the outcome. Returns how many rows it claimed.
    func relayOnce() async throws -> Int {
        let batchSize = self.batchSize
        let lease = self.lease
        let pending = try await pool.withConnection { database in
            try JobStore.claimPending(limit: batchSize, lease: lease, database: database)
        }
        guard !pending.isEmpty else { return 0 }
        try await publish(pending)
        return pending.count
    }

    /// Publishes claimed rows with confirms and records which were sent; rows the broker did
    /// not confirm are released for a later retry.
    func publish(_ pending: [JobStore.PendingMessage]) async throws {
        let messages = pending.map { row in
            var properties = MessageProperties()
            properties.contentType = row.contentType
            properties.persistent = true
            properties.messageID = row.messageID.lowercasedText
            properties.timestamp = Date()
            if let jobID = row.jobID { properties.correlationID = jobID.lowercasedText }
            for (key, value) in row.message.headers { properties.headers[key] = .string(value) }
            return OutgoingMessage(
                exchange: row.message.exchange,
                routingKey: row.message.routingKey,
                body: row.message.body,
                properties: properties,
                mandatory: row.message.mandatory
            )
        }
        var failedIndices: [Int: AMQPError] = [:]
        do {
            try await publisher.publish(messages, timeout: .seconds(30))
        } catch let error as AMQPBatchError {
            failedIndices = error.failures
        } catch {
            // Nothing is known to be confirmed: leave every row to be retried.
            let ids = pending.map(\.id)
            let message = "\(error)"
            _ = try? await pool.withConnection { try JobStore.markFailed(ids: ids, error: message, database: $0) }
            metrics.recordOutbox(published: 0, failed: ids.count)
            throw error
        }
        let sent = pending.enumerated().filter { failedIndices[$0.offset] == nil }.map(\.element.id)
        let failed = pending.enumerated().filter { failedIndices[$0.offset] != nil }
        try await pool.withConnection { try JobStore.markSent(ids: sent, database: $0) }
        if !failed.isEmpty {
            for (index, row) in failed {
                logger.error(
                    "outbox message refused by the broker",
                    metadata: [
                        "outbox.id": "\(row.id)", "amqp.exchange": "\(row.message.exchange)",
                        "amqp.routing_key": "\(row.message.routingKey)",
                        LogKey.reason: "\(failedIndices[index].map { "\($0)" } ?? "")",
                    ]
                )
            }
            let ids = failed.map(\.element.id)
            let reason = failed.compactMap { failedIndices[$0.offset].map { "\($0)" } }.first ?? "refused"
            try await pool.withConnection { try JobStore.markFailed(ids: ids, error: reason, database: $0) }
        }
        metrics.recordOutbox(published: sent.count, failed: failed.count)
    }
}
